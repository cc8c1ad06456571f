package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

// The gate matrix: every combination of the inputs the gate decides on,
// each checked against an oracle written from the rules in doc.go rather
// than from the code.

type packState string

const (
	packOn     packState = "on"
	packOff    packState = "off"    // present in the policy as false
	packAbsent packState = "absent" // not in the policy at all
)

// killState is the operator's switches.
type killState string

const (
	killNone       killState = "none"
	killActionsOff killState = "actions-off"  // the kill switch
	killDisabled   killState = "cap-disabled" // this capability is switched off
)

// riskState is the operator's risk levels.
type riskState string

const (
	riskDefault     riskState = "default"      // the plugin's level (safe)
	riskBlockedCap  riskState = "blocked"      // the capability is blocked
	riskBlockedPack riskState = "pack-blocked" // its pack is blocked, but the capability is set safe
	riskDangerous   riskState = "dangerous"    // the capability needs an approval
	riskReviewPack  riskState = "pack-review"  // its pack needs a review
)

// exhausted is a rate-limit counter with no call left in any bucket.
type exhausted struct{}

func (exhausted) Allow(context.Context, dispatch.LimitKey, dispatch.Rate) (bool, time.Duration, error) {
	return false, 3 * time.Second, nil
}

type grant string

const (
	grantExact    grant = "exact"     // the role lists the permission itself
	grantPrefix   grant = "prefix"    // the role holds "booking.*"
	grantStar     grant = "star"      // the role holds "*"
	grantNearMiss grant = "near-miss" // the role holds only look-alikes
	grantNoRole   grant = "no-role"   // the role is not in the policy
)

func (g grant) held() bool { return g == grantExact || g == grantPrefix || g == grantStar }

// matrixRoles are the roles behind each grant; the near-miss role holds
// permissions that resemble the booking ones without being them.
var matrixRoles = map[string][]string{
	string(grantExact):    {"booking.read", "booking.write", "booking.cancel"},
	string(grantPrefix):   {"booking.*"},
	string(grantStar):     {"*"},
	string(grantNearMiss): {"booking", "bookingx.*", "booking.read.all", "booking.re*", "status.*"},
}

type target string

const (
	targetNone    target = "-"       // the capability names no target
	targetMine    target = "alice's" // b-1, owned by the user the token would act for
	targetOthers  target = "bob's"   // b-2
	targetMissing target = "missing" // no such booking
)

var targetIDs = map[target]string{targetMine: "b-1", targetOthers: "b-2", targetMissing: "b-404"}

// shape is a capability as doc.go sees it, restated here rather than read
// back from the registry, with arguments the schema accepts and rejects.
type shape struct {
	name    string
	action  bool
	guarded bool
	valid   func(id string) string
	invalid string
}

var shapes = []shape{
	{capList, false, false, func(string) string { return `{"limit":5}` }, `{"limit":"five"}`},
	{capGet, false, true, func(id string) string { return fmt.Sprintf(`{"id":%q}`, id) }, `{"id":1}`},
	{capBook, true, false, func(string) string { return `{"slot":"fri-17"}` }, `{}`},
	{capCancel, true, true, func(id string) string { return fmt.Sprintf(`{"id":%q}`, id) }, `{"id":["b-1"]}`},
}

type combo struct {
	kill      killState
	risk      riskState
	auditDown bool // the audit trail cannot be written
	limited   bool // the token has no call left to this capability
	pack      packState
	scope     dispatch.Scope
	bound     bool
	grant     grant
	shape     shape
	target    target
	argsValid bool
	// asMissing: the operator has another user's target answer as a
	// missing one (Policy.OwnershipAsMissing).
	asMissing bool
}

func (c combo) String() string {
	b := "unbound"
	if c.bound {
		b = "bound"
	}
	a := "invalid-args"
	if c.argsValid {
		a = "valid-args"
	}
	l := "room"
	if c.limited {
		l = "limited"
	}
	au := "audit-up"
	if c.auditDown {
		au = "audit-down"
	}
	own := ""
	if c.asMissing {
		own = "/ownership-as-missing"
	}
	return fmt.Sprintf("kill=%s/pack=%s/scope=%q/%s/perm=%s/risk=%s/%s/%s/%s/target=%s/%s%s", c.kill, c.pack, c.scope, b, c.grant, c.risk, au, l, c.shape.name, c.target, a, own)
}

