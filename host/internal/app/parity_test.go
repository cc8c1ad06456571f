package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
)

// The parity property: for any principal, capability and arguments, under
// any of the policies the operator can set while serving, capgate's MCP
// endpoint and its REST adapter decide the same — the same refusal step
// and reason, or the same outcome with the same result bytes — and leave
// the same audit records. Both protocols are driven over HTTP against one
// running host with real plugins (hello and booking).
//
// Each principal has two tokens alike in all but their label, one for each
// protocol, so that each counts its own rate limit and both see the same
// history. An action carries an idempotency key both calls share, so the
// second call of a pair that changed state (a cancel, a create) replays
// the first's outcome instead of meeting the changed state; a refused call
// frees its key, and the second then meets the gate afresh.

// parityPrincipals are the principals the property draws from:
// name: role, scope, user.
var parityPrincipals = []struct{ name, role, scope, user string }{
	{"alice", "customer", "action", "alice"},
	{"bob", "customer", "action", "bob"},
	{"reader", "customer", "read", "alice"},
	{"service", "customer", "action", ""},
	{"guest", "guest", "read", ""},
	{"admin", "admin", "admin", "ops"},
	// limited holds what customers do, at 3 calls an hour of each.
	{"limited", "limited", "action", "carol"},
}

// parityPolicy is what the operator may change while the host serves.
type parityPolicy struct {
	hello, booking      bool
	disabled            []string
	cancelRisk, greetRk string
	createRisk          string
}

