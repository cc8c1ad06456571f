package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
)

// TestRefusedAndUnknownCallsAreCounted: a token flooding calls the gate
// refuses (unknown names, hidden capabilities, permission refusals) is
// throttled at its own per-token limit, like one making real calls, and
// another token is not touched by it.
func TestRefusedAndUnknownCallsAreCounted(t *testing.T) {
	ctx := context.Background()
	policy := deskPolicy()
	policy.Packs["hidden"] = false
	policy.Limits = dispatch.Limits{PerToken: dispatch.Rate{Count: 10, Per: time.Minute}}
	d, dk := newGate(t, policy)
	d.UseLimiter(ratelimit.NewMemory())
	guest := dispatch.Principal{Role: "partner", Scope: dispatch.ScopeRead, Token: "guest"}
	names := []string{"nope.nothing", capGet, "nope.other"} // unknown, refused at permission, unknown
	limited := 0
	for i := range 500 {
		_, err := d.Invoke(ctx, guest, names[i%len(names)], json.RawMessage(`{"id":"b-1"}`))
		if r := new(dispatch.Refusal); asRefusal(err, &r) && r.Step == dispatch.StepRateLimit {
			limited++
		}
	}
	if limited != 490 {
		t.Errorf("%d of 500 refused calls met the rate limit, want 490 (per_token 10/m)", limited)
	}
	// Alice's token has its own count: her real call runs.
	alice := aliceRead
	alice.Token = "alice"
	if _, err := d.Invoke(ctx, alice, capList, nil); err != nil {
		t.Fatalf("alice's call beside the flood: %v", err)
	}
	if _, invoked := dk.calls(); invoked != 1 {
		t.Errorf("the provider ran %d calls, want alice's one", invoked)
	}
}

// TestUnseenLimitTellsNothing: once a token's calls to names it cannot
// see are limited, a hidden capability and an unknown name still answer
// alike, and a capability's own rate is not what counts them.
func TestUnseenLimitTellsNothing(t *testing.T) {
	ctx := context.Background()
	policy := deskPolicy()
	policy.Packs["booking"] = false
	policy.Limits = dispatch.Limits{
		Default:      dispatch.Rate{Count: 2, Per: time.Hour},
		Capabilities: map[string]dispatch.Rate{capGet: {Count: 100, Per: time.Hour}},
	}
	d, _ := newGate(t, policy)
	d.UseLimiter(ratelimit.NewMemory())
	p := aliceRead
	p.Token = "t"
	for _, name := range []string{capGet, "booking.nonexistent"} {
		_, err := d.Invoke(ctx, p, name, json.RawMessage(`{"id":"b-1"}`))
		answeredUnknown(t, err, name)
	}
	var msgs []string
	for _, name := range []string{capGet, "booking.nonexistent"} {
		_, err := d.Invoke(ctx, p, name, json.RawMessage(`{"id":"b-1"}`))
		r := new(dispatch.Refusal)
		if !asRefusal(err, &r) || r.Step != dispatch.StepRateLimit {
			t.Fatalf("third call to %s: %v, want the rate limit for names the token cannot see", name, err)
		}
		msgs = append(msgs, r.Reason)
	}
	if msgs[0] != msgs[1] {
		t.Errorf("a hidden capability's limit says %q, an unknown name's %q", msgs[0], msgs[1])
	}
}

// TestHiddenRefusalIsAudited: the caller hears "unknown", the trail keeps
// the step that refused.
func TestHiddenRefusalIsAudited(t *testing.T) {
	policy := deskPolicy()
	policy.DisabledCapabilities = []string{capGet}
	d, _ := newGate(t, policy)
	a := &trail{}
	d.UseAuditor(a, true)
	_, err := d.Invoke(context.Background(), operator, capGet, json.RawMessage(`{"id":"b-1"}`))
	answeredUnknown(t, err, capGet)
	recs := a.take()
	if len(recs) != 1 || recs[0].Refusal == nil || recs[0].Refusal.Step != dispatch.StepKillSwitch {
		t.Fatalf("records %+v, want one refusal at kill_switch", recs)
	}
}

func asRefusal(err error, r **dispatch.Refusal) bool { return errors.As(err, r) }

// TestRefusalKeepsItsStepWhileTheCounterIsDown: a call refused anyway
// (the kill switch) is not answered with the counter's trouble, and a
// hidden capability still answers as an unknown name.
func TestRefusalKeepsItsStepWhileTheCounterIsDown(t *testing.T) {
	ctx := context.Background()
	policy := deskPolicy()
	policy.ActionsOff = true
	policy.DisabledCapabilities = []string{capGet}
	policy.Limits = dispatch.Limits{PerToken: dispatch.Rate{Count: 10, Per: time.Minute}}
	d, _ := newGate(t, policy)
	d.UseLimiter(failingLimiter{})
	_, err := d.Invoke(ctx, aliceAction, capBook, json.RawMessage(`{"slot":"x"}`))
	refusalAt(t, err, dispatch.StepKillSwitch, capBook)
	_, err = d.Invoke(ctx, aliceAction, capGet, json.RawMessage(`{"id":"b-1"}`))
	answeredUnknown(t, err, capGet)
	// A call the gate would admit meets the counter's trouble.
	_, err = d.Invoke(ctx, aliceRead, capList, nil)
	refusalAt(t, err, dispatch.StepRateLimit, capList)
}
