package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGoSDKPrompts: the official Go client lists, gets and completes the
// booking plugin's prompt at every revision, through the gate: alice's
// completion offers her active bookings, and a guest (no booking.read)
// neither sees the prompt nor gets or completes it.
func TestGoSDKPrompts(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			alice := connect(t, h, tokenAlice, version)
			if alice.InitializeResult().Capabilities.Prompts == nil || alice.InitializeResult().Capabilities.Completions == nil {
				t.Fatalf("prompts or completions not declared: %+v", alice.InitializeResult().Capabilities)
			}
			list, err := alice.ListPrompts(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range list.Prompts {
				names = append(names, p.Name)
			}
			if !slices.Contains(names, "booking.plan_visit") {
				t.Fatalf("prompts/list as alice: %v", names)
			}
			var active []string
			for _, b := range listBookings(t, alice, "alice") {
				if b.Status == "active" {
					active = append(active, b.ID)
				}
			}
			comp, err := alice.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "booking.plan_visit"},
				Argument: mcp.CompleteParamsArgument{Name: "booking", Value: "bk_"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(comp.Completion.Values, active) || len(active) == 0 {
				t.Fatalf("completion as alice: %v, want her active bookings %v", comp.Completion.Values, active)
			}
			got, err := alice.GetPrompt(ctx, &mcp.GetPromptParams{Name: "booking.plan_visit",
				Arguments: map[string]string{"booking": active[0], "note": "first visit"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Messages) != 2 {
				t.Fatalf("messages: %+v", got.Messages)
			}
			text, ok := got.Messages[1].Content.(*mcp.TextContent)
			if !ok || !strings.Contains(text.Text, active[0]) || !strings.Contains(text.Text, "first visit") {
				t.Fatalf("second message: %#v", got.Messages[1].Content)
			}
			if version != "2025-03-26" {
				if link, ok := got.Messages[0].Content.(*mcp.ResourceLink); !ok || !strings.HasPrefix(link.URI, "capgate://booking.resource/") {
					t.Fatalf("first message: %#v", got.Messages[0].Content)
				}
			}

			guest := connect(t, h, tokenGuest, version)
			if list, err := guest.ListPrompts(ctx, nil); err != nil || len(list.Prompts) != 0 {
				t.Fatalf("prompts/list as guest: %+v %v", list, err)
			}
			_, err = guest.GetPrompt(ctx, &mcp.GetPromptParams{Name: "booking.plan_visit", Arguments: map[string]string{"booking": active[0]}})
			if err == nil || !strings.Contains(err.Error(), "unknown prompt") {
				t.Fatalf("prompts/get as guest: %v", err)
			}
			_, err = guest.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "booking.plan_visit"},
				Argument: mcp.CompleteParamsArgument{Name: "booking", Value: ""},
			})
			if err == nil || !strings.Contains(err.Error(), "unknown prompt") {
				t.Fatalf("completion as guest: %v", err)
			}
		})
	}
}

// TestGoSDKTemplateCompletion: the official Go client completes a
// variable of a plugin's resource template (answered by the plugin,
// through the gate) and the id of a catalogue record template (from
// platform.list, as the caller), at every revision; a template no plugin
// declares is unknown.
func TestGoSDKTemplateCompletion(t *testing.T) {
	needE2E(t)
	h := startProbeHost(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			alice := connect(t, h, tokenAlice, version)
			complete := func(uri, arg, value string) (*mcp.CompleteResult, error) {
				return alice.Complete(ctx, &mcp.CompleteParams{
					Ref: &mcp.CompleteReference{Type: "ref/resource", URI: uri}, Argument: mcp.CompleteParamsArgument{Name: arg, Value: value}})
			}
			res, err := complete("probe://rooms/{room}/plan", "room", "b")
			if err != nil || !slices.Equal(res.Completion.Values, []string{"borealis"}) {
				t.Fatalf("plan room: %+v %v", res, err)
			}
			res, err = complete("capgate://booking.resource/{id}", "id", "room-a")
			if err != nil || !slices.Contains(res.Completion.Values, "room-aurora") {
				t.Fatalf("catalogue id: %+v %v", res, err)
			}
			for _, v := range res.Completion.Values {
				if !strings.HasPrefix(v, "room-a") {
					t.Errorf("catalogue id suggestion %q does not start with room-a", v)
				}
			}
			if _, err := complete("probe://nothing/{x}", "x", ""); err == nil || !strings.Contains(err.Error(), "unknown resource template") {
				t.Fatalf("unknown template: %v", err)
			}
		})
	}
}

