package e2e

import (
	"bufio"
	"context"
	"encoding/json"
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

// TestPluginAsksAcrossReplicas: before 2026-07-28 a call asks its client on
// its own event stream, and the client answers in a POST of its own, which
// a load balancer may send to another replica. That replica hands each
// answer over the shared NATS server to the replica whose call waits:
// probe.ask runs on r1 and gets the name and the greeting answered
// through r2; an answer from another token is refused there, as one that
// no call waits for.
func TestPluginAsksAcrossReplicas(t *testing.T) {
	r1, r2 := replicaPair(t, func(dir string) func(string) string {
		return withProbe(filepath.Join(dir, "capgate-plugin-probe"))
	})
	post := func(h *host, token string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, h.url(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	answer := func(h *host, token, id, result string) int {
		t.Helper()
		resp := post(h, token, `{"jsonrpc":"2.0","id":"`+id+`","result":`+result+`}`)
		resp.Body.Close()
		return resp.StatusCode
	}

	resp := post(r1, tokenAlice, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"probe.ask","arguments":{}}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("tools/call answered %d %s", resp.StatusCode, ct)
	}
	events := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		t.Helper()
		for events.Scan() {
			if data, ok := strings.CutPrefix(events.Text(), "data: "); ok {
				var m map[string]any
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					t.Fatalf("event %q: %v", data, err)
				}
				return m
			}
		}
		t.Fatalf("the stream ended: %v", events.Err())
		return nil
	}

	ask := next()
	id, _ := ask["id"].(string)
	if ask["method"] != "elicitation/create" || id == "" {
		t.Fatalf("first event %v; want the elicitation", ask)
	}
	if status := answer(r2, tokenBob, id, `{"action":"accept","content":{"name":"Mallory"}}`); status != http.StatusBadRequest {
		t.Fatalf("bob's answer through r2: %d, want 400", status)
	}
	if status := answer(r2, tokenAlice, id, `{"action":"accept","content":{"name":"Ada"}}`); status != http.StatusAccepted {
		t.Fatalf("alice's answer through r2: %d, want 202", status)
	}
	ask = next()
	id, _ = ask["id"].(string)
	if ask["method"] != "sampling/createMessage" || id == "" {
		t.Fatalf("second event %v; want the sampling request", ask)
	}
	if status := answer(r2, tokenAlice, id, `{"role":"assistant","model":"m","content":{"type":"text","text":"Hello, Ada!"}}`); status != http.StatusAccepted {
		t.Fatalf("the greeting through r2: %d, want 202", status)
	}
	var res struct {
		ID     int `json:"id"`
		Result struct {
			StructuredContent struct{ Name, Greeting string } `json:"structuredContent"`
			IsError           bool                            `json:"isError"`
		} `json:"result"`
	}
	last, _ := json.Marshal(next())
	if err := json.Unmarshal(last, &res); err != nil || res.ID != 1 || res.Result.IsError ||
		res.Result.StructuredContent.Name != "Ada" || res.Result.StructuredContent.Greeting != "Hello, Ada!" {
		t.Fatalf("the call's answer: %s", last)
	}
}
