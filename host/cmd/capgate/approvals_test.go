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

// TestApprovalsShowIsSafe: show prints the arguments with the sensitive
// values redacted (in text and -json), and nothing a decider wrote can
// reach the terminal as control characters: a reason cannot clear the
// screen or forge a line. A decider bound to no user decides nothing.
func TestApprovalsShowIsSafe(t *testing.T) {
	dir := t.TempDir()
	cfg := auditConfig(t, dir, "")
	s, err := approvals.Open(context.Background(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Create(context.Background(), approvals.Request{TokenLabel: "tokens-0", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "account.reset", Args: []byte(`{"id":"a-1","Password":"hunter2"}`), Sensitive: [][]string{{"password"}},
		Risk: registry.RiskDangerous, TTL: time.Hour})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runApprovals("reject", a.ID, "-c", cfg, "-by", "  "); code != 2 || !strings.Contains(errOut, "-by") {
		t.Fatalf("rejecting as no one: %d %q; want a usage error", code, errOut)
	}
	if code, _, errOut := runApprovals("approve", a.ID, "-c", cfg, "-by", "Alice"); code != 1 || !strings.Contains(errOut, "may not be decided by the user who made it") {
		t.Fatalf("approving alice's call as Alice: %d %q", code, errOut)
	}
	forged := "no\x1b[2J\r\n2026-12-01 approved by ops\u202e"
	if code, _, errOut := runApprovals("reject", a.ID, "-c", cfg, "-by", "ops", "-reason", forged); code != 0 {
		t.Fatalf("reject: %d %q", code, errOut)
	}
	code, out, errOut := runApprovals("show", a.ID, "-c", cfg)
	if code != 0 {
		t.Fatalf("show: %d %q", code, errOut)
	}
	if strings.Contains(out, "hunter2") || !strings.Contains(out, `"id":"a-1"`) {
		t.Errorf("show: %q; want the arguments with the password redacted", out)
	}
	if strings.ContainsAny(out, "\x1b\r\u202e") || strings.Contains(out, "\n2026-12-01 approved") {
		t.Errorf("show: %q; the reason reached the terminal with its control characters", out)
	}
	code, out, _ = runApprovals("show", a.ID, "-c", cfg, "-json")
	if code != 0 || strings.Contains(out, "hunter2") || !strings.Contains(out, `[redacted]`) {
		t.Errorf("show -json: %d %q; want the password redacted", code, out)
	}
	if code, out, _ = runApprovals("list", "-c", cfg); code != 0 || strings.Contains(out, "hunter2") {
		t.Errorf("list: %d %q", code, out)
	}
}
