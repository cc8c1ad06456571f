package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// adminRaw sends one admin API request and returns its status, media
// type and body.
func adminRaw(t *testing.T, method, url, token, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
}

// adminList gets an admin API list as admin and decodes it.
func adminList[T any](t *testing.T, url, token string) T {
	t.Helper()
	code, _, raw := adminRaw(t, http.MethodGet, url, token, "")
	var out T
	if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", url, code, raw, err)
	}
	return out
}

type capabilityView struct {
	Name         string   `json:"name"`
	Pack         string   `json:"pack"`
	PackEnabled  bool     `json:"pack_enabled"`
	Kind         string   `json:"kind"`
	Risk         string   `json:"risk"`
	Permission   string   `json:"permission"`
	Plugin       string   `json:"plugin"`
	OwnerGuarded bool     `json:"owner_guarded"`
	Roles        []string `json:"roles"`
}

// listedTools is what tools/list shows token.
func listedTools(t *testing.T, addr, token string) []string {
	t.Helper()
	res, rpcErr := rpc(t, addr, token, "tools/list", map[string]any{})
	if rpcErr != nil {
		t.Fatalf("tools/list as %s: %v", token, rpcErr)
	}
	var names []string
	for _, tool := range res["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	slices.Sort(names)
	return names
}

// TestAdminInventory: the admin API describes the running host — its
// capabilities with the roles that may call each (which agree with what
// tools/list shows each token, and follow the kill switch), its packs,
// its real plugin process, and its tokens without their secrets — to
// admin-scope tokens only, every failure as problem details.
func TestAdminInventory(t *testing.T) {
	cfg := approvalsConfig(t, t.TempDir(), "",
		"  - {token: approver-token, role: ops, scope: admin, user_id: ops}\n  - {token: viewer-token, label: viewer, role: viewer, scope: read, user_id: carol}",
		`ops: ["*"], viewer: [booking.read, events.read]`)
	bin, err := os.ReadFile(bookingBin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bin)
	cfg.Plugins[0].SHA256 = hex.EncodeToString(sum[:])
	addr, _ := serveSearch(t, cfg, nil)
	base := "http://" + addr + "/api/v1/admin/"
	admin := "approver-token"

	// Who may reach it.
	for _, path := range []string{"capabilities", "packs", "plugins", "tokens"} {
		for _, token := range []string{"", "not-a-token-at-all"} {
			if code, _, raw := adminRaw(t, http.MethodGet, base+path, token, ""); code != http.StatusNotFound {
				t.Errorf("%s as %q: %d %s; want the flat 404", path, token, code, raw)
			}
		}
		code, ctype, raw := adminRaw(t, http.MethodGet, base+path, "govern-token-1", "")
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil || code != http.StatusForbidden || ctype != "application/problem+json" ||
			p["status"] != 403.0 || p["title"] != "Forbidden" || p["type"] != "about:blank" || p["detail"] == "" {
			t.Errorf("%s as an action token: %d %q %s; want a 403 problem", path, code, ctype, raw)
		}
	}

	caps := adminList[struct {
		Capabilities []capabilityView `json:"capabilities"`
	}](t, base+"capabilities", admin).Capabilities
	byName := map[string]capabilityView{}
	for _, c := range caps {
		byName[c.Name] = c
	}
	cancel := byName["booking.cancel"]
	if cancel.Kind != "action" || cancel.Risk != "dangerous" || !cancel.OwnerGuarded || cancel.Plugin != "booking" || cancel.Pack != "booking" ||
		!cancel.PackEnabled || !slices.Equal(cancel.Roles, []string{"ops", "r"}) {
		t.Errorf("booking.cancel as %+v", cancel)
	}
	if poll := byName["events.poll"]; poll.Plugin != "capgate" || !slices.Equal(poll.Roles, []string{"ops", "r", "viewer"}) {
		t.Errorf("events.poll as %+v", poll)
	}
	// "May call" is what the gate does: a token's tools/list is exactly
	// the capabilities its role may call at its scope.
	mayCall := func(role string, actions bool) []string {
		var out []string
		for _, c := range caps {
			if slices.Contains(c.Roles, role) && (actions || c.Kind == "read") {
				out = append(out, c.Name)
			}
		}
		return out
	}
	if got, want := listedTools(t, addr, "govern-token-1"), mayCall("r", true); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("role r, scope action: tools/list %v; the admin API says %v", got, want)
	}
	if got, want := listedTools(t, addr, "viewer-token"), mayCall("viewer", false); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("role viewer, scope read: tools/list %v; the admin API says %v", got, want)
	}

	// Filters, and their mistakes.
	booking := adminList[struct {
		Capabilities []capabilityView `json:"capabilities"`
	}](t, base+"capabilities?pack=booking&role=viewer", admin).Capabilities
	if len(booking) == 0 {
		t.Fatal("no booking capability the viewer may call")
	}
	for _, c := range booking {
		if c.Pack != "booking" || !slices.Contains(c.Roles, "viewer") || c.Kind != "read" {
			t.Errorf("pack=booking&role=viewer gave %+v", c)
		}
	}
	code, ctype, raw := adminRaw(t, http.MethodGet, base+"capabilities?pack=bookings&role=root", admin, "")
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Errors []struct {
			Parameter string `json:"parameter"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &p); err != nil || code != http.StatusBadRequest || ctype != "application/problem+json" || p.Status != 400 ||
		len(p.Errors) != 2 || p.Errors[0].Parameter != "pack" || p.Errors[1].Parameter != "role" || !strings.Contains(p.Detail, `role "root" is not configured`) {
		t.Errorf("unknown pack and role: %d %q %s", code, ctype, raw)
	}

	// The kill switch thrown through the admin API: no role may call an
	// action, and reads stay as they were.
	if code, _, raw := adminRaw(t, http.MethodPut, base+"actions", admin, `{"enabled": false}`); code != http.StatusOK {
		t.Fatalf("kill switch: %d %s", code, raw)
	}
	off := adminList[struct {
		Capabilities []capabilityView `json:"capabilities"`
	}](t, base+"capabilities", admin).Capabilities
	for _, c := range off {
		if c.Kind == "action" && len(c.Roles) != 0 {
			t.Errorf("actions off, yet %s may be called by %v", c.Name, c.Roles)
		}
		if c.Kind == "read" && !slices.Equal(c.Roles, byName[c.Name].Roles) {
			t.Errorf("actions off changed who may read %s: %v, was %v", c.Name, c.Roles, byName[c.Name].Roles)
		}
	}
	if code, _, raw := adminRaw(t, http.MethodPut, base+"actions", admin, `{"enabled": true}`); code != http.StatusOK {
		t.Fatalf("kill switch: %d %s", code, raw)
	}

	packs := adminList[struct {
		Packs []struct {
			Name         string `json:"name"`
			Enabled      bool   `json:"enabled"`
			Capabilities int    `json:"capabilities"`
		} `json:"packs"`
	}](t, base+"packs", admin).Packs
	got := map[string]string{}
	for _, p := range packs {
		got[p.Name] = strconv.FormatBool(p.Enabled) + "/" + strconv.Itoa(p.Capabilities)
	}
	nBooking := 0
	for _, c := range caps {
		if c.Pack == "booking" {
			nBooking++
		}
	}
	for name, want := range map[string]string{"booking": "true/" + strconv.Itoa(nBooking), "approvals": "true/2", "events": "true/1", "subscription": "false/0", "llm": "false/0"} {
		if got[name] != want {
			t.Errorf("pack %s: %q, want enabled/count %q (all: %v)", name, got[name], want, got)
		}
	}

	plugins := adminList[struct {
		Plugins []struct {
			Name         string `json:"name"`
			State        string `json:"state"`
			PID          int    `json:"pid"`
			Restarts     int    `json:"restarts"`
			Version      string `json:"version"`
			SHA256       string `json:"sha256"`
			InFlight     int    `json:"in_flight"`
			MaxInFlight  int    `json:"max_in_flight"`
			Capabilities int    `json:"capabilities"`
		} `json:"plugins"`
	}](t, base+"plugins", admin).Plugins
	if len(plugins) != 1 {
		t.Fatalf("plugins %+v; want the booking plugin", plugins)
	}
	bp := plugins[0]
	if bp.Name != "booking" || bp.State != "running" || bp.Restarts != 0 || bp.Version == "" || bp.SHA256 != hex.EncodeToString(sum[:]) ||
		bp.InFlight != 0 || bp.MaxInFlight != 256 || bp.Capabilities != nBooking {
		t.Errorf("booking plugin as %+v", bp)
	}
	if bp.PID <= 0 {
		t.Errorf("pid %d; want the running process's", bp.PID)
	} else if _, err := os.Stat("/proc/self/exe"); err == nil {
		if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(bp.PID), "exe")); err != nil || exe != bookingBin {
			t.Errorf("pid %d runs %q (%v), not the booking plugin", bp.PID, exe, err)
		}
	}

	code, _, raw = adminRaw(t, http.MethodGet, base+"tokens", admin, "")
	var tokens struct {
		Tokens []map[string]string `json:"tokens"`
	}
	if err := json.Unmarshal(raw, &tokens); err != nil || code != http.StatusOK || len(tokens.Tokens) != 4 {
		t.Fatalf("tokens: %d %s", code, raw)
	}
	if v := tokens.Tokens[2]; v["label"] != "viewer" || v["role"] != "viewer" || v["scope"] != "read" || v["user_id"] != "carol" || len(v) != 4 {
		t.Errorf("viewer's token as %v", v)
	}
	for _, secret := range []string{"govern-token", "approver-token", "viewer-token", "sha256"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("tokens answer holds %q: %s", secret, raw)
		}
	}
	if code, ctype, raw := adminRaw(t, http.MethodGet, base+"tokens?label=viewer", admin, ""); code != http.StatusBadRequest || ctype != "application/problem+json" {
		t.Errorf("tokens with a parameter: %d %q %s", code, ctype, raw)
	}
}
