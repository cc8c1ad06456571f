package llm_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
)

// A provider, or a proxy in front of it, that echoes the key or the
// request's Authorization header into a successful completion: the agent's
// result carries "[redacted]" where the key was, and nothing else of the
// answer changes.
func TestSuccessfulAnswerNeverCarriesTheKey(t *testing.T) {
	// Longer than the 300 runes error messages are cut to, with line
	// breaks: masking an answer must not shorten or flatten it.
	long := strings.Repeat("Aurora room has a projector [1]. ", 12)
	for _, tc := range []struct {
		name      string
		model     func(r *http.Request) string
		answer    func(r *http.Request) string
		wantModel string
		wantAns   string
	}{
		{
			name:      "answer is the key",
			model:     func(*http.Request) string { return "served-model-2024" },
			answer:    func(*http.Request) string { return testKey },
			wantModel: "served-model-2024", wantAns: "[redacted]",
		},
		{
			name:  "key inside a longer answer",
			model: func(*http.Request) string { return "served-model-2024" },
			answer: func(*http.Request) string {
				return "First line.\nYour key is " + testKey + ", twice: " + testKey + ".\n\n" + long
			},
			wantModel: "served-model-2024",
			wantAns:   "First line.\nYour key is [redacted], twice: [redacted].\n\n" + long,
		},
		{
			name:      "answer echoes the Authorization header",
			model:     func(*http.Request) string { return "served-model-2024" },
			answer:    func(r *http.Request) string { return "You sent: " + r.Header.Get("Authorization") },
			wantModel: "served-model-2024", wantAns: "You sent: Bearer [redacted]",
		},
		{
			name:      "model is the key",
			model:     func(*http.Request) string { return testKey },
			answer:    func(*http.Request) string { return "An answer." },
			wantModel: "[redacted]", wantAns: "An answer.",
		},
		{
			name:      "key inside the model name",
			model:     func(*http.Request) string { return "proxy/" + testKey + "/gpt-4o-mini" },
			answer:    func(*http.Request) string { return "An answer." },
			wantModel: "proxy/[redacted]/gpt-4o-mini", wantAns: "An answer.",
		},
		{
			name:      "model echoes the Authorization header, and so does the answer",
			model:     func(r *http.Request) string { return r.Header.Get("Authorization") },
			answer:    func(r *http.Request) string { return "auth=" + r.Header.Get("Authorization") + "\n" + long },
			wantModel: "Bearer [redacted]", wantAns: "auth=Bearer [redacted]\n" + long,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				writeCompletionFrom(w, tc.model(r), tc.answer(r))
			}})
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if err != nil || te != nil {
				t.Fatalf("llm.ask: %v %v", err, te)
			}
			// The provider did get the key: the masking is what kept it out.
			if a := r.fake.last(t).Authorization; a != "Bearer "+testKey {
				t.Fatalf("Authorization = %q, want the connection's key", a)
			}
			var out llm.AskOut
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			if out.Answer != tc.wantAns {
				t.Errorf("answer = %q\nwant     %q", out.Answer, tc.wantAns)
			}
			if out.Model != tc.wantModel {
				t.Errorf("model = %q, want %q", out.Model, tc.wantModel)
			}
			if len(out.Sources) == 0 || out.Usage.PromptTokens != 321 {
				t.Errorf("the rest of the result changed: %+v", out)
			}
			for what, s := range map[string]string{"result": string(raw), "log": r.logs.String()} {
				if strings.Contains(s, testKey) {
					t.Errorf("the API key leaked into the %s: %s", what, s)
				}
			}
		})
	}
}

// Errors about a completion quote the model name the provider sent, and a
// refusal's text: both are masked too.
func TestAnswerErrorsNeverCarryTheKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(r *http.Request) string
		want string
	}{
		{
			name: "empty answer from a model named with the key",
			body: func(r *http.Request) string {
				return `{"id":"x","object":"chat.completion","model":"` + r.Header.Get("Authorization") +
					`","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":""}}]}`
			},
			want: "model Bearer [redacted] returned an empty answer",
		},
		{
			name: "refusal quoting the key",
			body: func(r *http.Request) string {
				return `{"id":"x","object":"chat.completion","model":"m-` + testKey + `","choices":[{"index":0,"finish_reason":"stop",` +
					`"message":{"role":"assistant","content":"","refusal":"I will not repeat ` + r.Header.Get("Authorization") + `"}}]}`
			},
			want: "model m-[redacted] declined to answer: I will not repeat Bearer [redacted]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, rigOpts{handle: func(w http.ResponseWriter, r *http.Request, _ int) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tc.body(r)))
			}})
			raw, te, err := r.invoke(context.Background(), map[string]any{"question": "Which room has a projector?"})
			if err != nil {
				t.Fatalf("transport error %v, want a tool error", err)
			}
			if te == nil || te.Code != sdk.CodeConflict || !strings.Contains(te.Message, tc.want) {
				t.Fatalf("got result %s / error %v; want a conflict containing %q", raw, te, tc.want)
			}
			for what, s := range map[string]string{"result": string(raw), "error": te.Message, "log": r.logs.String()} {
				if strings.Contains(s, testKey) {
					t.Errorf("the API key leaked into the %s: %s", what, s)
				}
			}
		})
	}
}
