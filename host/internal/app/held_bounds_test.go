package app_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/config"
)

// TestHeldCallsShowNoSecretAndAreBounded: through the assembled host, a
// held call's sensitive field is shown to no one (approvals.get, the
// admin API) and leaves the approvals database once the call is settled;
// the same call sent again joins its request; a user over
// approvals.max_pending is refused at step risk naming the setting; and a
// decider bound to no user decides nothing.
func TestHeldCallsShowNoSecretAndAreBounded(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: held-token-1, role: r, scope: action, user_id: u1}
  - {token: held-admin, role: ops, scope: admin, user_id: ops}
  - {token: held-nobody, role: ops, scope: admin}
  - {token: held-u1-admin, role: ops, scope: admin, user_id: " U1"}
roles: {r: [hello.greet], ops: ["*"]}
packs: {hello: true, approvals: true}
plugins: [{name: hello, path: %s}]
risk: {capabilities: {hello.greet: dangerous}}
approvals: {max_pending: 2}
`, dir, helloBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)
	const secret = "correct-horse-battery"
	greet := func(name string) (map[string]any, string) {
		return mcpTool(t, addr, "held-token-1", "hello.greet", map[string]any{"name": name, "passphrase": secret})
	}
	out, msg := greet("ann")
	id, _ := out["approval_id"].(string)
	if msg != "" || out["status"] != "pending_approval" || id == "" {
		t.Fatalf("hello.greet at dangerous: %v %q; want it held", out, msg)
	}
	for range 30 {
		if again, msg := greet("ann"); msg != "" || again["approval_id"] != id {
			t.Fatalf("the same call again: %v %q; want request %s", again, msg, id)
		}
	}
	if out, msg := greet("bo"); msg != "" || out["approval_id"] == id {
		t.Fatalf("another call: %v %q; want a request of its own", out, msg)
	}
	if out, msg := greet("cy"); !strings.Contains(msg, "approvals.max_pending") || !strings.Contains(msg, "2") {
		t.Fatalf("a third call of u1 under max_pending 2: %v %q; want a refusal naming the cap", out, msg)
	}

	// No view shows the secret.
	got, msg := mcpTool(t, addr, "held-token-1", "approvals.get", map[string]any{"approval_id": id})
	if args, _ := got["arguments"].(map[string]any); msg != "" || args["name"] != "ann" || args["passphrase"] != "[redacted]" {
		t.Fatalf("approvals.get: %v %q; want the passphrase redacted", got, msg)
	}
	base := "http://" + addr + "/api/v1/admin/approvals"
	if code, body := adminCall(t, "GET", base+"/"+id, "held-admin", ""); code != http.StatusOK || strings.Contains(fmt.Sprint(body), secret) {
		t.Fatalf("admin API: %d %v; want it without the passphrase", code, body)
	}
	if code, body := adminCall(t, "GET", base, "held-admin", ""); code != http.StatusOK || strings.Contains(fmt.Sprint(body), secret) {
		t.Fatalf("admin API list: %d %v; want it without the passphrase", code, body)
	}

	// Four eyes: no user, or the asker's own in another case, decides
	// nothing.
	if code, body := adminCall(t, "POST", base+"/"+id+"/approve", "held-nobody", ""); code != http.StatusForbidden || !strings.Contains(fmt.Sprint(body), "bound to") {
		t.Fatalf("a decider bound to no user: %d %v; want 403 saying why", code, body)
	}
	if code, body := adminCall(t, "POST", base+"/"+id+"/approve", "held-u1-admin", ""); code != http.StatusForbidden {
		t.Fatalf("the asker's user as \" U1\": %d %v; want 403", code, body)
	}
	if code, body := adminCall(t, "POST", base+"/"+id+"/reject", "held-admin", `{"reason":"no"}`); code != http.StatusOK {
		t.Fatalf("reject: %d %v", code, body)
	}
	store, err := approvals.OpenSQLite(context.Background(), filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rejected, err := store.Get(context.Background(), id)
	if err != nil || rejected.Status != approvals.Rejected || rejected.Args != nil || strings.Contains(string(rejected.Shown), secret) {
		t.Fatalf("rejected: %+v %v; want its raw arguments gone", rejected, err)
	}
	// The rejection freed a slot.
	if out, msg := greet("cy"); msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("after a rejection: %v %q; want it held", out, msg)
	}
}
