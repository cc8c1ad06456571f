package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/pgtest"
)

func runApprovals(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = approvalsCmd(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// heldRequest stores one pending request in the database dsn/dataDir
// name, as a host holding alice's call would.
func heldRequest(t *testing.T, dsn, dataDir string) string {
	t.Helper()
	s, err := approvals.Open(context.Background(), dsn, dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.Create(context.Background(), approvals.Request{TokenLabel: "tokens-0", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "subscription.cancel", Args: []byte(`{"id":"s-1"}`), Risk: registry.RiskDangerous, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// TestApprovalsCLI: list, show and decide a held call, on both engines;
// the asker cannot approve their own call, and a decided one cannot be
// decided again.
func TestApprovalsCLI(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dir, dsn := t.TempDir(), ""
			if engine == "postgres" {
				dsn = pgtest.SchemaDSN(t)
			}
			cfg := auditConfig(t, dir, dsn)
			id := heldRequest(t, dsn, dir)

			code, out, errOut := runApprovals("list", "-c", cfg, "-status", "pending")
			if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "subscription.cancel") || !strings.Contains(out, "dangerous") {
				t.Fatalf("list: %d %q %q", code, out, errOut)
			}
			code, out, _ = runApprovals("show", id, "-c", cfg, "-json")
			var shown map[string]any
			if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown["status"] != "pending" || shown["user_id"] != "alice" ||
				shown["arguments"].(map[string]any)["id"] != "s-1" {
				t.Fatalf("show -json: %d %q", code, out)
			}
			if code, _, errOut = runApprovals("approve", id, "-c", cfg, "-by", "alice"); code != 1 || !strings.Contains(errOut, "may not be decided by the user who made it") {
				t.Fatalf("approving one's own call: %d %q", code, errOut)
			}
			code, out, errOut = runApprovals("approve", id, "-c", cfg, "-by", "ops", "-reason", "refund agreed")
			if code != 0 || !strings.Contains(out, "approved") || !strings.Contains(out, "cli:ops") || !strings.Contains(out, "refund agreed") {
				t.Fatalf("approve: %d %q %q", code, out, errOut)
			}
			if code, _, errOut = runApprovals("reject", id, "-c", cfg, "-by", "ops2"); code != 1 || !strings.Contains(errOut, "already decided") {
				t.Fatalf("rejecting an approved request: %d %q", code, errOut)
			}
			if code, out, _ = runApprovals("list", "-c", cfg, "-status", "pending"); code != 0 || !strings.Contains(out, "no approval requests match") {
				t.Fatalf("pending after the decision: %q", out)
			}
			// Each decision, and each refused one, is in the trail under the
			// request's approval id.
			st, err := audit.Open(context.Background(), dsn, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			page, err := st.Query(context.Background(), audit.Filter{ApprovalID: id, Order: audit.OldestFirst})
			if err != nil || len(page.Records) != 3 {
				t.Fatalf("trail of %s: %+v %v; want three decisions", id, page.Records, err)
			}
			for i, want := range []struct{ user, step string }{{"alice", "failed"}, {"ops", ""}, {"ops2", "failed"}} {
				r := page.Records[i]
				if r.Capability != "capgate.approval" || r.UserID != want.user || r.Step != want.step || r.Protocol != "cli" {
					t.Errorf("decision %d: %+v; want by %s at step %q", i, r, want.user, want.step)
				}
			}
		})
	}
}

// TestApprovalsCLIUsage: wrong invocations say how to call it and exit 2;
// an unknown request exits 1 naming it.
func TestApprovalsCLIUsage(t *testing.T) {
	cfg := auditConfig(t, t.TempDir(), "")
	for _, args := range [][]string{{}, {"grant"}, {"approve"}, {"approve", "-c", cfg}, {"list"}, {"list", "-c", cfg, "-limit", "0"},
		{"list", "-c", cfg, "-status", "waiting"}} {
		if code, _, errOut := runApprovals(args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a usage", args, code, errOut)
		}
	}
	if code, _, errOut := runApprovals("show", "ap_none", "-c", cfg); code != 1 || !strings.Contains(errOut, `no such approval request: "ap_none"`) {
		t.Errorf("show of an unknown id: %d %q", code, errOut)
	}
}
