package llm_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
)

func TestAskGroundsTheAnswerInTheCallersRecords(t *testing.T) {
	r := newRig(t, rigOpts{})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "Which room has a projector?"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	// The provider's answer, model and usage are passed through.
	if out.Answer != "Aurora room has a projector [1]." || out.Model != "served-model-2024" ||
		out.Usage.PromptTokens != 321 || out.Usage.CompletionTokens != 12 {
		t.Errorf("result = %+v", out)
	}
	// room-gone was a hit platform.get no longer finds: it is no source.
	if got, want := sourceIDs(out.Sources), []string{"room-aurora", "desk-12", "plan-pro"}; !slices.Equal(got, want) {
		t.Errorf("sources = %v, want %v", got, want)
	}
	if out.Sources[0].Entity != "booking.resource" || out.Sources[0].Title != "Aurora room" {
		t.Errorf("sources[0] = %+v", out.Sources[0])
	}

	req := r.fake.last(t)
	if req.Path != "/v1/chat/completions" || req.Body.Model != "test-model" || req.Body.MaxTokens != 256 {
		t.Errorf("request path %s model %q max_tokens %d", req.Path, req.Body.Model, req.Body.MaxTokens)
	}
	if req.Authorization != "Bearer "+testKey {
		t.Errorf("Authorization = %q, want the connection's key", req.Authorization)
	}
	if len(req.Body.Messages) != 2 || req.Body.Messages[0].Role != "system" || req.Body.Messages[1].Role != "user" {
		t.Fatalf("messages = %+v", req.Body.Messages)
	}
	sys, user := req.Body.Messages[0].Content, req.Body.Messages[1].Content
	if !strings.Contains(sys, "Use only the numbered sources") || !strings.Contains(sys, "catalogue does not say") {
		t.Errorf("system prompt does not confine the model to the sources: %q", sys)
	}
	// The records themselves (from platform.get), numbered, and the question.
	for _, want := range []string{`[1] {"entity":"booking.resource","id":"room-aurora"`, "AURORA-FLOOR-SEVEN", "[2]", "Standing desk 12",
		"[3]", "PLAN-PRO-CODE", "Question: Which room has a projector?"} {
		if !strings.Contains(user, want) {
			t.Errorf("prompt lacks %q:\n%s", want, user)
		}
	}
	if strings.Contains(user, "room-gone") || strings.Contains(user, "[4]") {
		t.Errorf("prompt has a source that no longer exists:\n%s", user)
	}
	// Searched for the question's content words, with the default max_sources.
	if got := r.cat.searches[0]; got["query"] != "room projector" || got["limit"] != 5 || got["entity"] != "" {
		t.Errorf("%s got %v", platform.SearchName, got)
	}
}

func TestAskEntityAndMaxSources(t *testing.T) {
	r := newRig(t, rigOpts{maxResults: 2})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector", "entity": "subscription.plan"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	if got := sourceIDs(out.Sources); !slices.Equal(got, []string{"plan-pro"}) {
		t.Errorf("entity-restricted sources = %v", got)
	}
	if strings.Contains(r.fake.last(t).prompt(), "AURORA") {
		t.Error("a record of another entity type reached the prompt")
	}

	out, _, _ = r.ask(t, context.Background(), map[string]any{"question": "projector", "max_sources": 1})
	if got := sourceIDs(out.Sources); !slices.Equal(got, []string{"room-aurora"}) {
		t.Errorf("max_sources 1: sources = %v", got)
	}
	// Above max_results (2 here) it is capped, as platform.search caps it.
	out, _, _ = r.ask(t, context.Background(), map[string]any{"question": "projector", "max_sources": 50})
	if got := r.cat.searches[len(r.cat.searches)-1]["limit"]; got != 2 {
		t.Errorf("max_sources 50 searched with limit %v, want max_results 2", got)
	}
	if len(out.Sources) > 2 {
		t.Errorf("max_sources capped at 2, got %d sources", len(out.Sources))
	}
}

