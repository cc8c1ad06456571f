package llm_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk/sdktest"
)

// TestLive asks a real endpoint, when CAPGATE_TEST_LLM_URL names one (e.g.
// http://127.0.0.1:11434/v1 for Ollama); CAPGATE_TEST_LLM_MODEL (default
// llama3.2) and CAPGATE_TEST_LLM_KEY are optional. It skips otherwise, so CI
// without a model passes.
func TestLive(t *testing.T) {
	url := os.Getenv("CAPGATE_TEST_LLM_URL")
	if url == "" {
		t.Skip("CAPGATE_TEST_LLM_URL is not set; set it to an OpenAI-compatible API root to ask a real model")
	}
	model := os.Getenv("CAPGATE_TEST_LLM_MODEL")
	if model == "" {
		model = "llama3.2"
	}
	cat := &catalogue{}
	h := sdktest.NewHost(t)
	if _, err := h.Add(cat.plugin(), nil, ""); err != nil {
		t.Fatal(err)
	}
	c, err := h.Add(sdkPluginQuiet(), map[string]any{"connections": []any{map[string]any{
		"slug": "live", "kind": "openai", "base_url": url, "model": model,
		"api_key": os.Getenv("CAPGATE_TEST_LLM_KEY"), "timeout": "120s", "max_tokens": 200,
	}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	out := sdktest.Call[struct {
		Answer  string `json:"answer"`
		Sources []struct {
			ID string `json:"id"`
		} `json:"sources"`
		Model string `json:"model"`
	}](t, c, "llm.ask", alice, map[string]any{"question": "Which room has a projector, and on which floor is it?"})
	t.Logf("model %s answered: %s", out.Model, out.Answer)
	if strings.TrimSpace(out.Answer) == "" || len(out.Sources) == 0 || out.Sources[0].ID != "room-aurora" {
		t.Errorf("answer %q sources %v", out.Answer, out.Sources)
	}
}
