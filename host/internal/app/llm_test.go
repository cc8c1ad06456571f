package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/host/internal/config"
)

// chatServer is an OpenAI-compatible Chat Completions endpoint that
// records the prompts it is sent and answers with a fixed reply.
type chatServer struct {
	mu      sync.Mutex
	prompts []string
}

func (c *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.prompts = append(c.prompts, string(body))
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1764460800,"model":"test-model",
"choices":[{"index":0,"message":{"role":"assistant","content":"Aurora seats eight [1]."},"finish_reason":"stop"}],
"usage":{"prompt_tokens":120,"completion_tokens":7,"total_tokens":127}}`)
}

func (c *chatServer) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.prompts) == 0 {
		return ""
	}
	return c.prompts[len(c.prompts)-1]
}

// TestLLMAskGroundedThroughTheGate: llm.ask reads the catalogue through the
// real gate as its caller, so a token that may search gets an answer
// grounded in the catalogue, and one that may not gets an ungrounded answer
// whose prompt holds no catalogue data.
func TestLLMAskGroundedThroughTheGate(t *testing.T) {
	chat := &chatServer{}
	srv := httptest.NewServer(chat)
	defer srv.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: test-reader-1, role: reader, scope: read}
  - {token: test-asker-1, role: asker, scope: read}
roles: {reader: [llm.ask, catalogue.read], asker: [llm.ask]}
packs: {booking: true, search: true, llm: true}
plugins:
  - {name: booking, path: %s, config: {seed: demo}}
  - {name: search, path: %s}
  - name: llm
    path: %s
    config:
      connection: test
      connections: [{slug: test, kind: openai, base_url: %q, model: test-model, api_key: sk-test-secret-0042}]
`, t.TempDir(), bookingBin, searchBin, llmBin, srv.URL+"/v1")), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveSearch(t, cfg, nil)
	question := map[string]any{"question": "How many people fit in the Aurora room?"}

	out, msg := mcpTool(t, addr, "test-reader-1", "llm.ask", question)
	if msg != "" {
		t.Fatalf("llm.ask as a reader: %s", msg)
	}
	sources, _ := json.Marshal(out["sources"])
	if !strings.Contains(string(sources), `"id":"room-aurora"`) || out["answer"] != "Aurora seats eight [1]." || out["model"] != "test-model" {
		t.Errorf("grounded answer = %v, want room-aurora among the sources and the model's answer", out)
	}
	if p := chat.last(); !strings.Contains(p, "75-inch screen") {
		t.Errorf("the model was not given the Aurora record: %s", p)
	}

	out, msg = mcpTool(t, addr, "test-asker-1", "llm.ask", question)
	if msg != "" {
		t.Fatalf("llm.ask without catalogue.read: %s", msg)
	}
	if s, _ := out["sources"].([]any); len(s) != 0 {
		t.Errorf("sources for a token that may not read the catalogue: %v", s)
	}
	if p := chat.last(); strings.Contains(p, "75-inch screen") || strings.Contains(p, "room-aurora") {
		t.Errorf("a token without catalogue.read had catalogue data sent to the model: %s", p)
	}
	for _, p := range chat.prompts {
		if strings.Contains(p, "sk-test-secret-0042") {
			t.Errorf("the API key appears in a request body")
		}
	}
}
