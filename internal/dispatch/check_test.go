package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// checkPolicies are the policies TestCheckIsTheGatesAnswer sweeps: each
// makes a different argument-independent step refuse something.
func checkPolicies() map[string]dispatch.Policy {
	with := func(edit func(*dispatch.Policy)) dispatch.Policy {
		p := deskPolicy()
		edit(&p)
		return p
	}
	return map[string]dispatch.Policy{
		"desk":            deskPolicy(),
		"actions off":     with(func(p *dispatch.Policy) { p.ActionsOff = true }),
		"cancel disabled": with(func(p *dispatch.Policy) { p.DisabledCapabilities = []string{capCancel} }),
		"booking off":     with(func(p *dispatch.Policy) { p.Packs["booking"] = false }),
		"partner absent":  with(func(p *dispatch.Policy) { delete(p.Packs, "partner") }),
		"list blocked": with(func(p *dispatch.Policy) {
			p.Risk.Capabilities = map[string]registry.Risk{capList: registry.RiskBlocked}
		}),
		"booking dangerous": with(func(p *dispatch.Policy) {
			p.Risk.Packs = map[string]registry.Risk{"booking": registry.RiskDangerous}
		}),
	}
}

// checkArgs are arguments each capability's schema accepts.
func checkArgs(name string, n int) json.RawMessage {
	switch name {
	case capGet, capCancel:
		return json.RawMessage(`{"id":"b-1"}`)
	case capBook:
		return json.RawMessage(fmt.Sprintf(`{"slot":"slot-%d"}`, n))
	}
	return json.RawMessage(`{}`)
}

// TestCheckIsTheGatesAnswer: for every principal, capability and policy,
// Check returns exactly the refusal Invoke meets at the steps that do
// not depend on the arguments, and nil exactly when Invoke gets past
// them (Allowed agreeing).
func TestCheckIsTheGatesAnswer(t *testing.T) {
	principals := []dispatch.Principal{
		aliceAction, aliceRead, operator,
		{Role: "customer", Scope: dispatch.ScopeAction},
		{Role: "viewer", Scope: dispatch.ScopeRead, UserID: bob},
		{Role: "partner", Scope: dispatch.ScopeAction, UserID: bob},
		{Role: "stranger", Scope: dispatch.ScopeAdmin, UserID: bob},
		{Role: "customer", Scope: "superuser", UserID: alice},
		{Role: "operator", UserID: alice},
	}
	argumentIndependent := []dispatch.Step{dispatch.StepKillSwitch, dispatch.StepPack, dispatch.StepUserBinding, dispatch.StepScope, dispatch.StepPermission, dispatch.StepRisk}
	seen := map[dispatch.Step]int{}
	admitted := 0
	n := 0
	for name, policy := range checkPolicies() {
		d, _ := newGate(t, policy)
		for _, p := range principals {
			for _, e := range d.Registry().All() {
				n++
				what := fmt.Sprintf("%s: %+v calling %s", name, p, e.Name)
				want := d.Check(p, &e.Capability)
				_, err := d.Invoke(context.Background(), p, e.Name, checkArgs(e.Name, n))
				var got *dispatch.Refusal
				errors.As(err, &got)
				if d.Allowed(p, &e.Capability) != (want == nil) {
					t.Errorf("%s: Allowed = %v but Check = %v", what, !(want == nil), want)
				}
				if want != nil {
					seen[want.Step]++
					if want.Step == dispatch.StepPack || want.Step == dispatch.StepKillSwitch && strings.Contains(want.Reason, "this capability off") {
						// Invisible and un-callable: Invoke answers as to an
						// unknown name.
						if got != nil || !errors.Is(err, dispatch.ErrUnknownCapability) {
							t.Errorf("%s: Check = %+v, Invoke = %v, want the answer to an unknown name", what, want, err)
						}
						continue
					}
					if got == nil || *got != *want {
						t.Errorf("%s: Check = %+v, Invoke = %v", what, want, err)
					}
					continue
				}
				admitted++
				if got == nil {
					continue
				}
				// Past Check, Invoke may still refuse at risk for want of an
				// approver (a held call), or at ownership; never earlier.
				held := got.Step == dispatch.StepRisk && d.Risk(&e.Capability) != registry.RiskBlocked
				if slices.Contains(argumentIndependent, got.Step) && !held {
					t.Errorf("%s: Check admits, Invoke refuses at %s: %v", what, got.Step, got)
				}
			}
		}
	}
	// The sweep must reach every step Check answers, and admit some, or
	// it is not testing the gate.
	for _, s := range argumentIndependent {
		if seen[s] == 0 {
			t.Errorf("no combination is refused at %s", s)
		}
	}
	if admitted == 0 {
		t.Error("no combination is admitted")
	}
}

// TestCheckFollowsThePolicy: Check answers under the policy in force now,
// as calls are decided.
func TestCheckFollowsThePolicy(t *testing.T) {
	d, _ := newGate(t, deskPolicy())
	e, _ := d.Registry().Lookup(capBook)
	if r := d.Check(aliceAction, &e.Capability); r != nil {
		t.Fatalf("before the kill switch: %v", r)
	}
	off := deskPolicy()
	off.ActionsOff = true
	if err := d.SetPolicy(off); err != nil {
		t.Fatal(err)
	}
	r := d.Check(aliceAction, &e.Capability)
	if r == nil || r.Step != dispatch.StepKillSwitch || r.Capability != capBook {
		t.Fatalf("with actions off: %+v; want a refusal at kill_switch naming %s", r, capBook)
	}
	if err := d.SetPolicy(deskPolicy()); err != nil {
		t.Fatal(err)
	}
	if r := d.Check(aliceAction, &e.Capability); r != nil {
		t.Fatalf("after the switch was released: %v", r)
	}
}
