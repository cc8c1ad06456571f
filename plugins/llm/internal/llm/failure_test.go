package llm_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// Every upstream failure is an isError result that says what happened, in
// bounded time, and the key appears in no result, error or log line — even
// where the provider echoes it back.
func TestFailuresAreClearAndNeverLeakTheKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter, r *http.Request, n int)
		conn   map[string]any
		code   sdk.ErrorCode
		want   string
		tries  int // requests the provider must have seen; 0: don't check
	}{
		{
			name: "rate limited past the retries",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Retry-After", "0")
				writeError(w, r, 429, "requests", "rate_limit_exceeded", "Rate limit reached")
			},
			code: sdk.CodeConflict, want: `"test" is rate limited (HTTP 429, 3 attempts)`, tries: 3,
		},
		{
			name: "rate limited with a Retry-After beyond the timeout",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Retry-After", "3600")
				writeError(w, r, 429, "requests", "rate_limit_exceeded", "Rate limit reached")
			},
			code: sdk.CodeConflict, want: "rate limited (HTTP 429, 1 attempt)", tries: 1,
		},
		{
			name: "server error past the retries",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 503, "server_error", "", "overloaded")
			},
			conn: map[string]any{"max_retries": 1},
			code: sdk.CodeConflict, want: `"test" failed (HTTP 503, 2 attempts); try again later`, tries: 2,
		},
		{
			name: "no retries configured",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 500, "server_error", "", "boom")
			},
			conn: map[string]any{"max_retries": 0},
			code: sdk.CodeConflict, want: "(HTTP 500, 1 attempt)", tries: 1,
		},
		{
			name: "HTML from a proxy",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(502)
				_, _ = w.Write([]byte("<html><body>Bad Gateway</body></html>"))
			},
			conn: map[string]any{"max_retries": 0},
			code: sdk.CodeConflict, want: "(HTTP 502, 1 attempt)",
		},
		{
			name: "not JSON",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte("hello, I am not an API"))
			},
			code: sdk.CodeConflict, want: "malformed response (not Chat Completions JSON)",
		},
		{
			name: "broken JSON",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"choices": [`))
			},
			code: sdk.CodeConflict, want: "malformed response",
		},
		{
			name: "no choices",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}`))
			},
			code: sdk.CodeConflict, want: "without any choices",
		},
		{
			name: "empty answer at the token limit",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":""}}]}`))
			},
			code: sdk.CodeConflict, want: "empty answer (it stopped at max_tokens 256",
		},
		{
			name: "context overflow, OpenAI",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 400, "invalid_request_error", "context_length_exceeded",
					"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")
			},
			code: sdk.CodeInvalidInput, want: "do not fit model test-model's context window; ask a shorter question or pass a smaller max_sources", tries: 1,
		},
		{
			name: "context overflow, vLLM (top-level error)",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(`{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens.","type":"BadRequestError","param":null,"code":400}`))
			},
			code: sdk.CodeInvalidInput, want: "context window",
		},
		{
			name: "context overflow, llama.cpp",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(`{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}`))
			},
			code: sdk.CodeInvalidInput, want: "context window",
		},
		{
			name: "context overflow, Ollama (plain error string)",
			handle: func(w http.ResponseWriter, _ *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(`{"error":"the input length exceeds the context length"}`))
			},
			code: sdk.CodeInvalidInput, want: "context window",
		},
		{
			name: "credentials refused, key echoed",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey)
			},
			code: sdk.CodeConflict, want: `"test" refused its credentials (HTTP 401); the operator must fix its api_key`, tries: 1,
		},
		{
			name: "unknown model",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 404, "invalid_request_error", "model_not_found", "The model `test-model` does not exist")
			},
			code: sdk.CodeConflict, want: `does not know model "test-model"`,
		},
		{
			name: "other rejection, message withheld",
			handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeError(w, r, 400, "invalid_request_error", "invalid_value", "temperature is out of range")
			},
			code: sdk.CodeConflict, want: `"test" refused the request (HTTP 400 Bad Request); the provider's message is withheld`,
		},
		{
			name: "timeout",
			handle: func(_ http.ResponseWriter, r *http.Request, _ int) {
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			},
			conn: map[string]any{"timeout": "300ms"},
			code: sdk.CodeConflict, want: `"test" did not answer within its timeout of 300ms`,
		},
		{
			name: "a retry runs out the timeout",
			handle: func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					w.Header().Set("Retry-After-Ms", "50")
					writeError(w, r, 503, "server_error", "", "busy")
					return
				}
				<-r.Context().Done()
			},
			conn: map[string]any{"timeout": "500ms"},
			code: sdk.CodeConflict, want: "did not answer within its timeout of 500ms (2 attempts; the last answered HTTP 503)", tries: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: tc.handle, conn: tc.conn})
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
			if tc.tries != 0 {
				if n := len(r.fake.requests()); n != tc.tries {
					t.Errorf("provider saw %d requests, want %d", n, tc.tries)
				}
			}
			for what, s := range map[string]string{"result": string(raw), "error": te.Message, "log": r.logs.String()} {
				if strings.Contains(s, testKey) {
					t.Errorf("the API key leaked into the %s: %s", what, s)
				}
			}
			if strings.Contains(te.Message, r.fake.URL) {
				t.Errorf("the agent is told the base_url: %s", te.Message)
			}
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	for _, status := range []int{429, 500, 502, 503} {
		r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, r *http.Request, n int) {
			if n < 3 {
				w.Header().Set("Retry-After-Ms", "10")
				writeError(w, r, status, "server_error", "", "try again")
				return
			}
			writeCompletion(w, "third time lucky")
		}})
		out, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"})
		if err != nil || te != nil || out.Answer != "third time lucky" {
			t.Fatalf("%d: %+v %v %v", status, out, te, err)
		}
		if n := len(r.fake.requests()); n != 3 {
			t.Errorf("%d: %d requests, want 3", status, n)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	// A port nothing listens on: taken, then released.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	r := newRig(t, rigOpts{conn: map[string]any{"base_url": "http://" + addr + "/v1"}})
	start := time.Now()
	_, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"})
	if err != nil {
		t.Fatal(err)
	}
	if te == nil || te.Code != sdk.CodeConflict || !strings.Contains(te.Message, `"test" is unreachable: connection refused`) {
		t.Fatalf("tool error = %v", te)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("refused connection took %s to report", time.Since(start))
	}
	if strings.Contains(te.Message, addr) || strings.Contains(r.logs.String(), testKey) {
		t.Errorf("message or log says too much: %s", te.Message)
	}
}

