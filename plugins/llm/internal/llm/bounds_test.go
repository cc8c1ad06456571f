package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
)

// TestDeclaredBoundsAreEnforced: the bounds agents read in llm.ask's input
// schema (and the host enforces) are the plugin's own: a value at the
// declared bound is accepted, one past it refused by the gate and, for a
// caller the gate does not check, by the plugin with the same number.
func TestDeclaredBoundsAreEnforced(t *testing.T) {
	r := newRig(t, rigOpts{maxResults: 3})
	d, err := r.llm.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Capabilities) != 1 || d.Capabilities[0].Name != "llm.ask" {
		t.Fatalf("capabilities = %v", d.Capabilities)
	}
	var schema struct {
		Properties map[string]struct {
			MaxLength *int     `json:"maxLength"`
			Minimum   *float64 `json:"minimum"`
			Maximum   *float64 `json:"maximum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(d.Capabilities[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	q, e, m := schema.Properties["question"], schema.Properties["entity"], schema.Properties["max_sources"]
	if q.MaxLength == nil || *q.MaxLength != 4000 || e.MaxLength == nil || *e.MaxLength != 128 ||
		m.Minimum == nil || *m.Minimum != 0 || m.Maximum == nil || *m.Maximum != 1000 {
		t.Fatalf("declared bounds: %s", d.Capabilities[0].InputSchema)
	}
	maxQ, maxE, maxS := *q.MaxLength, *e.MaxLength, int(*m.Maximum)

	ask := func(args map[string]any) (ok bool, msg string) {
		t.Helper()
		_, te, err := r.ask(t, context.Background(), args)
		if err != nil {
			t.Fatal(err)
		}
		if te != nil {
			if te.Code != sdk.CodeInvalidInput {
				t.Fatalf("tool error %v", te)
			}
			return false, te.Message
		}
		return true, ""
	}
	// past is a value one past a bound: the gate refuses it by the schema,
	// and the plugin itself with the same number.
	past := func(args map[string]any, in llm.AskIn, want string) {
		t.Helper()
		if ok, msg := ask(args); ok || !strings.Contains(msg, "invalid arguments for llm.ask") {
			t.Errorf("%.80v: ok %v, %q; want the gate's refusal", args, ok, msg)
		}
		if err := llm.CheckAsk(in); sdk.CodeOf(err) != sdk.CodeInvalidInput || !strings.Contains(err.Error(), want) {
			t.Errorf("the plugin's own check of %.80v: %v, want invalid input saying %q", args, err, want)
		}
	}
	// maxLength counts characters, as the host's validation does: a
	// question of 4000 two-byte characters is within it.
	for _, question := range []string{strings.Repeat("a", maxQ), strings.Repeat("é", maxQ)} {
		if ok, msg := ask(map[string]any{"question": question}); !ok {
			t.Errorf("a question of %d characters (%d bytes) was refused: %s", maxQ, len(question), msg)
		}
	}
	long := strings.Repeat("é", maxQ+1)
	past(map[string]any{"question": long}, llm.AskIn{Question: long}, "at most 4000")
	// An entity at the bound reaches the search (which does not know it).
	if _, msg := ask(map[string]any{"question": "projector", "entity": strings.Repeat("e", maxE)}); !strings.Contains(msg, "unknown entity type") {
		t.Errorf("an entity of %d characters: %q, want the search's answer", maxE, msg)
	}
	longEntity := strings.Repeat("e", maxE+1)
	past(map[string]any{"question": "projector", "entity": longEntity}, llm.AskIn{Question: "projector", Entity: longEntity}, "at most 128")
	// max_sources up to the bound is capped to max_results.
	if ok, msg := ask(map[string]any{"question": "projector", "max_sources": maxS}); !ok {
		t.Errorf("max_sources %d refused: %s", maxS, msg)
	} else if got := r.cat.searches[len(r.cat.searches)-1]["limit"]; got != 3 {
		t.Errorf("max_sources %d searched with limit %v, want max_results 3", maxS, got)
	}
	past(map[string]any{"question": "projector", "max_sources": maxS + 1}, llm.AskIn{Question: "projector", MaxSources: maxS + 1}, "max_sources is 1001")
	past(map[string]any{"question": "projector", "max_sources": -1}, llm.AskIn{Question: "projector", MaxSources: -1}, "max_sources is -1")
	// The plugin's other checks, which no schema states.
	for _, tc := range []struct {
		in   llm.AskIn
		want string
	}{
		{llm.AskIn{}, "question is empty"},
		{llm.AskIn{Question: " \t"}, "question is empty"},
		{llm.AskIn{Question: "caf\xe9?"}, "not valid UTF-8"},
	} {
		if err := llm.CheckAsk(tc.in); sdk.CodeOf(err) != sdk.CodeInvalidInput || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("the plugin's check of %+v: %v, want %q", tc.in, err, tc.want)
		}
	}
	// The entity's bound is platform.search's own.
	if maxE != platform.MaxEntityLen {
		t.Errorf("entity is bounded at %d, platform.search's entity at %d", maxE, platform.MaxEntityLen)
	}
}
