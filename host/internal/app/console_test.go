package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/console"
	"github.com/capgate/capgate/sdk/pgtest"
)

// consoleClient follows no redirect, so a test sees where it is sent.
var consoleClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// consoleDo sends one request to the console at addr and returns its
// status, Location and body.
func consoleDo(t *testing.T, method, addr, path, cookie string, form url.Values) (int, string, string, []*http.Cookie) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+addr+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+addr)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	}
	resp, err := consoleClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b), resp.Cookies()
}

// TestConsoleAcrossReplicasAndReloads: a session signed in on one replica
// holds on another sharing the database (the key is the database's),
// decides a call held on the first through the real desk, and ends on a
// replica whose reload removes its token.
func TestConsoleAcrossReplicasAndReloads(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	write := func(path, dir, tokens string) {
		t.Helper()
		body := fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
database: {dsn: %q}
tokens: %s
roles: {r: [booking.read, booking.write], admin: ["*"]}
packs: {booking: true}
plugins: [{name: booking, path: %s, config: {seed: demo, dsn: %q}}]
risk: {capabilities: {booking.cancel: dangerous}}
`, dir, dsn, tokens, bookingBin, dsn)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	both := `[{token: govern-token-1, label: alice, role: r, scope: action, user_id: alice}, {token: console-admin-1, label: ops, role: admin, scope: admin, user_id: ops}]`
	var addrs []string
	var apps []interface{ Reload() ([]string, error) }
	var files []string
	for range 2 {
		dir, file := t.TempDir(), filepath.Join(t.TempDir(), "capgate.yaml")
		write(file, dir, both)
		cfg, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		a, addr, _ := serveApp(t, cfg, nil)
		addrs, apps, files = append(addrs, addr), append(apps, a), append(files, file)
	}

	out, msg := mcpTool(t, addrs[0], "govern-token-1", "booking.cancel", aliceBooking(t, addrs[0], "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	id := out["approval_id"].(string)

	status, _, _, _ := consoleDo(t, "POST", addrs[0], "/admin/signin", "", url.Values{"token": {"govern-token-1"}})
	if status != http.StatusUnauthorized {
		t.Fatalf("an action token signing in: %d; want 401", status)
	}
	status, loc, _, cookies := consoleDo(t, "POST", addrs[0], "/admin/signin", "", url.Values{"token": {"console-admin-1"}})
	var session string
	for _, c := range cookies {
		if c.Name == console.CookieName {
			session = c.Value
		}
	}
	if status != http.StatusSeeOther || loc != "/admin/" || session == "" {
		t.Fatalf("signing in on the first replica: %d to %q, cookie %q", status, loc, session)
	}

	// The second replica knows the session, and shows the first's held call.
	status, _, page, _ := consoleDo(t, "GET", addrs[1], "/admin/approvals", session, nil)
	if status != http.StatusOK || !strings.Contains(page, `data-approval="`+id+`"`) {
		t.Fatalf("the held call on the other replica's console: %d\n%s", status, page)
	}
	const mark = `name="csrf" value="`
	i := strings.Index(page, mark)
	if i < 0 {
		t.Fatal("no form token on the page")
	}
	csrf := page[i+len(mark) : i+len(mark)+strings.IndexByte(page[i+len(mark):], '"')]
	status, loc, _, _ = consoleDo(t, "POST", addrs[1], "/admin/approvals/"+id+"/approve", session, url.Values{"csrf": {csrf}, "reason": {"from the console"}})
	if status != http.StatusSeeOther || loc != "/admin/approvals/"+id+"?done=approved" {
		t.Fatalf("approving on the other replica: %d to %q", status, loc)
	}
	store, err := approvals.OpenPostgres(context.Background(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	got := waitDone(t, store, id)
	if got.DecidedBy != "ops" || got.Reason != "from the console" || got.Outcome.Kind != approvals.OutcomeResult {
		t.Fatalf("the held call: decided by %q (%q), outcome %+v; want ops's approval and a result", got.DecidedBy, got.Reason, got.Outcome)
	}

	// A reload that removes the token ends its sessions on that replica.
	write(files[1], filepath.Dir(files[1]), `[{token: govern-token-1, label: alice, role: r, scope: action, user_id: alice}]`)
	if _, err := apps[1].Reload(); err != nil {
		t.Fatal(err)
	}
	status, loc, _, _ = consoleDo(t, "GET", addrs[1], "/admin/", session, nil)
	if status != http.StatusSeeOther || loc != "/admin/signin?why=token" {
		t.Fatalf("a session whose token was removed: %d to %q; want sent to sign in", status, loc)
	}
}

// TestConsoleOffWithTheHost: a host switched off serves no console, as it
// serves no endpoint.
func TestConsoleOffWithTheHost(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: false
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: console-admin-1, role: admin, scope: admin}]
roles: {admin: ["*"]}
packs: {booking: true}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
`, t.TempDir(), bookingBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)
	for _, path := range []string{"/admin", "/admin/", "/admin/signin"} {
		if status, _, _, _ := consoleDo(t, "GET", addr, path, "", nil); status != http.StatusNotFound {
			t.Errorf("GET %s on a host switched off: %d; want 404", path, status)
		}
	}
}
