package llm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/sdk"
)

// The request is the Chat Completions request and nothing more: a POST of
// JSON with model, messages and max_tokens.
func TestChatRequestOnTheWire(t *testing.T) {
	got := make(chan *http.Request, 1)
	r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, r *http.Request, _ int) {
		got <- r.Clone(context.Background())
		writeCompletion(w, "An answer.")
	}, conn: map[string]any{"max_tokens": 77}})
	if _, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"}); err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", te, err)
	}
	hr := <-got
	method, contentType, accept := hr.Method, hr.Header.Get("Content-Type"), hr.Header.Get("Accept")
	req := r.fake.last(t)
	if method != http.MethodPost || req.Path != "/v1/chat/completions" || contentType != "application/json" || accept != "application/json" {
		t.Errorf("%s %s, Content-Type %q, Accept %q", method, req.Path, contentType, accept)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal([]byte(req.Raw), &body); err != nil {
		t.Fatalf("request body %s: %v", req.Raw, err)
	}
	var keys []string
	for k := range body {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"max_tokens", "messages", "model"}) || string(body["max_tokens"]) != "77" || string(body["model"]) != `"test-model"` {
		t.Errorf("request body = %s", req.Raw)
	}
}

// The base_url's trailing slash does not double the path's.
func TestChatBaseURLTrailingSlash(t *testing.T) {
	fake := newFakeLLM(t, nil)
	r := newRig(t, rigOpts{conn: map[string]any{"base_url": fake.URL + "/v1/"}})
	if _, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"}); err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", te, err)
	}
	if p := fake.last(t).Path; p != "/v1/chat/completions" {
		t.Errorf("path = %s", p)
	}
}