// verdict is what the gate should do with a combination.
type verdict struct {
	// outcome is what the caller learns: a dispatch.Step, "unknown" (the
	// answer to a name no plugin provides), "invalid-input", "not-found"
	// or "ok"; recorded is what the audit trail keeps, when it differs.
	outcome, recorded string
	resolve           bool // the provider is asked who owns the target
	invoke            bool // the provider runs the capability
	// held: refused at step risk after the arguments, for want of a
	// human's approval; tools/list still shows the capability.
	held bool
}

// step is what the audit trail records of the verdict.
func (v verdict) step() string {
	if v.recorded != "" {
		return v.recorded
	}
	return v.outcome
}

// argumentIndependent are the outcomes decided before arguments matter:
// exactly what tools/list must agree with.
var argumentIndependent = []string{
	string(dispatch.StepKillSwitch), string(dispatch.StepPack), string(dispatch.StepUserBinding),
	string(dispatch.StepScope), string(dispatch.StepPermission), string(dispatch.StepRisk),
}

// oracle applies the rules of doc.go, in their order, to a combination.
// A refusal before the arguments still costs the token a call: with no
// call left, the caller learns that instead.
func oracle(c combo) verdict {
	v := gateOracle(c)
	hidden := v.outcome == "kill_switch" && c.kill == killDisabled || v.outcome == "pack"
	switch {
	case hidden && c.limited:
		return verdict{outcome: "rate_limit"}
	case hidden: // invisible and un-callable: answered as an unknown name
		return verdict{outcome: "unknown", recorded: v.outcome}
	case c.limited && slices.Contains(argumentIndependent, v.outcome) && !v.held:
		return verdict{outcome: "rate_limit"}
	}
	return v
}

func gateOracle(c combo) verdict {
	knownScope := c.scope == dispatch.ScopeRead || c.scope == dispatch.ScopeAction || c.scope == dispatch.ScopeAdmin
	switch {
	case c.kill == killDisabled, c.kill == killActionsOff && c.shape.action: // 1. the operator's switches
		return verdict{outcome: "kill_switch"}
	case c.pack != packOn: // 2. the pack is enabled
		return verdict{outcome: "pack"}
	case c.shape.action && !c.bound: // 3. an action needs a bound user
		return verdict{outcome: "user_binding"}
	case !knownScope, c.shape.action && c.scope == dispatch.ScopeRead: // 4. read tokens call reads only
		return verdict{outcome: "scope"}
	case !c.grant.held(): // 5. the role holds the permission
		return verdict{outcome: "permission"}
	case c.risk == riskBlockedCap: // 6. a blocked capability never runs (a capability's own level wins over its pack's)
		return verdict{outcome: "risk"}
	case c.auditDown && c.shape.action: // 6. actions need the audit trail
		return verdict{outcome: "audit"}
	case c.limited: // 7. the rate limit, before the arguments are read
		return verdict{outcome: "rate_limit"}
	case !c.argsValid: // arguments, before any plugin sees them
		return verdict{outcome: "invalid-input"}
	case c.risk == riskDangerous, c.risk == riskReviewPack: // held for a human, whom this gate cannot ask
		return verdict{outcome: "risk", held: true}
	}
	if c.shape.guarded && c.scope != dispatch.ScopeAdmin { // 8. ownership; admins bypass
		switch {
		case c.target == targetMissing:
			return verdict{outcome: "not-found", resolve: true}
		case (!c.bound || c.target != targetMine) && c.asMissing: // answered as a missing target
			return verdict{outcome: "not-found", recorded: "ownership", resolve: true}
		case !c.bound || c.target != targetMine:
			return verdict{outcome: "ownership", resolve: true}
		}
		return verdict{outcome: "ok", resolve: true, invoke: true}
	}
	if c.target == targetMissing { // an admin reaches the plugin, which has no such booking
		return verdict{outcome: "not-found", invoke: true}
	}
	return verdict{outcome: "ok", invoke: true}
}

