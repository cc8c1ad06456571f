package llm_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// TestDeclaredBoundsAreEnforced: the bounds agents read in llm.ask's input
// schema (and the host enforces) are the plugin's own: a value at the
// declared bound is accepted, one past it refused with the same number.
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
			if te.Code != capgatev1.ToolError_CODE_INVALID_INPUT {
				t.Fatalf("tool error %v", te)
			}
			return false, te.Message
		}
		return true, ""
	}
	// maxLength counts characters, as the host's validation does: a
	// question of 4000 two-byte characters is within it.
	for _, question := range []string{strings.Repeat("a", maxQ), strings.Repeat("é", maxQ)} {
		if ok, msg := ask(map[string]any{"question": question}); !ok {
			t.Errorf("a question of %d characters (%d bytes) was refused: %s", maxQ, len(question), msg)
		}
	}
	if ok, msg := ask(map[string]any{"question": strings.Repeat("é", maxQ+1)}); ok || !strings.Contains(msg, "at most 4000") {
		t.Errorf("a question of %d characters: ok %v, %q", maxQ+1, ok, msg)
	}
	// An entity at the bound reaches the search (which does not know it).
	if _, msg := ask(map[string]any{"question": "projector", "entity": strings.Repeat("e", maxE)}); !strings.Contains(msg, "unknown entity type") {
		t.Errorf("an entity of %d characters: %q, want the search's answer", maxE, msg)
	}
	if ok, msg := ask(map[string]any{"question": "projector", "entity": strings.Repeat("e", maxE+1)}); ok || !strings.Contains(msg, "at most 128") {
		t.Errorf("an entity of %d characters: ok %v, %q", maxE+1, ok, msg)
	}
	// max_sources up to the bound is capped to max_results.
	if ok, msg := ask(map[string]any{"question": "projector", "max_sources": maxS}); !ok {
		t.Errorf("max_sources %d refused: %s", maxS, msg)
	} else if got := r.cat.searches[len(r.cat.searches)-1]["limit"]; got != 3 {
		t.Errorf("max_sources %d searched with limit %v, want max_results 3", maxS, got)
	}
	if ok, msg := ask(map[string]any{"question": "projector", "max_sources": maxS + 1}); ok || !strings.Contains(msg, "max_sources is 1001") {
		t.Errorf("max_sources %d: ok %v, %q", maxS+1, ok, msg)
	}
}
