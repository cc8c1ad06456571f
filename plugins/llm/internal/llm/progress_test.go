package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// A caller who asked to hear llm.ask's progress sees its steps, the model
// last; one answered without the catalogue is told why.
func TestAskReportsProgress(t *testing.T) {
	r := newRig(t, rigOpts{})
	ctx, heard := sdktest.Listen(context.Background(), true, sdk.LogNotice)
	if _, te, err := r.ask(t, ctx, map[string]any{"question": "Which room has a projector?"}); err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	ps := heard.Progress()
	if len(ps) < 3 || ps[0].Message != "searching the catalogue" || !strings.HasPrefix(ps[1].Message, "reading source 1") {
		t.Fatalf("progress = %+v", ps)
	}
	last := ps[len(ps)-1]
	if last.Message != "asking the model" || last.Done != last.Total {
		t.Fatalf("last step = %+v, want the model, the last of its total", last)
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Done <= ps[i-1].Done {
			t.Fatalf("progress does not increase: %+v", ps)
		}
	}
	if logs := heard.Logs(); len(logs) != 0 {
		t.Fatalf("a grounded answer logged %+v", logs)
	}

	r = newRig(t, rigOpts{roles: map[string][]string{"customer": {llm.PermAsk}}})
	ctx, heard = sdktest.Listen(context.Background(), false, sdk.LogNotice)
	if _, te, err := r.ask(t, ctx, map[string]any{"question": "Which room has a projector?"}); err != nil || te != nil {
		t.Fatalf("llm.ask: %v %v", err, te)
	}
	logs := heard.Logs()
	if len(logs) != 1 || logs[0].Level != sdk.LogNotice || !strings.Contains(string(logs[0].Data), "may not search") || len(heard.Progress()) != 0 {
		t.Fatalf("an ungrounded answer: logs %+v, progress %+v", logs, heard.Progress())
	}
}