// outcomeOf names what Invoke did in the oracle's terms.
func outcomeOf(err error) string {
	var r *dispatch.Refusal
	var te *dispatch.ToolError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, dispatch.ErrUnknownCapability) && !errors.As(err, &r):
		return "unknown"
	case errors.As(err, &r):
		return string(r.Step)
	case errors.As(err, &te) && te.Code == dispatch.InvalidInput:
		return "invalid-input"
	case errors.As(err, &te) && te.Code == dispatch.NotFound:
		return "not-found"
	}
	return "unexpected: " + err.Error()
}

// combos generates every combination. Capabilities that name no target
// are not multiplied by targets, and the risk levels only the switches
// and steps before them.
func combos() []combo {
	var out []combo
	for _, kill := range []killState{killNone, killActionsOff, killDisabled} {
		for _, auditDown := range []bool{false, true} {
			for _, limited := range []bool{false, true} {
				risks := []riskState{riskDefault, riskDangerous}
				if kill != killActionsOff && !auditDown && !limited {
					risks = append(risks, riskReviewPack)
					risks = append(risks, riskBlockedCap, riskBlockedPack)
				}
				for _, risk := range risks {
					for _, c := range gateCombos() {
						c.kill, c.auditDown, c.limited, c.risk = kill, auditDown, limited, risk
						out = append(out, c)
						if kill == killNone && !auditDown && !limited && risk == riskDefault && c.shape.guarded {
							c.asMissing = true
							out = append(out, c)
						}
					}
				}
			}
		}
	}
	return out
}

// gateCombos are the combinations of the steps after the switches.
func gateCombos() []combo {
	var out []combo
	for _, pack := range []packState{packOn, packOff, packAbsent} {
		for _, scope := range []dispatch.Scope{dispatch.ScopeRead, dispatch.ScopeAction, dispatch.ScopeAdmin, "", "superuser"} {
			for _, bound := range []bool{true, false} {
				for _, g := range []grant{grantExact, grantPrefix, grantStar, grantNearMiss, grantNoRole} {
					for _, s := range shapes {
						targets := []target{targetNone}
						if s.guarded {
							targets = []target{targetMine, targetOthers, targetMissing}
						}
						for _, tg := range targets {
							for _, valid := range []bool{true, false} {
								out = append(out, combo{pack: pack, scope: scope, bound: bound, grant: g, shape: s, target: tg, argsValid: valid})
							}
						}
					}
				}
			}
		}
	}
	return out
}