// TestGoSDKPromptAsks: a prompt that asks its client while it renders
// (the conformance plugin's test_input_required_result_prompt, a real SDK
// plugin), got with the official Go client: at 2026-07-28 the client runs
// the rounds itself — it is asked the prompt's form once, through the
// gate, and gets the prompt rendered with its answer; at 2025-11-25 and
// 2025-06-18 capgate runs the rounds, asking on the request's event
// stream, with the same outcome. A client without an elicitation handler
// is told to declare elicitation at 2026-07-28 (-32021), and before is
// told, after it said so, that it does not elicit (-32602); 2025-03-26
// has no elicitation to ask.
func TestGoSDKPromptAsks(t *testing.T) {
	needE2E(t)
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withConformance(filepath.Join(dir, "capgate-plugin-conformance")))
	const prompt = "test_input_required_result_prompt"
	var (
		mu    sync.Mutex
		asked []string
	)
	elicit := func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, r.Params.Message)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"context": "the e2e context"}}, nil
	}
	connectAsking := func(version string, opts *mcp.ClientOptions) *session {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wire := &bearerTransport{token: tokenAlice}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, opts).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: h.url(), HTTPClient: &http.Client{Transport: wire}, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return &session{ClientSession: cs, wire: wire}
	}
	wireError := func(s *session) *jsonrpc.Error {
		var resp struct {
			Error *jsonrpc.Error `json:"error"`
		}
		if json.Unmarshal(s.wire.lastBody(), &resp) != nil || resp.Error == nil {
			t.Fatalf("no JSON-RPC error on the wire: %s", s.wire.lastBody())
		}
		return resp.Error
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		asked = nil
		both := connectAsking(version, &mcp.ClientOptions{ElicitationHandler: elicit})
		got, err := both.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt})
		if err != nil {
			t.Fatalf("prompts/get at %s with elicitation: %v", version, err)
		}
		text, ok := got.Messages[0].Content.(*mcp.TextContent)
		if len(got.Messages) != 1 || !ok || text.Text != "Answer with this context: the e2e context" ||
			strings.Join(asked, "|") != "What context should the prompt use?" {
			t.Fatalf("@%s: got %+v after asking %q; want the prompt rendered with the one answer", version, got.Messages, asked)
		}
	}

	neither := connectAsking("2026-07-28", nil)
	if _, err := neither.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt}); err == nil {
		t.Fatal("a client that cannot elicit got the prompt")
	}
	if e := wireError(neither); e.Code != -32021 || !strings.Contains(string(e.Data), "elicitation") {
		t.Fatalf("a client that cannot elicit: %d %s %s; want -32021 naming elicitation", e.Code, e.Message, e.Data)
	}
	// Before 2026-07-28 the client is asked on the request's stream, and
	// says it does not elicit; 2025-03-26 has no elicitation to ask.
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		old := connectAsking(version, nil)
		_, err := old.GetPrompt(ctx, &mcp.GetPromptParams{Name: prompt})
		want := "which this client does not do"
		if version == "2025-03-26" {
			want = "which this client cannot offer over this protocol revision (2025-03-26)"
		}
		if err == nil || !strings.Contains(err.Error(), "needs the client to support elicitation") || !strings.Contains(err.Error(), want) {
			t.Fatalf("@%s: %v; want -32602 naming elicitation, %q", version, err, want)
		}
	}
}
