package dispatch_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// approver keeps what the gate holds, as the host's does, in memory.
type approver struct {
	mu   sync.Mutex
	held []dispatch.Held
	res  json.RawMessage
	err  error
}

func (a *approver) Hold(_ context.Context, h dispatch.Held) (dispatch.Holding, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return dispatch.Holding{}, a.err
	}
	a.held = append(a.held, h)
	id := ""
	if a.res != nil {
		id = "ap_1"
	}
	return dispatch.Holding{ApprovalID: id, Result: a.res}, nil
}

func (a *approver) taken() []dispatch.Held {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]dispatch.Held(nil), a.held...)
}

var pendingResult = json.RawMessage(`{"status":"pending_approval","approval_id":"ap_1"}`)

func riskyGate(t *testing.T, risk registry.Risk) (*dispatch.Dispatcher, *desk, *approver) {
	t.Helper()
	policy := deskPolicy()
	policy.Risk.Capabilities = map[string]registry.Risk{capCancel: risk, capList: risk}
	d, dk := newGate(t, policy)
	a := &approver{res: pendingResult}
	d.UseApprover(a)
	return d, dk, a
}

// TestHeldCallWaitsForAHuman: a call at either level that waits is held
// once, with its principal and arguments as sent, and the caller gets the
// pending result; nothing runs, not even the ownership check.
func TestHeldCallWaitsForAHuman(t *testing.T) {
	for _, risk := range []registry.Risk{registry.RiskReviewRequired, registry.RiskDangerous} {
		t.Run(string(risk), func(t *testing.T) {
			d, dk, a := riskyGate(t, risk)
			args := json.RawMessage(`{ "id": "b-1" }`)
			ctx := dispatch.WithOrigin(context.Background(), dispatch.Origin{Protocol: "mcp", RequestID: "7"})
			var report dispatch.HeldReport
			res, err := d.Invoke(dispatch.WithHeldReport(ctx, &report), aliceAction, capCancel, args)
			if err != nil || string(res) != string(pendingResult) {
				t.Fatalf("Invoke = %s, %v; want the pending result", res, err)
			}
			held := a.taken()
			if !report.Held || report.ApprovalID == "" {
				t.Fatalf("held report %+v; want the call held, with its approval", report)
			}
			if len(held) != 1 || held[0].Principal != aliceAction || held[0].Capability != capCancel ||
				string(held[0].Args) != string(args) || held[0].Risk != risk || held[0].Origin.RequestID != "7" {
				t.Fatalf("held %+v", held)
			}
			if resolved, invoked := dk.calls(); resolved+invoked != 0 || dk.cancelled("b-1") {
				t.Fatalf("a held call reached the plugin: resolve %d, invoke %d", resolved, invoked)
			}
		})
	}
}

// TestHeldOnlyAfterEveryOtherStep: a call the gate would refuse, or whose
// arguments are wrong, is answered as such and never held.
func TestHeldOnlyAfterEveryOtherStep(t *testing.T) {
	d, _, a := riskyGate(t, registry.RiskDangerous)
	viewer := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeAction, UserID: alice}
	for _, c := range []struct {
		p    dispatch.Principal
		args string
		want string
	}{
		{aliceRead, `{"id":"b-1"}`, "scope"},
		{viewer, `{"id":"b-1"}`, "permission"},
		{aliceAction, `{"id":7}`, "invalid-input"},
	} {
		if _, err := d.Invoke(context.Background(), c.p, capCancel, json.RawMessage(c.args)); outcomeOf(err) != c.want {
			t.Errorf("%+v %s: %v; want %s", c.p, c.args, err, c.want)
		}
	}
	if held := a.taken(); len(held) != 0 {
		t.Fatalf("held %d calls the gate refuses anyway", len(held))
	}
	// A token bound to nobody has no one to hold a read for.
	unbound := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead}
	if _, err := d.Invoke(context.Background(), unbound, capList, nil); outcomeOf(err) != "risk" {
		t.Errorf("an unbound read at dangerous: %v; want a refusal at risk", err)
	}
}

