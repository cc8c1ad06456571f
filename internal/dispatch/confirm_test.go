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

// asker is a Confirmer keeping its questions in memory: a state answers
// the call it was asked about, once. The host's seals them instead
// (host/internal/confirm); this one lets the gate's part be seen alone.
type asker struct {
	mu    sync.Mutex
	asked map[string]dispatch.Question // by state
	used  map[string]bool
	err   error // a store that cannot tell
}

func newAsker() *asker {
	return &asker{asked: map[string]dispatch.Question{}, used: map[string]bool{}}
}

func (a *asker) Ask(_ context.Context, q dispatch.Question) (dispatch.Asked, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.asked) + 1
	state := fmt.Sprintf("state-%d", n)
	a.asked[state] = q
	return dispatch.Asked{ID: fmt.Sprintf("cf_%d", n), State: state, ExpiresAt: time.Now().Add(time.Minute), Message: "confirm " + q.Capability}, nil
}

func (a *asker) Answered(_ context.Context, state string, q dispatch.Question) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return "", a.err
	}
	asked, ok := a.asked[state]
	switch {
	case !ok:
		return "", fmt.Errorf("%w: not made here", dispatch.ErrConfirmationState)
	case asked.Principal != q.Principal || asked.Capability != q.Capability || string(asked.Args) != string(q.Args):
		return "", fmt.Errorf("%w: another call's", dispatch.ErrConfirmationState)
	case a.used[state]:
		return "", fmt.Errorf("%w: answered before", dispatch.ErrConfirmationState)
	}
	a.used[state] = true
	return "cf_" + state[len("state-"):], nil
}

// confirmingGate is a gate over a desk that can check ownership alone,
// with capCancel at risk, an approver and an asker.
func confirmingGate(t *testing.T, risk registry.Risk) (*dispatch.Dispatcher, *desk, *approver, *asker) {
	t.Helper()
	policy := deskPolicy()
	policy.Risk.Capabilities = map[string]registry.Risk{capCancel: risk}
	dk := newDesk()
	d, err := dispatch.New(deskRegistry(t), policy, map[string]dispatch.Provider{"desk": checkingDesk{dk}})
	if err != nil {
		t.Fatal(err)
	}
	a, ask := &approver{res: pendingResult}, newAsker()
	d.UseApprover(a)
	d.UseConfirmer(ask)
	return d, dk, a, ask
}

func canAsk() context.Context {
	return dispatch.WithConfirmation(context.Background(), dispatch.Confirmation{CanAsk: true})
}

func answering(state string, a dispatch.Answer) context.Context {
	return dispatch.WithConfirmation(context.Background(), dispatch.Confirmation{CanAsk: true, State: state, Answer: a})
}

