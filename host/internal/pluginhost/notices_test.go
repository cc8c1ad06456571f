package pluginhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
)

type heard struct {
	wants dispatch.Wants
	mu    sync.Mutex
	got   []dispatch.Notice
}

func (h *heard) Wants() dispatch.Wants { return h.wants }
func (h *heard) Notify(n dispatch.Notice) {
	h.mu.Lock()
	h.got = append(h.got, n)
	h.mu.Unlock()
}

// Concurrent calls to a real plugin process each hear their own notices,
// and only what their caller asked for; a call without a sink hears none.
func TestNoticesReachTheirCall(t *testing.T) {
	h, _, err := startHost(t, notes("notes", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	prov := h.Providers()["notes"]
	const calls = 12
	sinks := make([]*heard, calls)
	var wg sync.WaitGroup
	for i := range calls {
		// Odd calls want progress alone, even ones logs too.
		sinks[i] = &heard{wants: dispatch.Wants{Progress: true}}
		if i%2 == 0 {
			sinks[i].wants.LogLevel = dispatch.LogInfo
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := dispatch.WithNotices(context.Background(), sinks[i])
			args := json.RawMessage(fmt.Sprintf(`{"id":"c%d","size":3}`, i))
			if _, err := prov.Invoke(ctx, dispatch.Request{Capability: "notes.steps", Args: args}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, s := range sinks {
		id := fmt.Sprintf("c%d", i)
		s.mu.Lock()
		got := s.got
		s.mu.Unlock()
		want := 3
		if i%2 == 0 {
			want = 4
			if len(got) == 0 || got[0].Log == nil || string(got[0].Log.Data) != `"`+id+`"` || got[0].Log.Logger != "notes.steps" {
				t.Fatalf("call %s: first notice %+v, want its log", id, got)
			}
			got = got[1:]
		}
		if len(got) != 3 {
			t.Fatalf("call %s heard %d notices, want %d", id, len(got)+want-3, want)
		}
		for j, n := range got {
			if n.Progress == nil || n.Progress.Message != id || n.Progress.Progress != float64(j+1) || n.Progress.Total != 3 {
				t.Fatalf("call %s: notice %d = %+v", id, j, n)
			}
		}
	}
	// Without a sink the call runs as ever.
	if _, err := prov.Invoke(context.Background(), dispatch.Request{Capability: "notes.steps", Args: json.RawMessage(`{"id":"x","size":3}`)}); err != nil {
		t.Fatal(err)
	}
}