// TestGrantRunsExactlyTheApprovedCall: the grant of a call lets that
// call through the risk step, and only that call.
func TestGrantRunsExactlyTheApprovedCall(t *testing.T) {
	d, dk, a := riskyGate(t, registry.RiskDangerous)
	args := json.RawMessage(`{"id":"b-1"}`)
	g := dispatch.Grant{ApprovalID: "ap_1", Token: aliceAction.Token, UserID: alice, Capability: capCancel, ArgsSHA256: sha256.Sum256(args)}
	for name, c := range map[string]struct {
		g    dispatch.Grant
		args string
	}{
		"other arguments":  {g, `{"id":"b-2"}`},
		"same, respaced":   {g, `{ "id":"b-1"}`},
		"another user":     {func() dispatch.Grant { g := g; g.UserID = "bob"; return g }(), `{"id":"b-1"}`},
		"another token":    {func() dispatch.Grant { g := g; g.Token = "tokens-9"; return g }(), `{"id":"b-1"}`},
		"no approval id":   {func() dispatch.Grant { g := g; g.ApprovalID = ""; return g }(), `{"id":"b-1"}`},
		"another function": {func() dispatch.Grant { g := g; g.Capability = capBook; return g }(), `{"id":"b-1"}`},
	} {
		res, err := d.Invoke(dispatch.WithGrant(context.Background(), c.g), aliceAction, capCancel, json.RawMessage(c.args))
		if err != nil || string(res) != string(pendingResult) {
			t.Errorf("%s: %s, %v; want it held again", name, res, err)
		}
	}
	if dk.cancelled("b-1") || dk.cancelled("b-2") {
		t.Fatal("a grant for another call ran this one")
	}
	before := len(a.taken())
	if _, err := d.Invoke(dispatch.WithGrant(context.Background(), g), aliceAction, capCancel, args); err != nil {
		t.Fatalf("the granted call: %v", err)
	}
	if !dk.cancelled("b-1") || len(a.taken()) != before {
		t.Fatal("the granted call did not run, or was held again")
	}
	// The grant waives the risk step alone: the call is checked again.
	bob := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "bob"}
	gb := dispatch.Grant{ApprovalID: "ap_2", UserID: "bob", Capability: capCancel, ArgsSHA256: sha256.Sum256(json.RawMessage(`{"id":"b-2"}`))}
	if _, err := d.Invoke(dispatch.WithGrant(context.Background(), gb), bob, capCancel, json.RawMessage(`{"id":"b-2"}`)); outcomeOf(err) != "ownership" {
		t.Errorf("a granted call on another's booking: %v; want the ownership refusal", err)
	}
}