// ask calls capCancel on b-1 as alice from a client that can ask, and
// returns the question.
func ask(t *testing.T, d *dispatch.Dispatcher) *dispatch.NeedsConfirmation {
	t.Helper()
	_, err := d.Invoke(canAsk(), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	var nc *dispatch.NeedsConfirmation
	if !errors.As(err, &nc) {
		t.Fatalf("Invoke = %v; want the question", err)
	}
	return nc
}

// TestReviewRequiredAsksTheCallersUser: a review_required call from a
// client that can ask is answered with a question, not held and not run;
// the yes runs it once, as the caller, and the same yes again is refused.
func TestReviewRequiredAsksTheCallersUser(t *testing.T) {
	d, dk, a, _ := confirmingGate(t, registry.RiskReviewRequired)
	nc := ask(t, d)
	if nc.Capability != capCancel || nc.Risk != registry.RiskReviewRequired || nc.State == "" || nc.ID == "" || nc.Message == "" {
		t.Fatalf("question %+v", nc)
	}
	if _, invoked := dk.calls(); invoked != 0 || len(a.taken()) != 0 {
		t.Fatalf("the question ran the call (%d) or held it (%d)", invoked, len(a.taken()))
	}
	res, err := d.Invoke(answering(nc.State, dispatch.Accepted), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if err != nil || !dk.cancelled("b-1") {
		t.Fatalf("the confirmed call: %s %v, cancelled %v; want it run", res, err, dk.cancelled("b-1"))
	}
	_, err = d.Invoke(answering(nc.State, dispatch.Accepted), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if outcomeOf(err) != string(dispatch.StepRisk) {
		t.Fatalf("the same yes again: %v; want a refusal at risk", err)
	}
	if _, invoked := dk.calls(); invoked != 1 {
		t.Fatalf("the call ran %d times; want once", invoked)
	}
}

// TestConfirmationRefusals: a no, a state the confirmer does not accept
// (another call's), and a confirmer that cannot tell each leave the call
// unrun; the first two are refusals at risk saying why.
func TestConfirmationRefusals(t *testing.T) {
	d, dk, _, ask0 := confirmingGate(t, registry.RiskReviewRequired)
	nc := ask(t, d)
	_, err := d.Invoke(answering(nc.State, dispatch.Declined), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	var r *dispatch.Refusal
	if !errors.As(err, &r) || r.Step != dispatch.StepRisk || r.Reason != "the user declined to confirm this call, so it did not run" {
		t.Fatalf("declined: %v; want a refusal at risk", err)
	}
	nc = ask(t, d)
	// Other arguments, and another caller, with the state of this call.
	for _, c := range []struct {
		p    dispatch.Principal
		args string
	}{{aliceAction, `{"id":"b-0"}`}, {operator, `{"id":"b-1"}`}} {
		_, err = d.Invoke(answering(nc.State, dispatch.Accepted), c.p, capCancel, json.RawMessage(c.args))
		if !errors.As(err, &r) || r.Step != dispatch.StepRisk || r.Reason != "confirmation state not accepted: another call's" {
			t.Fatalf("%s with %s: %v; want refused at risk", c.p.Role, c.args, err)
		}
	}
	ask0.err = errors.New("database down")
	_, err = d.Invoke(answering(nc.State, dispatch.Accepted), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if err == nil || errors.As(err, &r) || !errors.Is(err, ask0.err) {
		t.Fatalf("confirmer down: %v; want an internal error wrapping its cause", err)
	}
	if _, invoked := dk.calls(); invoked != 0 {
		t.Fatalf("a refused confirmation ran the call %d times", invoked)
	}
}

// TestConfirmationFallsBackToApproval: a dangerous call is held even when
// the client can ask; a review_required one is held when it cannot; a
// state sent back without an answer is asked anew.
func TestConfirmationFallsBackToApproval(t *testing.T) {
	args := json.RawMessage(`{"id":"b-1"}`)
	d, _, a, _ := confirmingGate(t, registry.RiskDangerous)
	if res, err := d.Invoke(canAsk(), aliceAction, capCancel, args); err != nil || string(res) != string(pendingResult) {
		t.Fatalf("dangerous from a client that can ask: %s %v; want it held", res, err)
	}
	d, _, a, _ = confirmingGate(t, registry.RiskReviewRequired)
	if res, err := d.Invoke(context.Background(), aliceAction, capCancel, args); err != nil || string(res) != string(pendingResult) {
		t.Fatalf("review_required from a client that cannot ask: %s %v; want it held", res, err)
	}
	if len(a.taken()) != 1 {
		t.Fatalf("held %d; want 1", len(a.taken()))
	}
	nc := ask(t, d)
	_, err := d.Invoke(answering(nc.State, dispatch.NoAnswer), aliceAction, capCancel, args)
	var again *dispatch.NeedsConfirmation
	if !errors.As(err, &again) || again.State == nc.State {
		t.Fatalf("state without an answer: %v; want a new question", err)
	}
}

// TestNoQuestionForACallTheGateRefuses: the question comes after every
// other step, ownership included, so no one is asked about a call that
// would be refused anyway.
func TestNoQuestionForACallTheGateRefuses(t *testing.T) {
	d, _, _, ask0 := confirmingGate(t, registry.RiskReviewRequired)
	bob := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "bob"}
	for _, c := range []struct {
		p    dispatch.Principal
		args string
		want string
	}{
		{bob, `{"id":"b-1"}`, "ownership"},
		{aliceAction, `{"id":"b-404"}`, "not-found"},
		{aliceAction, `{"id":7}`, "invalid-input"},
		{aliceRead, `{"id":"b-1"}`, "scope"},
	} {
		if _, err := d.Invoke(canAsk(), c.p, capCancel, json.RawMessage(c.args)); outcomeOf(err) != c.want {
			t.Errorf("%s %s: %v; want %s", c.p.UserID, c.args, err, c.want)
		}
	}
	if n := len(ask0.asked); n != 0 {
		t.Fatalf("asked %d questions about refused calls", n)
	}
}

// TestQuestionAndAnswerAreLinkedInTheTrail: the question's record says
// asked and names it; the answer's run names it too and says confirmed.
func TestQuestionAndAnswerAreLinkedInTheTrail(t *testing.T) {
	d, _, _, _ := confirmingGate(t, registry.RiskReviewRequired)
	tr := &trail{}
	d.UseAuditor(tr, true)
	nc := ask(t, d)
	if _, err := d.Invoke(answering(nc.State, dispatch.Accepted), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`)); err != nil {
		t.Fatal(err)
	}
	recs := tr.take()
	if len(recs) != 2 {
		t.Fatalf("%d records; want 2", len(recs))
	}
	q, run := recs[0], recs[1]
	if !q.Asked || q.Confirmed || q.Refusal != nil || q.Err != nil || q.ApprovalID != nc.ID {
		t.Errorf("question's record %+v; want asked, linked to %s", q, nc.ID)
	}
	if run.Asked || !run.Confirmed || run.Refusal != nil || run.Err != nil || run.ApprovalID != nc.ID {
		t.Errorf("run's record %+v; want confirmed, linked to %s", run, nc.ID)
	}
}

// TestInBandOffHoldsForAnApprover: with in-band confirmation turned off
// for a capability, or for its pack, a review_required call from a client
// that can ask is held for an approver instead, and a state asked before
// the switch cannot run it; another capability still asks; turned on
// again, the call asks.
func TestInBandOffHoldsForAnApprover(t *testing.T) {
	args := json.RawMessage(`{"id":"b-1"}`)
	for name, ib := range map[string]dispatch.InBand{
		"capability": {Capabilities: map[string]bool{capCancel: false}},
		"pack":       {Packs: map[string]bool{"booking": false}},
	} {
		t.Run(name, func(t *testing.T) {
			d, dk, a, _ := confirmingGate(t, registry.RiskReviewRequired)
			before := ask(t, d)
			d.SetInBand(ib)
			if res, err := d.Invoke(canAsk(), aliceAction, capCancel, args); err != nil || string(res) != string(pendingResult) {
				t.Fatalf("in-band off, from a client that can ask: %s %v; want it held for an approver", res, err)
			}
			if res, err := d.Invoke(answering(before.State, dispatch.Accepted), aliceAction, capCancel, args); err != nil || string(res) != string(pendingResult) {
				t.Fatalf("in-band off, a yes to an earlier question: %s %v; want it held, not run", res, err)
			}
			if _, invoked := dk.calls(); invoked != 0 || len(a.taken()) != 2 {
				t.Fatalf("ran %d, held %d; want none run and both held", invoked, len(a.taken()))
			}
			d.SetInBand(dispatch.InBand{Capabilities: map[string]bool{capCancel: true}, Packs: map[string]bool{"booking": false}})
			ask(t, d) // the capability's own setting wins over its pack's
			d.SetInBand(dispatch.InBand{})
			ask(t, d)
		})
	}
	// Set before the confirmer, the switch holds too.
	policy := deskPolicy()
	policy.Risk.Capabilities = map[string]registry.Risk{capCancel: registry.RiskReviewRequired}
	d, err := dispatch.New(deskRegistry(t), policy, map[string]dispatch.Provider{"desk": checkingDesk{newDesk()}})
	if err != nil {
		t.Fatal(err)
	}
	d.SetInBand(dispatch.InBand{Capabilities: map[string]bool{capCancel: false}})
	d.UseConfirmer(newAsker())
	if _, err := d.Invoke(canAsk(), aliceAction, capCancel, args); outcomeOf(err) != string(dispatch.StepRisk) {
		t.Fatalf("in-band off and no approver: %v; want a refusal at risk", err)
	}
}
