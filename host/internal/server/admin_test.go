package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/internal/registry"
)

// inventory is a host's description held in memory, as the host hands it
// to the admin API.
type inventory struct {
	caps    CapabilityList
	packs   []PackInfo
	plugins []PluginInfo
	tokens  []TokenInfo
}

func (i *inventory) Capabilities() CapabilityList { return i.caps }
func (i *inventory) Packs() []PackInfo            { return i.packs }
func (i *inventory) Plugins() []PluginInfo        { return i.plugins }
func (i *inventory) Tokens() []TokenInfo          { return i.tokens }

func testInventory() *inventory {
	return &inventory{
		caps: CapabilityList{
			Capabilities: []CapabilityInfo{
				{Name: "booking.cancel", Pack: "booking", PackEnabled: true, Kind: "action", Risk: "dangerous", Permission: "booking.write", Plugin: "booking", OwnerGuarded: true, Roles: []string{"admin", "customer"}},
				{Name: "booking.list", Pack: "booking", PackEnabled: true, Kind: "read", Risk: "safe", Permission: "booking.read", Plugin: "booking", OwnerGuarded: false, Roles: []string{"admin", "customer", "viewer"}},
				{Name: "llm.ask", Pack: "llm", PackEnabled: false, Kind: "read", Risk: "safe", Permission: "llm.ask", Plugin: "llm"},
			},
			Packs: []string{"booking", "llm", "search"},
			Roles: []string{"admin", "customer", "viewer"},
		},
		packs: []PackInfo{{Name: "booking", Enabled: true, Capabilities: 2}, {Name: "llm", Capabilities: 1}, {Name: "search"}},
		plugins: []PluginInfo{
			{Name: "booking", State: "running", Since: auditT0, PID: 4242, Restarts: 1, Version: "1.2.3", SHA256: strings.Repeat("ab", 32), InFlight: 2, MaxInFlight: 256, Capabilities: 2,
				DiedAt: auditT0.Add(-time.Minute), DiedReason: "process exited: signal: killed"},
		},
		tokens: []TokenInfo{{Label: "shop", Role: "customer", Scope: "action", UserID: "alice"}, {Label: "ops", Role: "admin", Scope: "admin"}},
	}
}

// adminGet sends one request to the admin API with token (none when
// empty).
func adminGet(t *testing.T, srv *Server, method, target, token, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec
}

// problemOf decodes a problem details answer, checking its shape: the
// media type, every member of RFC 9457 the API promises, and nothing
// else.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder, status int) Problem {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != MIMEProblemJSON {
		t.Fatalf("Content-Type %q, want %s", ct, MIMEProblemJSON)
	}
	var p Problem
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem %s: %v", rec.Body, err)
	}
	var members map[string]json.RawMessage
	_ = json.Unmarshal(rec.Body.Bytes(), &members)
	for _, m := range []string{"type", "title", "status", "detail"} {
		if _, ok := members[m]; !ok {
			t.Errorf("problem %s lacks member %q", rec.Body, m)
		}
	}
	if p.Type != "about:blank" || p.Title != http.StatusText(status) || p.Status != status || p.Detail == "" {
		t.Fatalf("problem %+v; want type about:blank, title %q, status %d and a detail", p, http.StatusText(status), status)
	}
	return p
}

var inventoryPaths = []string{AdminCapabilitiesPath, AdminPacksPath, AdminPluginsPath, AdminTokensPath}

// TestInventoryAccess: only admin-scope tokens read the host's
// description; another token gets 403 as problem details; without a
// token, with an unknown one, or on a host that serves no inventory, the
// routes cannot be told from absent ones.
func TestInventoryAccess(t *testing.T) {
	srv := newFixture(t, func(o *Options) { o.Inventory = testInventory() }).srv
	for _, path := range inventoryPaths {
		t.Run(path, func(t *testing.T) {
			if rec := adminGet(t, srv, http.MethodGet, path, adminToken, ""); rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("admin token: %d %q %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
			}
			p := problemOf(t, adminGet(t, srv, http.MethodGet, path, aliceToken, ""), http.StatusForbidden)
			if p.Detail != forbiddenScope || strings.Contains(p.Detail, "booking") {
				t.Fatalf("action token: %+v", p)
			}
			absent := func(srv *Server, token string) {
				t.Helper()
				dump := func(target string) []byte {
					rec := adminGet(t, srv, http.MethodGet, target, token, "")
					var b bytes.Buffer
					_ = rec.Result().Header.Write(&b)
					return append(b.Bytes(), rec.Body.Bytes()...)
				}
				if route, unknown := dump(path), dump("/api/v1/admin/nothing-here"); !bytes.Equal(route, unknown) {
					t.Fatalf("route answers differently from an absent one:\n%s\n---\n%s", route, unknown)
				}
			}
			absent(srv, "")
			absent(srv, "unknown-token-0123456789")
			none := newFixture(t, nil).srv
			absent(none, adminToken)
			absent(none, aliceToken)
		})
	}
}

