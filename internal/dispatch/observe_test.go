package dispatch_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// counts is an Observer keeping what it is told.
type counts struct {
	mu  sync.Mutex
	got []string
}

func (c *counts) Observe(o dispatch.Observation) {
	name := "<nil>"
	if o.Entry != nil {
		name = o.Entry.Name
	}
	c.mu.Lock()
	c.got = append(c.got, name+"/"+string(o.Step)+"/"+string(o.Outcome))
	c.mu.Unlock()
}

// TestObserverSeesEveryDecision: each kind of decision reaches the
// observer once, with the capability's entry (never a made-up name), the
// refusing step or the outcome — with an auditor and without one.
func TestObserverSeesEveryDecision(t *testing.T) {
	for _, audited := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "audited"}[audited], func(t *testing.T) {
			d, _, _, _ := confirmingGate(t, registry.RiskReviewRequired)
			obs := &counts{}
			d.UseObserver(obs)
			if audited {
				d.UseAuditor(&trail{}, true)
			}
			viewer := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeAction, UserID: alice}
			calls := []struct {
				ctx  context.Context
				p    dispatch.Principal
				name string
				args string
				want string
			}{
				{context.Background(), aliceAction, capList, `{}`, capList + "//ok"},
				{context.Background(), aliceAction, capGet, `{"id":"b-404"}`, capGet + "//tool_error"},
				{context.Background(), viewer, capBook, `{"slot":"x"}`, capBook + "/permission/"},
				{context.Background(), aliceAction, "made.up", `{}`, "<nil>/unknown_capability/"},
				{context.Background(), aliceAction, capCancel, `{"id":"b-1"}`, capCancel + "//held"},
				{canAsk(), aliceAction, capCancel, `{"id":"b-1"}`, capCancel + "//asked"},
			}
			for _, c := range calls {
				d.Invoke(c.ctx, c.p, c.name, json.RawMessage(c.args))
			}
			if len(obs.got) != len(calls) {
				t.Fatalf("observed %d decisions; want %d: %v", len(obs.got), len(calls), obs.got)
			}
			for i, c := range calls {
				if obs.got[i] != c.want {
					t.Errorf("call %d (%s): observed %q; want %q", i, c.name, obs.got[i], c.want)
				}
			}
		})
	}
}