// Error answers are read in every shape servers write them, and one with
// no error body at all (or one past the bound) still says its status.
func TestChatErrorBodies(t *testing.T) {
	raw := func(status int, contentType, body string) func(w http.ResponseWriter, r *http.Request, n int) {
		return func(w http.ResponseWriter, _ *http.Request, _ int) {
			if contentType != "" {
				w.Header().Set("Content-Type", contentType)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request, n int)
		code   sdk.ErrorCode
		want   string
	}{
		{"OpenAI's shape", raw(400, "application/json", `{"error":{"message":"temperature is out of range","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"a code alone tells the context overflow", raw(400, "application/json", `{"error":{"message":"too long","code":"context_length_exceeded"}}`),
			sdk.CodeInvalidInput, "context window"},
		{"a type alone tells the context overflow", raw(400, "application/json", `{"error":{"message":"no","type":"exceed_context_size_error","code":400}}`),
			sdk.CodeInvalidInput, "context window"},
		{"Ollama's string", raw(400, "application/json", `{"error":"invalid model format"}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"vLLM's top level", raw(422, "application/json", `{"object":"error","message":"bad role","type":"BadRequestError","param":null,"code":422}`),
			sdk.CodeConflict, "refused the request (HTTP 422 Unprocessable Entity)"},
		{"FastAPI's detail", raw(400, "application/json", `{"detail":"Not authenticated"}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"a message that is not text", raw(400, "application/json", `{"error":{"message":{"nested":true}}}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"an error that is null", raw(400, "application/json", `{"error":null}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"JSON of another shape", raw(400, "application/json", `{"status":"bad"}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"no body", raw(400, "", ""), sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"a text body", raw(418, "text/plain", "<b>no</b>"), sdk.CodeConflict, "refused the request (HTTP 418 I'm a teapot)"},
		{"no body, server error", raw(503, "", ""), sdk.CodeConflict, `"test" failed (HTTP 503, 1 attempt)`},
		{"no body, credentials", raw(403, "", ""), sdk.CodeConflict, "refused its credentials (HTTP 403)"},
		{"no body, rate limit", raw(429, "", ""), sdk.CodeConflict, "rate limited (HTTP 429, 1 attempt)"},
		{"a redirect not followed", raw(304, "", ""), sdk.CodeConflict, "answered HTTP 304 (Not Modified), which is no Chat Completions answer"},
		{"an error body past 64 KiB", raw(400, "application/json", `{"error":{"message":"`+strings.Repeat("x", 70<<10)+`"}}`),
			sdk.CodeConflict, "refused the request (HTTP 400 Bad Request); the provider's message is withheld"},
		{"an endless error body", func(w http.ResponseWriter, r *http.Request, _ int) {
			w.WriteHeader(500)
			chunk := []byte(strings.Repeat("<p>error</p>", 1000))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, sdk.CodeConflict, `failed (HTTP 500, 1 attempt)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: tc.handle, conn: map[string]any{"max_retries": 0, "timeout": "30s"}})
			start := time.Now()
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("took %s", elapsed)
			}
			if err != nil {
				t.Fatalf("transport error %v, want a tool error", err)
			}
			if te == nil || te.Code != tc.code || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("got result %s / error %v; want %s containing %q", raw, te, tc.code, tc.want)
			}
			if strings.Contains(r.logs.String(), testKey) || strings.Contains(te.Message, testKey) {
				t.Error("the API key leaked")
			}
		})
	}
}

// A successful answer past 8 MiB is refused as soon as that is known: by
// its Content-Length without reading it, or after reading 8 MiB of it.
func TestChatAnswerTooLarge(t *testing.T) {
	const want = "sent a response larger than 8 MiB"
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request, n int)
	}{
		{"a completion of 9 MiB", func(w http.ResponseWriter, _ *http.Request, _ int) {
			writeCompletion(w, strings.Repeat("a", 9<<20))
		}},
		{"a Content-Length of 1 GiB", func(w http.ResponseWriter, r *http.Request, _ int) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1073741824")
			w.WriteHeader(200)
			_, _ = w.Write([]byte(`{"choices":[`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
		{"an endless answer", func(w http.ResponseWriter, r *http.Request, _ int) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"`))
			chunk := []byte(strings.Repeat("a", 64<<10))
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: tc.handle, conn: map[string]any{"timeout": "30s"}})
			start := time.Now()
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if elapsed := time.Since(start); elapsed > 10*time.Second {
				t.Errorf("took %s", elapsed)
			}
			if err != nil {
				t.Fatalf("transport error %v, want a tool error", err)
			}
			if te == nil || te.Code != sdk.CodeConflict || !strings.Contains(te.Message, want) {
				t.Fatalf("got result %.200s / error %v; want a conflict containing %q", raw, te, want)
			}
			if n := len(r.fake.requests()); n != 1 {
				t.Errorf("%d requests; a too large answer is not retried", n)
			}
		})
	}
}

// A 2xx answer that is JSON but not a completion's, or is cut short.
func TestChatMalformedAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string
	}{
		{"choices of the wrong type", `{"choices":"none"}`, "malformed response (not Chat Completions JSON)"},
		{"content of the wrong type", `{"choices":[{"message":{"content":42}}]}`, "malformed response (not Chat Completions JSON)"},
		{"trailing data", `{"choices":[]} {"more":1}`, "malformed response (not Chat Completions JSON)"},
		{"an empty body", ``, "malformed response (not Chat Completions JSON)"},
		{"a JSON array", `[]`, "malformed response (not Chat Completions JSON)"},
		{"null content", `{"model":"m","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":null}}]}`, "model m returned an empty answer"},
		{"no usage, no model", `{"choices":[{"message":{"content":""}}]}`, "model test-model returned an empty answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body))
			}})
			_, te, err := r.invoke(context.Background(), map[string]any{"question": "projector"})
			if err != nil || te == nil || te.Code != sdk.CodeConflict || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("error %v %v; want a conflict containing %q", te, err, tc.want)
			}
		})
	}
	// A body cut short of its Content-Length: the transport's failure.
	r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "1000")
		_, _ = w.Write([]byte(`{"choices":[`))
	}})
	_, te, err := r.invoke(context.Background(), map[string]any{"question": "projector"})
	if err != nil || te == nil || te.Code != sdk.CodeConflict || !strings.Contains(te.Message, `"test" failed: the request could not be completed`) {
		t.Fatalf("a body cut short: %v %v", te, err)
	}
}

// The answer's other fields pass through: usage is optional, and a server
// that names no model leaves the configured one.
func TestChatAnswerWithoutUsageOrModel(t *testing.T) {
	r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Yes [1].","reasoning_content":"hmm"}}]}`))
	}})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", te, err)
	}
	if out.Answer != "Yes [1]." || out.Model != "test-model" || out.Usage.PromptTokens != 0 || out.Usage.CompletionTokens != 0 {
		t.Errorf("result = %+v", out)
	}
}