// TestInventoryBodies: each route answers its list under its name, with
// the documented fields and no others; a token's secret and hash are in
// no answer.
func TestInventoryBodies(t *testing.T) {
	inv := testInventory()
	srv := newFixture(t, func(o *Options) { o.Inventory = inv }).srv
	get := func(path string) map[string][]map[string]any {
		rec := adminGet(t, srv, http.MethodGet, path, adminToken, "")
		var out map[string][]map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s (%v)", path, rec.Code, rec.Body, err)
		}
		return out
	}
	fields := func(m map[string]any) []string {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys
	}
	for _, tc := range []struct {
		path, list string
		n          int
		fields     []string
	}{
		{AdminCapabilitiesPath, "capabilities", 3, []string{"kind", "name", "owner_guarded", "pack", "pack_enabled", "permission", "plugin", "risk", "roles"}},
		{AdminPacksPath, "packs", 3, []string{"capabilities", "enabled", "name"}},
		{AdminPluginsPath, "plugins", 1, []string{"capabilities", "died_at", "died_reason", "in_flight", "max_in_flight", "name", "pid", "restarts", "sha256", "since", "state", "version"}},
		{AdminTokensPath, "tokens", 2, []string{"label", "role", "scope", "user_id"}},
	} {
		out := get(tc.path)
		if len(out) != 1 || len(out[tc.list]) != tc.n {
			t.Fatalf("%s: %v; want %d %s", tc.path, out, tc.n, tc.list)
		}
		if got := fields(out[tc.list][0]); !slices.Equal(got, tc.fields) {
			t.Errorf("%s: fields %v, want %v", tc.path, got, tc.fields)
		}
	}
	caps := get(AdminCapabilitiesPath)["capabilities"]
	if roles, ok := caps[2]["roles"].([]any); !ok || len(roles) != 0 {
		t.Errorf("a capability no role may call: roles %v; want [] (never null)", caps[2]["roles"])
	}
	if c := caps[0]; c["name"] != "booking.cancel" || c["kind"] != "action" || c["risk"] != "dangerous" || c["owner_guarded"] != true || c["pack_enabled"] != true {
		t.Errorf("booking.cancel as %v", c)
	}
	p := get(AdminPluginsPath)["plugins"][0]
	if p["pid"] != 4242.0 || p["since"] != "2030-01-07T09:00:00Z" || p["sha256"] != strings.Repeat("ab", 32) || p["in_flight"] != 2.0 || p["restarts"] != 1.0 {
		t.Errorf("plugin as %v", p)
	}
	// A plugin that never died says nothing of a death.
	inv.plugins = append(inv.plugins, PluginInfo{Name: "search", State: "running", Since: auditT0})
	if q := get(AdminPluginsPath)["plugins"][1]; q["died_at"] != nil || q["died_reason"] != nil || q["detail"] != nil {
		t.Errorf("a plugin that never died: %v", q)
	}
	rec := adminGet(t, srv, http.MethodGet, AdminTokensPath, adminToken, "")
	for _, secret := range []string{"token_sha256", "sha256", adminToken, aliceToken} {
		if strings.Contains(rec.Body.String(), secret) {
			t.Errorf("tokens answer holds %q: %s", secret, rec.Body)
		}
	}
}

