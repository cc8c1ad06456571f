package app_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
)

// TestApprovedCallRunsOnce: a dangerous call answers a pending result and
// runs nothing; approved (here in the store, as the CLI or another
// replica would), the host runs it once through the whole gate, as its
// asker, and records what came of it.
func TestApprovedCallRunsOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := governedConfig(t, dir, "risk: {capabilities: {booking.cancel: dangerous}}")
	addr, _ := serveSearch(t, cfg, nil)

	out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", cancel)
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("booking.cancel at dangerous: %v %q; want a pending result", out, msg)
	}
	id, _ := out["approval_id"].(string)
	if !strings.HasPrefix(id, "ap_") || out["expires_at"] == "" || !strings.Contains(out["message"].(string), "has not run") {
		t.Fatalf("pending result %v", out)
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
}
