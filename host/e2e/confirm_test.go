package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectAsking is connect with a client that answers the server's
// elicitations with answer, recording each question it is asked.
func connectAsking(t *testing.T, h *host, token, version string, answer string) (*session, *[]string) {
	t.Helper()
	var (
		mu    sync.Mutex
		asked []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wire := &bearerTransport{token: token}
	client := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, r.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: h.url(), HTTPClient: &http.Client{Transport: wire}, DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect as %s at %s: %v", token, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &session{ClientSession: cs, wire: wire}, &asked
}

// TestInBandConfirmationGoSDK: with booking.cancel at review_required,
// the official Go SDK client at 2026-07-28, which asks its user when the
// server says input_required, cancels alice's booking once its user says
// yes, and not when they say no; a client without an elicitation handler,
// and one at 2025-11-25, get the pending approval instead.
func TestInBandConfirmationGoSDK(t *testing.T) {
	needE2E(t)
	h := startHostWith(t, t.TempDir(), "{seed: demo}", func(cfg string) string {
		return cfg + "risk: {capabilities: {booking.cancel: review_required}}\n"
	})
	plain := connect(t, h, tokenAlice, "2026-07-28")
	mine := listBookings(t, plain, "alice")
	if len(mine) < 2 {
		t.Fatalf("alice has %d bookings; the demo seed gives her two", len(mine))
	}

	no, askedNo := connectAsking(t, h, tokenAlice, "2026-07-28", "decline")
	callTool(t, no, "booking.cancel", map[string]any{"id": mine[0].ID}).wantRefusal(t, "the user declines", "risk")
	if len(*askedNo) != 1 || !strings.Contains((*askedNo)[0], "booking.cancel") || !strings.Contains((*askedNo)[0], mine[0].ID) {
		t.Fatalf("the declining user was asked %q; want one question naming the call", *askedNo)
	}
	if st := statusOf(listBookings(t, plain, "alice"), mine[0].ID); st == "cancelled" {
		t.Fatal("a declined call cancelled the booking")
	}

	yes, askedYes := connectAsking(t, h, tokenAlice, "2026-07-28", "accept")
	var out struct {
		Status string `json:"status"`
	}
	callTool(t, yes, "booking.cancel", map[string]any{"id": mine[0].ID}).mustSucceed(t, "the user accepts", &out)
	if len(*askedYes) != 1 || statusOf(listBookings(t, plain, "alice"), mine[0].ID) != "cancelled" {
		t.Fatalf("asked %d times; booking %s is %q; want one question and the booking cancelled",
			len(*askedYes), mine[0].ID, statusOf(listBookings(t, plain, "alice"), mine[0].ID))
	}

	// The trail: the question, the no and the yes, each linked to its
	// question's id; the yes ran, with the reason saying who said so.
	want := []string{
		"admitted/asked/asked the caller's user to confirm it", "admitted/asked/asked the caller's user to confirm it",
		"admitted/ok/confirmed by the caller's user", "refused/risk/the user declined to confirm this call, so it did not run",
	}
	var (
		kinds []string
		ids   map[string]int
	)
	// The host writes its trail behind the calls, within its flush window.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command(binaries(t).host, "audit", "-c", h.config, "-capability", "booking.cancel", "-json").Output()
		if err != nil {
			t.Fatalf("capgate audit: %v", err)
		}
		kinds, ids = nil, map[string]int{}
		for _, line := range strings.Split(string(out), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				Decision, Step, Outcome, Reason string
				ApprovalID                      string `json:"approval_id"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("audit line %q: %v", line, err)
			}
			if strings.HasPrefix(r.ApprovalID, "cf_") {
				ids[r.ApprovalID]++
				kinds = append(kinds, r.Decision+"/"+r.Step+r.Outcome+"/"+r.Reason)
			}
		}
		if len(kinds) >= len(want) {
			break
		}
	}
	slices.Sort(kinds)
	if !slices.Equal(kinds, want) || len(ids) != 2 {
		t.Errorf("audit records of the questions: %q over %d questions; want %q over 2", kinds, len(ids), want)
	}

	// Clients that cannot ask: the call waits for an approver.
	older, _ := connectAsking(t, h, tokenAlice, "2025-11-25", "accept")
	for name, s := range map[string]*session{"no elicitation handler at 2026-07-28": plain, "2025-11-25": older} {
		var pending struct {
			Status     string `json:"status"`
			ApprovalID string `json:"approval_id"`
		}
		callTool(t, s, "booking.cancel", map[string]any{"id": mine[1].ID}).mustSucceed(t, name, &pending)
		if pending.Status != "pending_approval" || pending.ApprovalID == "" {
			t.Errorf("%s: %+v; want the pending approval", name, pending)
		}
	}
	if st := statusOf(listBookings(t, plain, "alice"), mine[1].ID); st == "cancelled" {
		t.Fatal("a held call ran")
	}
}
