package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/config"
)

// TestApprovedCallRunsOnce: a dangerous call answers a pending result and
// runs nothing; approved (here in the store, as the CLI or another
// replica would), the host runs it once through the whole gate, as its
// asker, and records what came of it.
func TestApprovedCallRunsOnce(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: govern-token-1, role: r, scope: action, user_id: alice}
  - {token: govern-token-2, role: r, scope: action, user_id: bob}
roles: {r: [booking.read, booking.write, catalogue.read]}
packs: {booking: true, approvals: true}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
risk: {capabilities: {booking.cancel: dangerous}}
`, dir, bookingBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)

	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", cancel)
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("booking.cancel at dangerous: %v %q; want a pending result", out, msg)
	}
	id, _ := out["approval_id"].(string)
	if !strings.HasPrefix(id, "ap_") || out["expires_at"] == "" || !strings.Contains(out["message"].(string), "has not run") {
		t.Fatalf("pending result %v", out)
	}

	// The agent follows its call; another user's token finds nothing.
	if got, msg := mcpTool(t, addr, "govern-token-1", "approvals.get", map[string]any{"approval_id": id}); msg != "" || got["status"] != "pending" || got["capability"] != "booking.cancel" {
		t.Fatalf("approvals.get: %v %q", got, msg)
	}
	if _, msg := mcpTool(t, addr, "govern-token-2", "approvals.get", map[string]any{"approval_id": id}); !strings.Contains(msg, "no approval request") {
		t.Fatalf("bob reading alice's request: %q; want not found", msg)
	}
	if got, msg := mcpTool(t, addr, "govern-token-2", "approvals.list", map[string]any{}); msg != "" || len(got["approvals"].([]any)) != 0 {
		t.Fatalf("bob's list: %v %q; want empty", got, msg)
	}
	if got, msg := mcpTool(t, addr, "govern-token-1", "approvals.list", map[string]any{"status": "pending"}); msg != "" || len(got["approvals"].([]any)) != 1 {
		t.Fatalf("alice's pending list: %v %q", got, msg)
	}

	ctx := context.Background()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(dir, approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	held, err := store.Get(ctx, id)
	if err != nil || held.Status != approvals.Pending || held.TokenLabel != "tokens-0" || held.UserID != "alice" ||
		held.Capability != "booking.cancel" || string(held.Args) != `{"id":"bk_aaaaaaaaaaaa"}` {
		t.Fatalf("held %+v, %v", held, err)
	}
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "alice"}); err == nil {
		t.Fatal("alice approved her own call")
	}
	if _, err := store.Decide(ctx, id, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var done approvals.Approval
	for {
		if done, err = store.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if done.Status == approvals.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("approved call still %s after 15 s", done.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The booking does not exist: the plugin ran the call and said so.
	if done.Outcome.Kind != approvals.OutcomeToolError || !strings.Contains(done.Outcome.Message, "bk_aaaaaaaaaaaa") {
		t.Fatalf("outcome %+v; want the plugin's not-found", done.Outcome)
	}
	if _, taken, _ := store.Start(ctx, id); taken {
		t.Fatal("a finished approved call was taken to run again")
	}
	got, msg := mcpTool(t, addr, "govern-token-1", "approvals.get", map[string]any{"approval_id": id})
	outcome, _ := got["outcome"].(map[string]any)
	if msg != "" || got["status"] != "done" || got["decided_by"] != "ops" || outcome["kind"] != "tool_error" {
		t.Fatalf("approvals.get once run: %v %q", got, msg)
	}
}