// A caller the gate refuses platform.search gets an ungrounded answer: no
// record reaches the model, and the model is told it has no platform data.
// The nested calls pass the gate as the caller: in the same host, a caller
// whose role may read the catalogue gets a grounded answer.
func TestAskRefusedSearchAnswersUngrounded(t *testing.T) {
	r := newRig(t, rigOpts{roles: map[string][]string{
		"customer": {llm.PermAsk},
		"reader":   {llm.PermAsk, permCatalogue},
	}})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "Which room has a projector?"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	if len(out.Sources) != 0 || out.Answer == "" {
		t.Errorf("result = %+v, want an answer without sources", out)
	}
	// The nested call was refused at the caller's permission, and stopped
	// there.
	if logs := r.logs.String(); !strings.Contains(logs, "the caller may not search") ||
		!strings.Contains(logs, platform.SearchName+" refused at "+string(sdk.StepPermission)) {
		t.Errorf("log does not record the permission refusal of platform.search:\n%s", logs)
	}
	if searches, gets := r.cat.reached(); searches+gets != 0 {
		t.Errorf("the catalogue was reached despite the refusal: %d searches, %d gets", searches, gets)
	}
	req := r.fake.last(t)
	if !strings.Contains(req.Body.Messages[0].Content, "No platform data is available") {
		t.Errorf("system prompt = %q", req.Body.Messages[0].Content)
	}
	for _, leak := range []string{"Aurora", "AURORA", "desk-12", "PLAN-PRO", "Sources:"} {
		if strings.Contains(req.prompt(), leak) {
			t.Errorf("the prompt holds %q though the caller may not search", leak)
		}
	}

	reader := sdk.Principal{Role: "reader", Scope: sdk.ScopeRead, UserID: "rita"}
	out, te, err = r.askAs(t, context.Background(), reader, map[string]any{"question": "Which room has a projector?"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask as a reader: %v %v", err, te)
	}
	if got := sourceIDs(out.Sources); !slices.Equal(got, []string{"room-aurora", "desk-12", "plan-pro"}) {
		t.Errorf("a caller who may read the catalogue got sources %v", got)
	}
	if !strings.Contains(r.fake.last(t).prompt(), "AURORA-FLOOR-SEVEN") {
		t.Error("the reader's answer is not grounded in the records")
	}
}

// A caller who may search but not get: the hits they could see (title,
// snippet) ground the answer, the full records do not reach the model.
func TestAskRefusedGetUsesOnlyTheHits(t *testing.T) {
	r := newRig(t, rigOpts{
		getPermission: "catalogue.records",
		roles:         map[string][]string{"customer": {llm.PermAsk, permCatalogue}},
	})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "projector", "max_sources": 1})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	if got := sourceIDs(out.Sources); !slices.Equal(got, []string{"room-aurora"}) {
		t.Errorf("sources = %v", got)
	}
	p := r.fake.last(t).prompt()
	if !strings.Contains(p, "snippet of Aurora room") || strings.Contains(p, "AURORA-FLOOR-SEVEN") {
		t.Errorf("prompt should hold the hit, not the record:\n%s", p)
	}
	if searches, gets := r.cat.reached(); searches != 1 || gets != 0 {
		t.Errorf("the stand-in served %d searches and %d gets; want the search only", searches, gets)
	}
}

func TestAskWithoutSearchPluginAnswersUngrounded(t *testing.T) {
	r := newRig(t, rigOpts{noCatalogue: true})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "What can I book?"})
	if err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	if len(out.Sources) != 0 {
		t.Errorf("sources = %v", out.Sources)
	}
	if !strings.Contains(r.fake.last(t).Body.Messages[0].Content, "No platform data is available") {
		t.Error("the model was not told it has no platform data")
	}
}

// Nothing matched: still grounded, and the model is told no record matched.
func TestAskNoHits(t *testing.T) {
	r := newRig(t, rigOpts{})
	out, te, err := r.ask(t, context.Background(), map[string]any{"question": "zzz qqq"})
	if err != nil || te != nil || len(out.Sources) != 0 {
		t.Fatalf("llm.ask: %+v %v %v", out, te, err)
	}
	req := r.fake.last(t)
	if !strings.Contains(req.prompt(), "no catalogue record matched") || !strings.Contains(req.Body.Messages[0].Content, "numbered sources") {
		t.Errorf("prompt = %s", req.prompt())
	}
}

func TestAskInputErrors(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, tc := range []struct {
		name string
		args any
		code sdk.ErrorCode
		want []string
	}{
		{"empty question", map[string]any{"question": ""}, sdk.CodeInvalidInput, []string{"question is empty"}},
		{"blank question", map[string]any{"question": " \n\t"}, sdk.CodeInvalidInput, []string{"question is empty"}},
		// What the input schema refuses, the gate refuses before the
		// plugin runs (the plugin's own checks: TestDeclaredBoundsAreEnforced).
		{"no question", map[string]any{}, sdk.CodeInvalidInput, []string{"invalid arguments for llm.ask", "question"}},
		{"huge question", map[string]any{"question": strings.Repeat("why ", 2000)}, sdk.CodeInvalidInput, []string{"invalid arguments for llm.ask", "4000"}},
		{"negative max_sources", map[string]any{"question": "q", "max_sources": -1}, sdk.CodeInvalidInput, []string{"invalid arguments for llm.ask", "max_sources"}},
		{"wrong type", map[string]any{"question": 42}, sdk.CodeInvalidInput, []string{"invalid arguments for llm.ask", "question"}},
		// The search plugin's own answer to a bad entity reaches the agent.
		{"unknown entity", map[string]any{"question": "projector", "entity": "nope.thing"}, sdk.CodeInvalidInput, []string{`unknown entity type "nope.thing"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, te, err := r.ask(t, context.Background(), tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if te == nil || te.Code != tc.code {
				t.Fatalf("tool error = %v, want %s containing %q", te, tc.code, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(te.Message, w) {
					t.Errorf("tool error %q does not contain %q", te.Message, w)
				}
			}
		})
	}
	if n := len(r.fake.requests()); n != 0 {
		t.Errorf("the provider was asked %d times for invalid input", n)
	}
}