// TestHoldFailureRunsNothing: an approver that cannot store the call, or
// answers nothing, fails the call; it does not run it.
func TestHoldFailureRunsNothing(t *testing.T) {
	for name, a := range map[string]*approver{"error": {err: errors.New("database down")}, "empty answer": {}} {
		t.Run(name, func(t *testing.T) {
			policy := deskPolicy()
			policy.Risk.Capabilities = map[string]registry.Risk{capCancel: registry.RiskDangerous}
			d, dk := newGate(t, policy)
			d.UseApprover(a)
			var report dispatch.HeldReport
			ctx := dispatch.WithHeldReport(context.Background(), &report)
			if _, err := d.Invoke(ctx, aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`)); err == nil {
				t.Fatal("no error")
			}
			if dk.cancelled("b-1") {
				t.Fatal("the call ran")
			}
			if report.Held {
				t.Fatalf("held report %+v for a call that was not held", report)
			}
		})
	}
}

// checkingDesk is a desk that can decide ownership alone, as the SDK's
// plugins can.
type checkingDesk struct{ *desk }

func (d checkingDesk) CheckOwner(_ context.Context, r dispatch.Request) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.target(r.Args)
	if err != nil {
		return err
	}
	return r.Owned(b.Owner)
}

// TestOwnershipDecidedBeforeHolding: with a provider that can decide the
// ownership step alone, a call it refuses, or whose target is missing, is
// answered at once and never held; an admin is not asked; a provider that
// cannot tell leaves the step to the run.
func TestOwnershipDecidedBeforeHolding(t *testing.T) {
	policy := deskPolicy()
	policy.Risk.Capabilities = map[string]registry.Risk{capCancel: registry.RiskDangerous}
	dk := newDesk()
	d, err := dispatch.New(deskRegistry(t), policy, map[string]dispatch.Provider{"desk": checkingDesk{dk}})
	if err != nil {
		t.Fatal(err)
	}
	a := &approver{res: pendingResult}
	d.UseApprover(a)
	bob := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "bob"}
	for _, c := range []struct {
		p    dispatch.Principal
		id   string
		want string
	}{{bob, "b-1", "ownership"}, {aliceAction, "b-404", "not-found"}} {
		if _, err := d.Invoke(context.Background(), c.p, capCancel, json.RawMessage(`{"id":"`+c.id+`"}`)); outcomeOf(err) != c.want {
			t.Errorf("%s on %s: %v; want %s", c.p.UserID, c.id, err, c.want)
		}
	}
	if held := a.taken(); len(held) != 0 {
		t.Fatalf("held %d calls the ownership step refuses", len(held))
	}
	for _, p := range []dispatch.Principal{aliceAction, operator} {
		if res, err := d.Invoke(context.Background(), p, capCancel, json.RawMessage(`{"id":"b-1"}`)); err != nil || string(res) != string(pendingResult) {
			t.Errorf("%s's call: %s %v; want it held", p.Role, res, err)
		}
	}
	if _, invoked := dk.calls(); invoked != 0 {
		t.Fatalf("the ownership check ran the call %d times", invoked)
	}
}

// TestHeldAndGrantedCallsAreLinkedInTheTrail: the held call's record says
// it was held and names its request; the approved run names it too, and
// says it ran.
func TestHeldAndGrantedCallsAreLinkedInTheTrail(t *testing.T) {
	d, _, _ := riskyGate(t, registry.RiskDangerous)
	tr := &trail{}
	d.UseAuditor(tr, true)
	args := json.RawMessage(`{"id":"b-1"}`)
	if _, err := d.Invoke(context.Background(), aliceAction, capCancel, args); err != nil {
		t.Fatal(err)
	}
	g := dispatch.Grant{ApprovalID: "ap_1", Token: aliceAction.Token, UserID: alice, Capability: capCancel, ArgsSHA256: sha256.Sum256(args)}
	if _, err := d.Invoke(dispatch.WithGrant(context.Background(), g), aliceAction, capCancel, args); err != nil {
		t.Fatal(err)
	}
	recs := tr.take()
	if len(recs) != 2 || !recs[0].Held || recs[0].ApprovalID != "ap_1" || recs[1].Held || recs[1].ApprovalID != "ap_1" || recs[1].Err != nil {
		t.Fatalf("records %+v; want the held call, then its run, both naming ap_1", recs)
	}
}

// TestHeldCallCarriesItsSensitivePaths: the approver is told which
// arguments the capability marks sensitive, so that it shows none of them.
func TestHeldCallCarriesItsSensitivePaths(t *testing.T) {
	reg := registry.New([]string{"vault"})
	if err := reg.Add(registry.Capability{Name: "vault.reset", Description: "Reset a vault's password.", Kind: registry.Action, Pack: "vault",
		Plugin: "desk", Risk: registry.RiskDangerous,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"password":{"type":"string","x-capgate-sensitive":true}}}`)}); err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"vault": true}, Roles: map[string][]string{"customer": {"*"}}},
		map[string]dispatch.Provider{"desk": newDesk()})
	if err != nil {
		t.Fatal(err)
	}
	a := &approver{res: pendingResult}
	d.UseApprover(a)
	if _, err := d.Invoke(context.Background(), aliceAction, "vault.reset", json.RawMessage(`{"id":"v-1","password":"hunter2"}`)); err != nil {
		t.Fatal(err)
	}
	held := a.taken()
	if len(held) != 1 || len(held[0].Sensitive) != 1 || len(held[0].Sensitive[0]) != 1 || held[0].Sensitive[0][0] != "password" {
		t.Fatalf("held %+v; want the sensitive path password with it", held)
	}
}

// TestApproverRefusalIsARefusalAtRisk: an approver that will not hold one
// more call of this user refuses it at the risk step, saying why, rather
// than failing as the server would.
func TestApproverRefusalIsARefusalAtRisk(t *testing.T) {
	d, dk, a := riskyGate(t, registry.RiskDangerous)
	a.err = &dispatch.Refusal{Reason: "20 calls of yours already wait for approval, the most approvals.max_pending allows"}
	_, err := d.Invoke(context.Background(), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	var r *dispatch.Refusal
	if !errors.As(err, &r) || r.Step != dispatch.StepRisk || r.Capability != capCancel || !strings.Contains(r.Reason, "approvals.max_pending") {
		t.Fatalf("Invoke = %v; want a refusal at risk naming the cap", err)
	}
	if resolved, invoked := dk.calls(); resolved+invoked != 0 {
		t.Fatalf("a refused hold reached the plugin: %d %d", resolved, invoked)
	}
}
