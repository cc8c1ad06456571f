package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/auth/authtest"
	"github.com/capgate/capgate/host/internal/config"
)

const oauthResource = "https://capgate.test/api/v1/mcp"

// oauthProvider is a real authorization server with a public client and
// the demo's alice and bob, whose tokens carry role r.
func oauthProvider(t *testing.T) *authtest.Server {
	t.Helper()
	as := authtest.Start(t, authtest.Options{})
	as.AddClient(authtest.Client{ID: "agent", RedirectURIs: []string{"http://127.0.0.1:1/cb"}})
	for _, u := range []string{"alice", "bob"} {
		as.AddUser(authtest.User{Subject: u, Claims: map[string]any{"capgate_role": "r"}})
	}
	return as
}

func accessToken(t *testing.T, as *authtest.Server, user, scope string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as.LoginAs(user)
	tok, err := as.AuthorizationCode(ctx, "agent", "http://127.0.0.1:1/cb", scope, oauthResource)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuthThroughTheHost: a host with auth.oauth takes alice's access
// token from a real authorization server through the whole gate, as
// alice: her bookings, a dangerous cancel held and, once approved, run as
// the principal her token made; every decision recorded under her OAuth
// label, never the token. The configured token keeps working beside it.
func TestOAuthThroughTheHost(t *testing.T) {
	as := oauthProvider(t)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: govern-token-1, role: r, scope: action, user_id: alice}]
roles: {r: [booking.read, booking.write]}
packs: {booking: true}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
risk: {capabilities: {booking.cancel: dangerous}}
auth:
  oauth:
    issuer: %s
    resource: %s
    role_claim: capgate_role
`, dir, bookingBin, as.Issuer, oauthResource)), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)
	alice := accessToken(t, as, "alice", "capgate:action")

	if _, msg := mcpTool(t, addr, "govern-token-1", "booking.list", map[string]any{}); msg != "" {
		t.Fatalf("the configured token beside OAuth: %s", msg)
	}
	out, msg := mcpTool(t, addr, alice, "booking.cancel", aliceBooking(t, addr, alice))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("alice's cancel: %v %q; want it held", out, msg)
	}
	id := out["approval_id"].(string)

	ctx := context.Background()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	held, err := store.Get(ctx, id)
	if err != nil || held.TokenLabel != "oauth:alice" || held.UserID != "alice" || held.Role != "r" || held.Scope != "action" {
		t.Fatalf("held %+v, %v", held, err)
	}
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
		t.Fatal(err)
	}
	if got := waitDone(t, store, id); got.Outcome.Kind != approvals.OutcomeResult || !strings.Contains(string(got.Outcome.Result), `"cancelled"`) {
		t.Fatalf("approved call of an OAuth principal: %+v", got.Outcome)
	}

	// bob's token reads his own bookings only: the user comes from sub.
	bob := accessToken(t, as, "bob", "capgate:read")
	if out, msg := mcpTool(t, addr, bob, "booking.list", map[string]any{}); msg != "" || strings.Contains(fmt.Sprint(out), "alice") {
		t.Fatalf("bob's list: %v %q", out, msg)
	}

	astore, err := audit.OpenSQLite(ctx, filepath.Join(dir, audit.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer astore.Close()
	var page audit.Page
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// The trail is written behind the calls.
		if page, err = astore.Query(ctx, audit.Filter{TokenLabel: "oauth:alice"}); err != nil || len(page.Records) >= 3 {
			break
		}
	}
	if err != nil || len(page.Records) < 3 {
		t.Fatalf("alice's OAuth records: %d, %v", len(page.Records), err)
	}
	for _, r := range page.Records {
		if r.UserID != "alice" || strings.Contains(r.TokenLabel, "eyJ") {
			t.Fatalf("record %+v", r)
		}
	}
}

// TestOAuthPrincipalsLimitedApart: rate limits count per label, and two
// users' access tokens never share one, nor share the configured token's.
func TestOAuthPrincipalsLimitedApart(t *testing.T) {
	as := oauthProvider(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read}]
roles: {r: [hello.greet]}
packs: {hello: true}
plugins: [{name: hello, path: %s}]
limits: {per_token: {rate: 1/m}}
auth:
  oauth:
    issuer: %s
    resource: %s
    role_claim: capgate_role
`, t.TempDir(), helloBin, as.Issuer, oauthResource)), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)
	greet := map[string]any{"name": "x"}
	for _, tok := range []string{accessToken(t, as, "alice", "capgate:read"), accessToken(t, as, "bob", "capgate:read"), "test-token-1"} {
		if _, msg := mcpTool(t, addr, tok, "hello.greet", greet); msg != "" {
			t.Fatalf("first call: %s", msg)
		}
		if _, msg := mcpTool(t, addr, tok, "hello.greet", greet); !strings.Contains(msg, "limited to 1/m") {
			t.Fatalf("second call: %q; want the rate limit", msg)
		}
	}
	// A new token of alice's is still alice: her bucket is spent.
	if _, msg := mcpTool(t, addr, accessToken(t, as, "alice", "capgate:read"), "hello.greet", greet); !strings.Contains(msg, "limited to 1/m") {
		t.Fatalf("alice's next token: %q; want her spent limit", msg)
	}
}

// TestOAuthSettingsNeedARestart: a reload that changes auth.oauth applies
// the rest and names auth.oauth among the settings a restart applies.
func TestOAuthSettingsNeedARestart(t *testing.T) {
	as := oauthProvider(t)
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	dir := t.TempDir()
	write := func(name string) {
		t.Helper()
		body := fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read}]
roles: {r: [hello.greet]}
packs: {hello: true}
plugins: [{name: hello, path: %s}]
auth: {oauth: {issuer: %s, resource: %s, resource_name: %s}}
`, dir, helloBin, as.Issuer, oauthResource, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sink := &logSink{}
	a, _, _ := serveApp(t, cfg, sink)
	write("second")
	if _, err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	recs := sink.records("config reload: these settings changed in the file but apply only at start; restart capgate to apply them")
	if len(recs) != 1 || fmt.Sprint(recs[0]["settings"]) != "[auth.oauth]" {
		t.Fatalf("reload warnings %v", recs)
	}
}
