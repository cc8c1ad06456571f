package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// admitCounter counts the admissions of the calls made with its context.
type admitCounter struct {
	n   int
	err error
	ctx context.Context
}

func (a *admitCounter) with(ctx context.Context) context.Context {
	return dispatch.WithAdmit(ctx, func(ctx context.Context) error { a.n++; a.ctx = ctx; return a.err })
}

// TestAdmitOnlyOnceEveryStepAdmits: the admission hook is called once for
// a call that runs, before its provider is asked, and never for a call
// refused, invalid or held for a human.
func TestAdmitOnlyOnceEveryStepAdmits(t *testing.T) {
	d, dk, _ := riskyGate(t, registry.RiskDangerous)
	viewer := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeAction, UserID: alice}
	for _, c := range []struct {
		p          dispatch.Principal
		capability string
		args       string
		want       string
	}{
		{aliceRead, capBook, `{"slot":"mon"}`, "scope"},
		{viewer, capBook, `{"slot":"mon"}`, "permission"},
		{aliceAction, capBook, `{"slot":7}`, "invalid-input"},
	} {
		var a admitCounter
		if _, err := d.Invoke(a.with(context.Background()), c.p, c.capability, json.RawMessage(c.args)); outcomeOf(err) != c.want {
			t.Errorf("%+v %s: %v; want %s", c.p, c.args, err, c.want)
		}
		if a.n != 0 {
			t.Errorf("%+v %s: admitted %d times", c.p, c.args, a.n)
		}
	}
	// Held: the caller gets the pending result, and no admission.
	var held admitCounter
	if res, err := d.Invoke(held.with(context.Background()), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`)); err != nil || string(res) != string(pendingResult) || held.n != 0 {
		t.Fatalf("held call: %s %v, admitted %d times", res, err, held.n)
	}
	untouched(t, dk)
	// A call that runs is admitted once, and the run's context carries no
	// hook for the calls the provider makes.
	var ran admitCounter
	if _, err := d.Invoke(ran.with(context.Background()), aliceAction, capBook, json.RawMessage(`{"slot":"mon"}`)); err != nil || ran.n != 1 {
		t.Fatalf("call that runs: %v, admitted %d times", err, ran.n)
	}
	if _, i := dk.calls(); i != 1 {
		t.Fatalf("provider invoked %d times", i)
	}
	if _, err := d.Invoke(ran.ctx, aliceAction, capBook, json.RawMessage(`{"slot":"tue"}`)); err != nil || ran.n != 1 {
		t.Fatalf("nested call: %v, admitted %d times", err, ran.n)
	}
}

// TestAdmitErrorStopsTheCall: an admission that fails runs nothing, and
// the caller gets its error.
func TestAdmitErrorStopsTheCall(t *testing.T) {
	d, dk := newGate(t, deskPolicy())
	stop := errors.New("no room for another task")
	a := admitCounter{err: stop}
	if _, err := d.Invoke(a.with(context.Background()), aliceAction, capBook, json.RawMessage(`{"slot":"mon"}`)); !errors.Is(err, stop) || a.n != 1 {
		t.Fatalf("err %v, admitted %d times", err, a.n)
	}
	untouched(t, dk)
}