func TestGateMatrix(t *testing.T) {
	reg := deskRegistry(t)
	all := combos()
	seen := map[string]int{}
	for _, c := range all {
		t.Run(c.String(), func(t *testing.T) {
			policy := dispatch.Policy{
				Packs: map[string]bool{"status": true}, Roles: matrixRoles,
				ActionsOff:         c.kill == killActionsOff,
				Limits:             dispatch.Limits{Default: dispatch.Rate{Count: 1000, Per: time.Second}},
				OwnershipAsMissing: c.asMissing,
			}
			if c.kill == killDisabled {
				policy.DisabledCapabilities = []string{c.shape.name}
			}
			switch c.risk {
			case riskBlockedCap:
				policy.Risk.Capabilities = map[string]registry.Risk{c.shape.name: registry.RiskBlocked}
			case riskBlockedPack:
				policy.Risk.Packs = map[string]registry.Risk{"booking": registry.RiskBlocked}
				policy.Risk.Capabilities = map[string]registry.Risk{c.shape.name: registry.RiskSafe}
			case riskDangerous:
				policy.Risk.Capabilities = map[string]registry.Risk{c.shape.name: registry.RiskDangerous}
			case riskReviewPack:
				policy.Risk.Packs = map[string]registry.Risk{"booking": registry.RiskReviewRequired}
			}
			switch c.pack {
			case packOn:
				policy.Packs["booking"] = true
			case packOff:
				policy.Packs["booking"] = false
			}
			dk := newDesk()
			d, err := dispatch.New(reg, policy, map[string]dispatch.Provider{"desk": dk})
			if err != nil {
				t.Fatal(err)
			}
			if c.limited {
				d.UseLimiter(exhausted{})
			} else {
				d.UseLimiter(ratelimit.NewMemory())
			}
			a := &trail{}
			a.down.Store(c.auditDown)
			d.UseAuditor(a, true)
			p := dispatch.Principal{Role: string(c.grant), Scope: c.scope, Token: "t1"}
			if c.bound {
				p.UserID = alice
			}
			args := c.shape.invalid
			if c.argsValid {
				args = c.shape.valid(targetIDs[c.target])
			}

			want := oracle(c)
			seen[want.outcome]++
			if want.recorded != "" {
				seen[want.recorded]++
			}
			_, err = d.Invoke(context.Background(), p, c.shape.name, json.RawMessage(args))
			if got := outcomeOf(err); got != want.outcome {
				t.Fatalf("outcome %q (%v), want %q", got, err, want.outcome)
			}
			recs := a.take()
			resolved, invoked := dk.calls()
			refused := slices.Contains(append(slices.Clone(argumentIndependent), "audit", "rate_limit", "ownership"), want.step())
			if len(recs) != 1 || (recs[0].Refusal != nil) != refused {
				t.Fatalf("audit records %+v, want one, refused = %v", recs, refused)
			}
			if refused && string(recs[0].Refusal.Step) != want.step() {
				t.Errorf("audit records step %q, want %q: the trail keeps the real step", recs[0].Refusal.Step, want.step())
			}
			if want.outcome == "unknown" {
				// Exactly what a name no plugin provides answers.
				_, unknownErr := d.Invoke(context.Background(), p, "booking.nonexistent", json.RawMessage(args))
				a.take()
				if err.Error() != strings.Replace(unknownErr.Error(), "booking.nonexistent", c.shape.name, 1) {
					t.Errorf("hidden capability answers %q; an unknown name answers %q", err, unknownErr)
				}
			}
			if want.recorded == "ownership" {
				_, missErr := d.Invoke(context.Background(), p, c.shape.name, json.RawMessage(c.shape.valid(targetIDs[targetMissing])))
				a.take()
				if err.Error() != missErr.Error() {
					t.Errorf("another user's target answers %q; a missing one %q", err, missErr)
				}
			}
			if (resolved > 0) != want.resolve || resolved > 1 {
				t.Errorf("ResolveOwner ran %d times, want asked=%v", resolved, want.resolve)
			}
			if (invoked > 0) != want.invoke || invoked > 1 {
				t.Errorf("Invoke ran %d times, want run=%v", invoked, want.invoke)
			}
			if want.invoke && dk.lastP != p {
				t.Errorf("provider saw principal %+v, want %+v", dk.lastP, p)
			}

			// tools/list must show exactly what tools/call admits before
			// the arguments matter: Allowed and Visible agree with the
			// oracle and with what Invoke just did.
			e, _ := reg.Lookup(c.shape.name)
			admitted := !slices.Contains(append(slices.Clone(argumentIndependent), "unknown"), want.outcome) && !(c.limited && slices.Contains(argumentIndependent, gateOracle(c).outcome)) || want.held
			var r *dispatch.Refusal
			invokeAdmitted := !errors.Is(err, dispatch.ErrUnknownCapability) && (!errors.As(err, &r) || !slices.Contains(argumentIndependent, string(r.Step))) || want.held
			if c.limited && want.outcome == "rate_limit" {
				// The limit hides which step came first; tools/list knows.
				invokeAdmitted = admitted
			}
			if allowed := d.Allowed(p, &e.Capability); allowed != admitted || allowed != invokeAdmitted {
				t.Errorf("Allowed = %v; oracle admits = %v, Invoke admitted = %v", allowed, admitted, invokeAdmitted)
			}
			i := slices.IndexFunc(d.Visible(p), func(l dispatch.Listed) bool { return l.Entry == e })
			if visible := i >= 0; visible != admitted {
				t.Errorf("listed by Visible = %v, want %v", visible, admitted)
			}
			wantRisk := map[riskState]registry.Risk{riskDangerous: registry.RiskDangerous, riskReviewPack: registry.RiskReviewRequired}[c.risk]
			if i >= 0 && d.Visible(p)[i].Risk != wantRisk.OrSafe() {
				t.Errorf("listed at risk %q, want %q", d.Visible(p)[i].Risk, wantRisk.OrSafe())
			}
		})
	}
	// The matrix must reach every outcome, or it is not testing the gate.
	for _, o := range append(slices.Clone(argumentIndependent), "audit", "rate_limit", "ownership", "invalid-input", "not-found", "ok", "unknown") {
		if seen[o] == 0 {
			t.Errorf("no combination ends in %q", o)
		}
	}
	t.Logf("%d combinations; outcomes %v", len(all), seen)
}