// TestCapabilityFilters: pack and role select capabilities; anything
// else about the query is a 400 naming the parameter, listing every
// problem, and the caller's input comes back bounded.
func TestCapabilityFilters(t *testing.T) {
	srv := newFixture(t, func(o *Options) { o.Inventory = testInventory() }).srv
	for _, tc := range []struct {
		query url.Values
		want  []string
	}{
		{url.Values{}, []string{"booking.cancel", "booking.list", "llm.ask"}},
		{url.Values{"pack": {"booking"}}, []string{"booking.cancel", "booking.list"}},
		{url.Values{"pack": {"search"}}, []string{}},
		{url.Values{"role": {"viewer"}}, []string{"booking.list"}},
		{url.Values{"role": {"customer"}}, []string{"booking.cancel", "booking.list"}},
		{url.Values{"role": {"customer"}, "pack": {"llm"}}, []string{}},
	} {
		rec := adminGet(t, srv, http.MethodGet, AdminCapabilitiesPath+"?"+tc.query.Encode(), adminToken, "")
		var out struct {
			Capabilities []CapabilityInfo `json:"capabilities"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK || out.Capabilities == nil {
			t.Fatalf("%s: %d %s (%v)", tc.query.Encode(), rec.Code, rec.Body, err)
		}
		got := []string{}
		for _, c := range out.Capabilities {
			got = append(got, c.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.query.Encode(), got, tc.want)
		}
	}

	long := strings.Repeat("p", 5000)
	for _, tc := range []struct {
		query  string
		params []string // the parameters the problems name, in order
		want   string   // in the detail
	}{
		{"pack=bookings", []string{"pack"}, `pack "bookings" is not known here; known: booking, llm, search`},
		{"role=root", []string{"role"}, `role "root" is not configured; configured: admin, customer, viewer`},
		{"colour=red", []string{"colour"}, `unknown parameter "colour"; known: pack, role`},
		{"Pack=booking", []string{"Pack"}, `unknown parameter "Pack"`},
		{"pack=booking&pack=llm", []string{"pack"}, "parameter pack is given 2 times"},
		{"role=", []string{"role"}, "parameter role is empty"},
		{"pack=" + long, []string{"pack"}, "parameter pack is 5000 bytes"},
		{"pack=nope&role=nobody", []string{"pack", "role"}, `2 problems: pack "nope" is not known here`},
		{"colour=red&role=", []string{"colour", "role"}, "2 problems"},
		{long + "=1", []string{long[:64] + "…"}, "unknown parameter"},
	} {
		t.Run(tc.query[:min(len(tc.query), 40)], func(t *testing.T) {
			p := problemOf(t, adminGet(t, srv, http.MethodGet, AdminCapabilitiesPath+"?"+tc.query, adminToken, ""), http.StatusBadRequest)
			if !strings.Contains(p.Detail, tc.want) {
				t.Errorf("detail %q; want it to contain %q", p.Detail, tc.want)
			}
			var params []string
			for _, it := range p.Errors {
				params = append(params, it.Parameter)
				if it.Detail == "" {
					t.Errorf("problem %+v has no detail", it)
				}
			}
			if !slices.Equal(params, tc.params) {
				t.Errorf("problems name %v, want %v", params, tc.params)
			}
			if len(p.Detail) > 600 {
				t.Errorf("detail is %d bytes: caller input must be bounded in it", len(p.Detail))
			}
		})
	}

	// Thousands of parameters: ten problems are listed, the rest counted.
	var q []string
	for i := range 300 {
		q = append(q, "x"+strings.Repeat("y", i%50)+string(rune('a'+i%26))+"=1")
	}
	p := problemOf(t, adminGet(t, srv, http.MethodGet, AdminCapabilitiesPath+"?"+strings.Join(q, "&"), adminToken, ""), http.StatusBadRequest)
	if len(p.Errors) != maxProblemItems || !strings.Contains(p.Detail, "more") || len(p.Detail) > 2000 {
		t.Errorf("%d problems listed, detail of %d bytes: %q", len(p.Errors), len(p.Detail), p.Detail)
	}
}

// TestInventoryRoutesTakeNoParameters: the lists are whole; a parameter
// is a mistake, named.
func TestInventoryRoutesTakeNoParameters(t *testing.T) {
	srv := newFixture(t, func(o *Options) { o.Inventory = testInventory() }).srv
	for _, path := range []string{AdminPacksPath, AdminPluginsPath, AdminTokensPath} {
		p := problemOf(t, adminGet(t, srv, http.MethodGet, path+"?role=admin&limit=2", adminToken, ""), http.StatusBadRequest)
		if len(p.Errors) != 2 || p.Errors[0].Parameter != "limit" || p.Errors[1].Parameter != "role" || !strings.Contains(p.Detail, "takes none") {
			t.Errorf("%s: %+v", path, p)
		}
	}
}

// switchboard is the kill switch held in memory; fail makes the next
// change fail as the database would.
type switchboard struct {
	mu   sync.Mutex
	st   ActionsState
	fail error
}

func (s *switchboard) Actions() ActionsState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *switchboard) SetActions(_ context.Context, enabled bool, by string) (ActionsState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return ActionsState{}, s.fail
	}
	s.st = ActionsState{Enabled: enabled, Config: true, Switch: enabled, ChangedAt: auditT0, ChangedBy: by}
	return s.st, nil
}

// TestActionsProblems: the kill switch's failures are problem details;
// its answers on success keep their shape.
func TestActionsProblems(t *testing.T) {
	sw := &switchboard{st: ActionsState{Enabled: true, Config: true, Switch: true}}
	srv := newFixture(t, func(o *Options) { o.Admin = sw }).srv
	if rec := adminGet(t, srv, http.MethodPut, AdminActionsPath, adminToken, `{"enabled": false}`); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), `"enabled":false`) || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	problemOf(t, adminGet(t, srv, http.MethodGet, AdminActionsPath, aliceToken, ""), http.StatusForbidden)
	for _, body := range []string{`{"enabled": "no"}`, `{}`, `{"enabled": true, "why": 1}`, `{"enabled": true}{}`, strings.Repeat(" ", maxAdminBody+1)} {
		if p := problemOf(t, adminGet(t, srv, http.MethodPut, AdminActionsPath, adminToken, body), http.StatusBadRequest); !strings.Contains(p.Detail, `{"enabled": true|false}`) {
			t.Errorf("body %.40q: detail %q", body, p.Detail)
		}
	}
	sw.fail = errors.New("database is locked")
	if p := problemOf(t, adminGet(t, srv, http.MethodPut, AdminActionsPath, adminToken, `{"enabled": true}`), http.StatusServiceUnavailable); strings.Contains(p.Detail, "locked") {
		t.Errorf("the cause leaked to the caller: %q", p.Detail)
	}
	sw.fail = context.DeadlineExceeded
	if p := problemOf(t, adminGet(t, srv, http.MethodPut, AdminActionsPath, adminToken, `{"enabled": true}`), http.StatusServiceUnavailable); !strings.Contains(p.Detail, "in time") {
		t.Errorf("deadline: detail %q", p.Detail)
	}
}

// TestApprovalsProblems: each failure of the held calls' routes is
// problem details with its status, over a real store.
func TestApprovalsProblems(t *testing.T) {
	store, err := approvals.Open(context.Background(), "", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	a, err := store.Create(context.Background(), approvals.Request{TokenLabel: "shop", Role: "customer", Scope: "action", UserID: "u-alice",
		Capability: "booking.cancel", Args: []byte(`{"id":"b-1"}`), Risk: registry.RiskDangerous, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	srv := newFixture(t, func(o *Options) { o.Approvals = store }).srv
	base := AdminApprovalsPath
	for _, tc := range []struct {
		method, target, token, body string
		status                      int
		want                        string
	}{
		{"GET", base, aliceToken, "", http.StatusForbidden, forbiddenScope},
		{"GET", base + "?colour=" + "red", adminToken, "", http.StatusBadRequest, `unknown query parameter "colour"`},
		{"GET", base + "?" + strings.Repeat("k", 3000) + "=1", adminToken, "", http.StatusBadRequest, "unknown query parameter"},
		{"GET", base + "?limit=many", adminToken, "", http.StatusBadRequest, "limit must be a whole number"},
		{"GET", base + "?status=lost", adminToken, "", http.StatusBadRequest, "invalid approval request"},
		{"GET", base + "/ap_none", adminToken, "", http.StatusNotFound, "no such approval request"},
		{"POST", base + "/" + a.ID + "/approve", adminToken, `{"reason": 7}`, http.StatusBadRequest, "want an empty body"},
		{"POST", base + "/" + a.ID + "/approve", adminToken, strings.Repeat("x", maxAdminBody+1), http.StatusBadRequest, "at most 4 KiB"},
		{"POST", base + "/" + a.ID + "/approve", adminToken, "", http.StatusOK, ""},
		{"POST", base + "/" + a.ID + "/reject", adminToken, "", http.StatusConflict, "decided"},
	} {
		rec := adminGet(t, srv, tc.method, tc.target, tc.token, tc.body)
		if tc.status == http.StatusOK {
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s: %d %s", tc.method, tc.target, rec.Code, rec.Body)
			}
			continue
		}
		p := problemOf(t, rec, tc.status)
		if !strings.Contains(p.Detail, tc.want) || len(p.Detail) > 300 {
			t.Errorf("%s %.60s: detail %q; want it to contain %q, bounded", tc.method, tc.target, p.Detail, tc.want)
		}
	}
	// Deciding needs approvals.decide; the mcptest admin role holds "*",
	// the customer role does not, and an action token is refused first
	// for its scope.
	if p := problemOf(t, adminGet(t, srv, http.MethodPost, base+"/"+a.ID+"/approve", aliceToken, ""), http.StatusForbidden); p.Detail != forbiddenScope {
		t.Errorf("action token deciding: %q", p.Detail)
	}
	_ = store.Close()
	if p := problemOf(t, adminGet(t, srv, http.MethodGet, base, adminToken, ""), http.StatusServiceUnavailable); strings.Contains(p.Detail, "closed") {
		t.Errorf("the cause leaked to the caller: %q", p.Detail)
	}
}
