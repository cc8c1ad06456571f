package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// rounds is an InputSealer keeping its rounds in memory, each bound to
// its call and used once; the host's seals them (host/internal/confirm).
type rounds struct {
	*asker
	mu    sync.Mutex
	made  map[string]dispatch.Question
	st    map[string]dispatch.InputState
	used  map[string]bool
	count int
}

func (r *rounds) SealInput(_ context.Context, q dispatch.Question, s dispatch.InputState) (string, dispatch.InputState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	s.ID, s.ExpiresAt = fmt.Sprintf("in_%d", r.count), time.Now().Add(time.Minute)
	state := fmt.Sprintf("round-%d", r.count)
	r.made[state], r.st[state] = q, s
	return state, s, nil
}

func (r *rounds) OpenInput(_ context.Context, state string, q dispatch.Question) (dispatch.InputState, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	made, ok := r.made[state]
	switch {
	case !ok:
		return dispatch.InputState{}, dispatch.ErrNotInputState
	case made.Principal != q.Principal || made.Capability != q.Capability || string(made.Args) != string(q.Args):
		return dispatch.InputState{}, fmt.Errorf("%w: another call's", dispatch.ErrConfirmationState)
	case r.used[state]:
		return dispatch.InputState{}, fmt.Errorf("%w: answered before", dispatch.ErrConfirmationState)
	}
	r.used[state] = true
	return r.st[state], nil
}

// askingDesk asks its caller's client for a name in its first round and
// answers it in the second, recording what each round brought.
type askingDesk struct {
	mu   sync.Mutex
	seen []*dispatch.InputRound
}

func (a *askingDesk) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Input)
	a.mu.Unlock()
	if r.Input == nil {
		return nil, &dispatch.InputRequired{Missing: []string{"elicitation"}}
	}
	if ans, ok := r.Input.Responses["name"]; ok && string(r.Input.State) == "kept" {
		return json.RawMessage(`{"answer":` + string(ans) + `}`), nil
	}
	return nil, &dispatch.InputRequired{State: []byte("kept"), Requests: []dispatch.InputRequest{
		{Key: "name", Method: dispatch.AskElicit, Params: json.RawMessage(`{"mode":"form","message":"Name?"}`)}}}
}

func askingGate(t *testing.T) (*dispatch.Dispatcher, *askingDesk, *trail) {
	t.Helper()
	reg := registry.New([]string{"booking"})
	if err := reg.Add(registry.Capability{Name: "booking.ask", Description: "Ask.", Kind: registry.Read, Pack: "booking",
		Plugin: "asker", InputSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	ad := &askingDesk{}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"booking": true}}, map[string]dispatch.Provider{"asker": ad})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trail{}
	d.UseAuditor(tr, true)
	d.UseConfirmer(&rounds{asker: newAsker(), made: map[string]dispatch.Question{}, st: map[string]dispatch.InputState{}, used: map[string]bool{}})
	return d, ad, tr
}

// TestRoundsRecorded: a call that asks its client is answered NeedsInput
// and recorded as asked, naming its round; the answer, brought back with
// the sealed state, reaches the provider with the state it kept and the
// round, and its record names the same round; a client that can be asked
// nothing gets MissingCapability, recorded as the caller's to fix.
func TestRoundsRecorded(t *testing.T) {
	d, ad, tr := askingGate(t)
	can := dispatch.Input{CanAsk: []string{dispatch.AskElicit}}
	_, err := d.Invoke(dispatch.WithInput(context.Background(), can), aliceAction, "booking.ask", nil)
	var ni *dispatch.NeedsInput
	if !errors.As(err, &ni) || ni.State == "" || ni.ID == "" || len(ni.Requests) != 1 || ni.Requests[0].Key != "name" {
		t.Fatalf("round 1: %v; want the request for a name", err)
	}
	recs := tr.take()
	if len(recs) != 1 || !recs[0].AskedClient || recs[0].ApprovalID != ni.ID || recs[0].Err != nil || recs[0].Refusal != nil {
		t.Fatalf("round 1 recorded %+v; want asked, naming %s", recs, ni.ID)
	}
	ctx := dispatch.WithInput(context.Background(), dispatch.Input{CanAsk: can.CanAsk,
		Responses: map[string]json.RawMessage{"name": json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`)}})
	ctx = dispatch.WithConfirmation(ctx, dispatch.Confirmation{State: ni.State})
	res, err := d.Invoke(ctx, aliceAction, "booking.ask", nil)
	if err != nil || len(res) == 0 {
		t.Fatalf("round 2: %s %v", res, err)
	}
	recs = tr.take()
	if len(recs) != 1 || recs[0].AskedClient || recs[0].ApprovalID != ni.ID || recs[0].Err != nil {
		t.Fatalf("round 2 recorded %+v; want the run, naming %s", recs, ni.ID)
	}
	if in := ad.seen[1]; in == nil || string(in.State) != "kept" || in.Round != 1 {
		t.Fatalf("round 2 brought %+v; want the state kept and round 1", in)
	}
	if _, err := d.Invoke(ctx, aliceAction, "booking.ask", nil); outcomeOf(err) != string(dispatch.StepInput) {
		t.Fatalf("the state again: %v; want a refusal at step input", err)
	}
	tr.take()
	_, err = d.Invoke(context.Background(), aliceAction, "booking.ask", nil)
	var mc *dispatch.MissingCapability
	if !errors.As(err, &mc) || len(mc.Needs) != 1 || mc.Needs[0] != "elicitation" {
		t.Fatalf("a client that cannot be asked: %v; want elicitation missing", err)
	}
	if recs := tr.take(); len(recs) != 1 || recs[0].Err == nil {
		t.Fatalf("recorded %+v; want the failure", recs)
	}
}