func (p parityPolicy) yaml(dir string) string {
	var tokens strings.Builder
	for _, pr := range parityPrincipals {
		for _, proto := range []string{"mcp", "rest"} {
			user := ""
			if pr.user != "" {
				user = ", user_id: " + pr.user
			}
			fmt.Fprintf(&tokens, "  - {token: parity-%s-%s, label: %s-%s, role: %s, scope: %s%s}\n", pr.name, proto, pr.name, proto, pr.role, pr.scope, user)
		}
	}
	disabled := "[]"
	if len(p.disabled) > 0 {
		disabled = "[" + strings.Join(p.disabled, ", ") + "]"
	}
	return fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
%sroles:
  customer: [booking.read, booking.write, catalogue.read, hello.greet]
  limited: [booking.read, booking.write, catalogue.read, hello.greet]
  guest: [catalogue.read]
  admin: ["*"]
packs: {hello: %t, booking: %t}
disabled_capabilities: %s
risk: {capabilities: {booking.cancel: %s, hello.greet: %s, booking.create: %s}}
limits: {roles: {limited: {rate: 3/h}}}
plugins:
  - {name: hello, path: %s}
  - {name: booking, path: %s, config: {seed: demo}}
`, dir, tokens.String(), p.hello, p.booking, disabled, p.cancelRisk, p.greetRk, p.createRisk, helloBin, bookingBin)
}

// parityHost is the running host the property calls.
type parityHost struct {
	a         *app.App
	addr, dir string
	file      string
	// ids of the seeded bookings: alice's two and bob's one; ids holds
	// them and every booking a call has made since.
	alice, bob []string
	ids        []string
	keys       int
	pairs      int // calls made over both protocols
	// setup counts the calls made before the property's, which the
	// audit trail holds first.
	setup int
	// seen tallies the decisions met, for the log.
	seen map[string]int
}

func (h *parityHost) apply(t failer, p parityPolicy) {
	t.Helper()
	if err := os.WriteFile(h.file, []byte(p.yaml(h.dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

func newParityHost(t *testing.T) *parityHost {
	h := &parityHost{dir: t.TempDir(), seen: map[string]int{}}
	h.file = filepath.Join(h.dir, "capgate.yaml")
	start := parityPolicy{hello: true, booking: true, cancelRisk: "safe", greetRk: "safe", createRisk: "safe"}
	if err := os.WriteFile(h.file, []byte(start.yaml(h.dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(h.file)
	if err != nil {
		t.Fatal(err)
	}
	var stop func()
	h.a, h.addr, stop = serveApp(t, cfg, nil)
	t.Cleanup(stop)
	for _, who := range []struct {
		name string
		ids  *[]string
	}{{"alice", &h.alice}, {"bob", &h.bob}} {
		out, msg := mcpTool(t, h.addr, "parity-"+who.name+"-mcp", "booking.list", map[string]any{})
		h.setup++
		if msg != "" {
			t.Fatal(msg)
		}
		for _, b := range out["bookings"].([]any) {
			*who.ids = append(*who.ids, b.(map[string]any)["id"].(string))
		}
	}
	if len(h.alice) != 2 || len(h.bob) != 1 {
		t.Fatalf("seeded bookings: alice %v, bob %v", h.alice, h.bob)
	}
	for _, id := range append(append([]string{}, h.alice...), h.bob...) {
		h.ids = append(h.ids, strconv.Quote(id))
	}
	return h
}

// call is one capability call the property makes over both protocols.
type parityCall struct {
	principal, capability, args string
	action                      bool
}

// drawCall draws a principal, a capability and arguments: valid and
// invalid, the caller's own targets and others', and names no plugin
// provides.
func (h *parityHost) drawCall(t *rapid.T) parityCall {
	pr := rapid.SampledFrom(parityPrincipals).Draw(t, "principal").name
	obj := func(kv ...string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				continue
			}
			if b.Len() > 1 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(kv[i]) + ":" + kv[i+1])
		}
		return b.String() + "}"
	}
	str := func(label string, choices ...string) string {
		return rapid.SampledFrom(choices).Draw(t, label)
	}
	id := func() string {
		return str("id", append([]string{`"bk_aaaaaaaaaaaa"`, `"x"`, `7`, ``}, h.ids...)...)
	}
	odd := rapid.SampledFrom([]string{"", "null", "[]", `"x"`, `{"unknown":1}`}).Draw(t, "odd")
	c := parityCall{principal: pr}
	switch c.capability = rapid.SampledFrom([]string{
		"hello.greet", "booking.resources", "booking.availability", "booking.list", "booking.get",
		"booking.cancel", "booking.create", "booking.add_resource", "no.such",
	}).Draw(t, "capability"); c.capability {
	case "hello.greet":
		name := strconv.Quote(rapid.StringMatching(`[a-zA-Zé ]{0,12}`).Draw(t, "name"))
		c.args = str("args", obj("name", name), obj("name", name, "passphrase", strconv.Quote(strings.Repeat("p", 70))), obj("name", "5"), odd)
	case "booking.resources":
		c.args = str("args", "{}", "", odd)
	case "booking.availability":
		days := strconv.Itoa(rapid.IntRange(-1, 16).Draw(t, "days"))
		c.args = str("args", obj("resource_id", `"court-1"`, "days", days), obj("resource_id", `"nope"`), odd)
	case "booking.list":
		c.args = obj("status", str("status", `"active"`, `"cancelled"`, `"bogus"`, ""),
			"limit", str("limit", "", "1", "0", "201", "50"))
	case "booking.get":
		c.args = str("args", obj("id", id()), odd)
	case "booking.cancel":
		c.args, c.action = str("args", obj("id", id()), odd), true
	case "booking.create":
		day := time.Now().UTC().AddDate(0, 0, rapid.IntRange(-1, 3).Draw(t, "day")).Format("2006-01-02")
		start := strconv.Quote(day + "T" + fmt.Sprintf("%02d", rapid.IntRange(8, 17).Draw(t, "hour")) + ":00:00Z")
		c.args, c.action = str("args", obj("resource_id", `"room-aurora"`, "start", start), obj("resource_id", `"room-aurora"`, "start", `"soon"`), odd), true
	case "booking.add_resource":
		c.args, c.action = str("args", "{}", odd), true
	}
	return c
}

// compare makes call c over both protocols, in an order drawn, with one
// idempotency key for an action, and fails unless they decided the same.
func (h *parityHost) compare(t *rapid.T, c parityCall) {
	key := ""
	if c.action {
		h.keys++
		key = "parity-" + strconv.Itoa(h.keys)
	}
	mcpFirst := rapid.Bool().Draw(t, "mcp first")
	var m, r answer
	if mcpFirst {
		m = mcpAnswer(t, h.addr, "parity-"+c.principal+"-mcp", c.capability, c.args, key)
		r = restAnswer(t, h.addr, "parity-"+c.principal+"-rest", c.capability, c.args, key)
	} else {
		r = restAnswer(t, h.addr, "parity-"+c.principal+"-rest", c.capability, c.args, key)
		m = mcpAnswer(t, h.addr, "parity-"+c.principal+"-mcp", c.capability, c.args, key)
	}
	h.pairs++
	h.seen[m.kind+" "+m.step]++
	if c.capability == "booking.create" && m.kind == "result" {
		var b struct{ ID string }
		if json.Unmarshal(m.result, &b) == nil && b.ID != "" {
			h.ids = append(h.ids, strconv.Quote(b.ID))
		}
	}
	if why := sameDecision(m, r); why != "" {
		t.Fatalf("%s calls %s with %s (key %q): MCP and REST decided differently (%s)\nMCP:  %s\nREST: %s",
			c.principal, c.capability, c.args, key, why, m.raw, r.raw)
	}
}

// compareLists checks that MCP's tools/list and REST's list show the
// principal the same capabilities at the same risk, and that the OpenAPI
// document has an operation for each.
func (h *parityHost) compareLists(t *rapid.T, principal string) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr+"/api/v1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer parity-"+principal+"-mcp")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	var res struct {
		Result struct {
			Tools []any `json:"tools"`
		} `json:"result"`
	}
	do(t, req, &res)
	var fromMCP []string
	for _, tool := range res.Result.Tools {
		tm := tool.(map[string]any)
		risk := tm["_meta"].(map[string]any)["io.capgate/risk"].(string)
		fromMCP = append(fromMCP, tm["name"].(string)+"@"+risk)
	}
	var list struct {
		Capabilities []struct{ Name, Risk string }
	}
	restJSON(t, h.addr, "parity-"+principal+"-rest", "/api/v1/capabilities", &list)
	var fromREST []string
	for _, c := range list.Capabilities {
		fromREST = append(fromREST, c.Name+"@"+c.Risk)
	}
	var doc struct {
		Paths map[string]any
	}
	restJSON(t, h.addr, "parity-"+principal+"-rest", "/api/v1/openapi.json", &doc)
	var fromDoc []string
	for path := range doc.Paths {
		if name, ok := strings.CutPrefix(path, "/api/v1/capabilities/"); ok {
			fromDoc = append(fromDoc, name)
		}
	}
	slices.Sort(fromDoc)
	names := make([]string, len(fromREST))
	for i, n := range fromREST {
		names[i], _, _ = strings.Cut(n, "@")
	}
	if !slices.Equal(fromMCP, fromREST) || !slices.Equal(names, fromDoc) {
		t.Fatalf("%s: tools/list %v, REST list %v, OpenAPI operations %v", principal, fromMCP, fromREST, fromDoc)
	}
}

func restJSON(t failer, addr, token, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	do(t, req, v)
}

// do sends req and decodes its 200 answer into v.
func do(t failer, req *http.Request, v any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
}

// TestParityMCPREST is the parity property (see above). Each check
// changes the policy or the kill switch with some chance, then makes one
// to six calls over both protocols or compares the lists; rapid's
// -rapid.checks (100 by default) bounds the checks. At the end the audit
// trail holds one record per call, and each pair's records agree.
func TestParityMCPREST(t *testing.T) {
	h := newParityHost(t)
	risks := []string{"safe", "review_required", "dangerous", "blocked"}
	rapid.Check(t, func(rt *rapid.T) {
		switch rapid.IntRange(0, 9).Draw(rt, "environment") {
		case 0:
			p := parityPolicy{
				hello: rapid.Float64Range(0, 1).Draw(rt, "hello on") < 0.8, booking: rapid.Float64Range(0, 1).Draw(rt, "booking on") < 0.85,
				cancelRisk: rapid.SampledFrom(risks).Draw(rt, "cancel risk"), greetRk: rapid.SampledFrom(risks[:2]).Draw(rt, "greet risk"),
				createRisk: rapid.SampledFrom(risks[:2]).Draw(rt, "create risk"),
			}
			for _, name := range []string{"booking.availability", "hello.greet", "booking.cancel"} {
				if rapid.IntRange(0, 3).Draw(rt, "disable "+name) == 0 {
					p.disabled = append(p.disabled, name)
				}
			}
			h.apply(rt, p)
		case 1:
			on := rapid.Float64Range(0, 1).Draw(rt, "actions on") < 0.7
			req, _ := http.NewRequest(http.MethodPut, "http://"+h.addr+"/api/v1/admin/actions", strings.NewReader(fmt.Sprintf(`{"enabled":%t}`, on)))
			req.Header.Set("Authorization", "Bearer parity-admin-mcp")
			var st struct{ Enabled bool }
			if do(rt, req, &st); st.Enabled != on {
				rt.Fatalf("kill switch set to %t, reads %t", on, st.Enabled)
			}
		}
		if rapid.IntRange(0, 7).Draw(rt, "list") == 0 {
			h.compareLists(rt, rapid.SampledFrom(parityPrincipals).Draw(rt, "lister").name)
			return
		}
		for range rapid.IntRange(1, 6).Draw(rt, "calls") {
			h.compare(rt, h.drawCall(rt))
		}
	})
	t.Logf("%d calls over both protocols; decisions met: %v", h.pairs, h.seen)
	h.checkAudit(t)
}

// checkAudit stops the host, draining its audit writer, and checks that
// the trail holds the two calls of each pair, one after the other, whose
// decisions agree.
func (h *parityHost) checkAudit(t *testing.T) {
	h.a.Close()
	store, err := audit.Open(context.Background(), "", h.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var recs []audit.Record
	for f := (audit.Filter{Order: audit.OldestFirst, Limit: audit.MaxLimit}); ; {
		page, err := store.Query(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			if r.Protocol == "mcp" || r.Protocol == "rest" {
				recs = append(recs, r)
			}
		}
		if len(page.Records) < f.Limit {
			break
		}
		f.After = page.Next
	}
	if len(recs) != h.setup+2*h.pairs {
		t.Fatalf("%d records of MCP and REST calls, want %d", len(recs), h.setup+2*h.pairs)
	}
	recs = recs[h.setup:]
	for i := 0; i < len(recs); i += 2 {
		a, b := recs[i], recs[i+1]
		if a.Protocol == b.Protocol || a.Capability != b.Capability || a.Decision != b.Decision || a.Step != b.Step ||
			a.Outcome != b.Outcome || a.ErrorCode != b.ErrorCode || a.UserID != b.UserID || a.Role != b.Role ||
			strings.TrimSuffix(a.TokenLabel, "-"+a.Protocol) != strings.TrimSuffix(b.TokenLabel, "-"+b.Protocol) {
			t.Fatalf("the audit records of one pair disagree:\n%+v\n%+v", a, b)
		}
	}
}
