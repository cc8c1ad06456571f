package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPluginAsksGoSDK: the official Go SDK client answers a plugin's
// questions through capgate at every revision that can ask: probe.ask asks
// its user for a name (an elicitation), then the client's model for a
// greeting (sampling), each round a call through the whole gate. At
// 2026-07-28 the client runs the rounds itself (input_required); before,
// capgate sends each request on the call's event stream and the client
// answers it in a POST of its own. A client without a sampling handler is
// asked the name alone, and one without an elicitation handler is told
// what it lacks.
func TestPluginAsksGoSDK(t *testing.T) {
	needE2E(t)
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withProbe(filepath.Join(dir, "capgate-plugin-probe")))
	for _, ver := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		t.Run(ver, func(t *testing.T) { pluginAsksGoSDK(t, h, ver) })
	}
}

func pluginAsksGoSDK(t *testing.T, h *host, ver string) {
	var (
		mu    sync.Mutex
		asked []string
	)
	connectWith := func(opts *mcp.ClientOptions) *session {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		wire := &bearerTransport{token: tokenAlice}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, opts).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: h.url(), HTTPClient: &http.Client{Transport: wire}, DisableStandaloneSSE: true,
		}, &mcp.ClientSessionOptions{ProtocolVersion: ver})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { cs.Close() })
		return &session{ClientSession: cs, wire: wire}
	}
	elicit := func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		mu.Lock()
		asked = append(asked, "elicit:"+r.Params.Message)
		mu.Unlock()
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
	}
	sample := func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		mu.Lock()
		asked = append(asked, "sample")
		mu.Unlock()
		return &mcp.CreateMessageResult{Role: "assistant", Model: "test", Content: &mcp.TextContent{Text: "Hello, Ada!"}}, nil
	}

	var out struct{ Answer, Name, Greeting string }
	both := connectWith(&mcp.ClientOptions{ElicitationHandler: elicit, CreateMessageHandler: sample})
	callTool(t, both, "probe.ask", map[string]any{}).mustSucceed(t, "elicitation and sampling", &out)
	if out.Answer != "accept" || out.Name != "Ada" || out.Greeting != "Hello, Ada!" || strings.Join(asked, "|") != "elicit:What is your name?|sample" {
		t.Fatalf("got %+v after %q; want the name, then the greeting", out, asked)
	}

	asked, out = nil, struct{ Answer, Name, Greeting string }{}
	elicitOnly := connectWith(&mcp.ClientOptions{ElicitationHandler: elicit})
	callTool(t, elicitOnly, "probe.ask", map[string]any{}).mustSucceed(t, "elicitation only", &out)
	if out.Name != "Ada" || out.Greeting != "" || len(asked) != 1 {
		t.Fatalf("got %+v after %q; want the name alone", out, asked)
	}

	neither := connectWith(nil)
	r := callTool(t, neither, "probe.ask", map[string]any{})
	if ver != "2026-07-28" {
		// No capabilities come with a call before 2026-07-28: the client
		// is asked, answers that it does not elicit, and the call says so.
		if !r.isError || !strings.Contains(r.text, "needs the client to support elicitation, which this client does not do") {
			t.Fatalf("a client that cannot elicit: %+v; want a tool error naming elicitation", r)
		}
		return
	}
	if r.rpcErr == nil && r.sdkErr == nil {
		t.Fatalf("a client that cannot elicit: %+v; want the missing capability", r)
	}
	if r.rpcErr != nil && (r.rpcErr.Code != -32021 || !strings.Contains(string(r.rpcErr.Data), "elicitation")) {
		t.Fatalf("a client that cannot elicit: %d %s %s; want -32021 naming elicitation", r.rpcErr.Code, r.rpcErr.Message, r.rpcErr.Data)
	}
}