// Cancelling the call cancels the request to the provider.
func TestCancelCancelsTheUpstreamRequest(t *testing.T) {
	arrived, cancelled := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	r := newRig(t, rigOpts{handle: func(_ http.ResponseWriter, r *http.Request, _ int) {
		if once.CompareAndSwap(false, true) {
			close(arrived)
		}
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}, conn: map[string]any{"timeout": "30s"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := r.invoke(ctx, map[string]any{"question": "projector"})
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the provider")
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("the provider's request was not cancelled within 2s of the call's")
	}
	if err := <-done; err == nil {
		t.Error("a cancelled call reported success")
	}
	if n := len(r.fake.requests()); n != 1 {
		t.Errorf("a cancelled call was retried: %d requests", n)
	}
}

// Without an api_key no Authorization header is sent, even when the
// plugin's environment has OPENAI_API_KEY (meant for something else).
func TestNoKeyNoAuthorization(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/elsewhere")
	r := newRig(t, rigOpts{conn: map[string]any{"api_key": ""}})
	if _, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"}); err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", te, err)
	}
	if a := r.fake.last(t).Authorization; a != "" {
		t.Errorf("Authorization = %q, want none", a)
	}
}

// The key is absent from the configure log line and from configure errors.
func TestKeyAbsentFromConfigureOutput(t *testing.T) {
	r := newRig(t, rigOpts{})
	if _, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector"}); err != nil || te != nil {
		t.Fatal(te, err)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, "answering with connection test") || strings.Contains(logs, testKey) {
		t.Errorf("log: %s", logs)
	}
	p := sdk.New("llm", "test")
	registerQuiet(p)
	_, err := sdktest.StartErr(t, p, map[string]any{"connections": []any{map[string]any{
		"slug": "x", "kind": "openai", "base_url": "ftp://user:" + testKey + "@host/v1", "model": "m", "api_key": testKey,
	}}})
	if err == nil || !strings.Contains(err.Error(), "connections[0].base_url") || strings.Contains(err.Error(), testKey) {
		t.Errorf("configure error = %v", err)
	}
	_, err = sdktest.StartErr(t, sdkPluginQuiet(), json.RawMessage(`{"connections":[{"slug":"x","kind":"openai","base_url":"http://h/v1","model":"m","api_key":["`+testKey+`"]}]}`))
	if err == nil || !strings.Contains(err.Error(), "connections[0].api_key: must be a string") || strings.Contains(err.Error(), testKey) {
		t.Errorf("configure error = %v", err)
	}
}
