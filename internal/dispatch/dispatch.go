package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/registry"
)

// Scope is what a token may do, independent of its role.
type Scope string

const (
	ScopeRead   Scope = "read"
	ScopeAction Scope = "action"
	ScopeAdmin  Scope = "admin"
)

// Valid reports whether s is one of the known scopes.
func (s Scope) Valid() bool { return s == ScopeRead || s == ScopeAction || s == ScopeAdmin }

// Principal is an authenticated caller.
type Principal struct {
	Role  string
	Scope Scope
	// UserID is the user the token acts for; empty when unbound.
	UserID string
	// Token names the credential the call came with (its label), never
	// the secret: rate limits count per token. Empty counts as one
	// anonymous token.
	Token string
}

// Step names a stage of the gate.
type Step string

const (
	StepKillSwitch  Step = "kill_switch"
	StepPack        Step = "pack"
	StepUserBinding Step = "user_binding"
	StepScope       Step = "scope"
	StepPermission  Step = "permission"
	StepRisk        Step = "risk"
	StepRateLimit   Step = "rate_limit"
	StepOwnership   Step = "ownership"
)

// Refusal is the gate saying no. Reason is meant for a human reading the
// agent's transcript; it names what is missing, never a secret.
type Refusal struct {
	Step       Step
	Capability string
	Reason     string
	// RetryAfter, at StepRateLimit, is how long until the same call would
	// be admitted; zero otherwise.
	RetryAfter time.Duration
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s refused at %s: %s", r.Capability, r.Step, r.Reason)
}

// ToolErrorCode classifies failures the caller can act on. The values are
// stored (the outcomes idempotency keys replay), so they never change.
type ToolErrorCode uint8

const (
	// InvalidInput: the arguments are wrong; the message says how.
	InvalidInput ToolErrorCode = 1
	// NotFound: the target does not exist.
	NotFound ToolErrorCode = 2
	// Conflict: the call is valid but the state forbids it (a taken slot).
	Conflict ToolErrorCode = 3
	// Unavailable: the capability could not run now and nothing ran (its
	// plugin is restarting, or at its limit of calls in flight); the same
	// call may succeed later.
	Unavailable ToolErrorCode = 4
)

// String is the code's name, as the audit trail records it.
func (c ToolErrorCode) String() string {
	switch c {
	case InvalidInput:
		return "invalid_input"
	case NotFound:
		return "not_found"
	case Conflict:
		return "conflict"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("code_%d", uint8(c))
}

// ToolError is a failure reported to the caller as a result, not as a
// protocol error: the agent can read it and try again differently.
type ToolError struct {
	Code    ToolErrorCode
	Message string
}

func (e *ToolError) Error() string { return e.Message }

// ErrUnknownCapability is returned for a name no plugin provides.
var ErrUnknownCapability = errors.New("unknown capability")

// Request is a call the gate has admitted, as a Provider receives it.
type Request struct {
	Principal  Principal
	Capability string
	// Args are the validated arguments, always a JSON object.
	Args json.RawMessage
	// CheckOwner is the ownership step, which only the providing plugin
	// can decide: the target the arguments name must belong to
	// Principal.UserID. The provider refuses otherwise with a *Refusal at
	// StepOwnership and runs nothing; a target that does not exist is its
	// NotFound.
	CheckOwner bool
	// CallID is the audit ID the gate gave this call; empty when no
	// auditor is in use. The nested calls a provider makes while it runs
	// name it as their Origin.ParentID.
	CallID string
	// Origin is where the call came from (WithOrigin): the nested calls a
	// provider makes carry it, with CallID as their parent. The gate reads
	// it from the context once, for its record and the provider alike.
	Origin Origin
	// Input, when set, is what the provider may ask the caller's client
	// and the client's answers to the round before; the provider answers
	// *InputRequired to ask. Nil when the client can be asked nothing.
	Input *InputRound
}

// Owned is the ownership step for a provider that knows the owner of the
// target: nil when r does not check ownership or owner is the caller's
// user, the refusal otherwise. A target without an owner belongs to no one.
func (r Request) Owned(owner string) error {
	if !r.CheckOwner || (owner != "" && owner == r.Principal.UserID) {
		return nil
	}
	return &Refusal{Step: StepOwnership, Capability: r.Capability, Reason: OwnershipReason}
}

// Provider runs capabilities; the plugin host implements it per plugin.
type Provider interface {
	// Invoke runs the call in one round trip, its ownership step included.
	// A *ToolError, or a *Refusal at StepOwnership, is returned as is.
	Invoke(ctx context.Context, r Request) (json.RawMessage, error)
}

// Policy is the operator's part of the decision: which packs are on and
// what each role may do.
type Policy struct {
	// Packs maps a pack name to enabled. Absent means disabled.
	Packs map[string]bool
	// Roles maps a role to the permissions it holds. A permission "*" holds
	// every permission; "booking.*" holds every permission starting with
	// "booking.".
	Roles map[string][]string
	// ActionsOff is the kill switch: every action is refused at
	// StepKillSwitch while reads carry on.
	ActionsOff bool
	// DisabledCapabilities are refused at StepKillSwitch and listed to no
	// one.
	DisabledCapabilities []string
	// Limits are the rate limits; the zero value limits nothing.
	Limits Limits
	// Risk overrides the risk levels plugins declare.
	Risk RiskPolicy
	// OwnershipAsMissing makes a call on another user's target answer
	// exactly as one on a target that does not exist (a NotFound tool
	// error with one message for both), for deployments that would rather
	// not confirm that an id exists. The audit trail keeps the real step.
	OwnershipAsMissing bool
}

// RiskPolicy is the operator's say over risk levels: a level set for a
// capability wins over one set for its pack, which wins over the level
// its plugin declares. Names that match nothing registered are kept, so a
// capability that arrives later takes its level.
type RiskPolicy struct {
	Capabilities map[string]registry.Risk
	Packs        map[string]registry.Risk
}

func (r RiskPolicy) validate() error {
	for _, m := range []struct {
		what   string
		levels map[string]registry.Risk
	}{{"capability", r.Capabilities}, {"pack", r.Packs}} {
		for name, level := range m.levels {
			if level == "" || !level.Valid() {
				return fmt.Errorf("risk of %s %q: %q is not one of %s", m.what, name, level, registry.RiskNames())
			}
		}
	}
	return nil
}

// Dispatcher is the gate. It is safe for concurrent use.
type Dispatcher struct {
	reg       *registry.Registry
	providers map[string]Provider
	// policy is swapped whole by SetPolicy; each call loads it once, so it
	// is decided under one policy from its first step to its last.
	policy  atomic.Pointer[compiledPolicy]
	limiter Limiter      // nil: Limits are not enforced
	idem    *Idempotency // nil: keys are not honoured
	// auditor records every decision; nil records none. auditRequired
	// refuses actions while it is not healthy.
	auditor       Auditor
	auditRequired bool
	// approver holds the calls that wait for a human; nil refuses them.
	approver Approver
	// confirmer seals the questions put to a caller's user; nil asks none.
	confirmer Confirmer
	inputs    InputSealer
	// observer counts every decision; nil counts none.
	observer Observer
}

// compiledPolicy is a Policy in the form the steps read.
type compiledPolicy struct {
	packs      map[string]bool
	roles      map[string]permSet
	actionsOff bool
	disabled   map[string]bool
	limits     Limits
	risk       RiskPolicy
	asMissing  bool
}

// riskOf is c's level under the policy.
func (pol *compiledPolicy) riskOf(c *registry.Capability) registry.Risk {
	if r, ok := pol.risk.Capabilities[c.Name]; ok {
		return r
	}
	if r, ok := pol.risk.Packs[c.Pack]; ok {
		return r
	}
	return c.Risk.OrSafe()
}

type permSet struct {
	all      bool
	exact    map[string]bool
	prefixes []string
}

func (s permSet) holds(perm string) bool {
	if s.all || s.exact[perm] {
		return true
	}
	for _, p := range s.prefixes {
		if strings.HasPrefix(perm, p) {
			return true
		}
	}
	return false
}

// New builds a dispatcher over reg. providers maps a plugin name (as in
// Capability.Plugin) to the provider that runs its capabilities; every
// registered capability must have one.
func New(reg *registry.Registry, policy Policy, providers map[string]Provider) (*Dispatcher, error) {
	d := &Dispatcher{reg: reg, providers: maps.Clone(providers)}
	for _, e := range reg.All() {
		if providers[e.Plugin] == nil {
			return nil, fmt.Errorf("capability %q: no provider for plugin %q", e.Name, e.Plugin)
		}
	}
	if err := checkResourceProviders(reg, providers); err != nil {
		return nil, err
	}
	if err := d.SetPolicy(policy); err != nil {
		return nil, err
	}
	return d, nil
}

// SetPolicy replaces the policy at once: calls that began under the old
// one finish under it, and every later call is decided under the new one,
// never a mix. An invalid policy changes nothing.
func (d *Dispatcher) SetPolicy(policy Policy) error {
	if err := policy.Limits.validate(); err != nil {
		return err
	}
	if err := policy.Risk.validate(); err != nil {
		return err
	}
	// Copy everything the caller passed in: the gate is shared by concurrent
	// requests and must not change under them if the caller's maps do.
	c := &compiledPolicy{
		packs: maps.Clone(policy.Packs), roles: map[string]permSet{}, actionsOff: policy.ActionsOff,
		disabled: map[string]bool{}, limits: policy.Limits.clone(), asMissing: policy.OwnershipAsMissing,
		risk: RiskPolicy{Capabilities: maps.Clone(policy.Risk.Capabilities), Packs: maps.Clone(policy.Risk.Packs)},
	}
	for role, perms := range policy.Roles {
		s := permSet{exact: map[string]bool{}}
		for _, p := range perms {
			switch {
			case p == "*":
				s.all = true
			case strings.HasSuffix(p, ".*"):
				s.prefixes = append(s.prefixes, strings.TrimSuffix(p, "*"))
			default:
				s.exact[p] = true
			}
		}
		c.roles[role] = s
	}
	for _, name := range policy.DisabledCapabilities {
		c.disabled[name] = true
	}
	d.policy.Store(c)
	return nil
}

// UseLimiter makes the gate enforce the policy's Limits with l. Call it
// before serving.
func (d *Dispatcher) UseLimiter(l Limiter) { d.limiter = l }

// The validator's explanation may quote the offending value, which the
// caller chose and may have made huge, before the limit it broke ("maxLength:
// "…" contains 300000 Unicode code points, more than 500"). The agent reads
// each quoted value cut to maxQuoteBytes, and the whole at most
// maxReasonBytes.
const (
	maxQuoteBytes  = 64
	maxReasonBytes = 512
)

// shorten cuts the quoted values in msg, then msg itself, at character
// boundaries.
func shorten(msg string) string {
	if len(msg) <= maxQuoteBytes {
		return msg
	}
	var b strings.Builder
	for i := 0; i < len(msg); {
		q := strings.IndexByte(msg[i:], '"')
		if q < 0 {
			b.WriteString(msg[i:])
			break
		}
		b.WriteString(msg[i : i+q+1])
		start := i + q + 1
		end := start
		for end < len(msg) && msg[end] != '"' {
			if msg[end] == '\\' {
				end++
			}
			end++
		}
		end = min(end, len(msg))
		if end-start > maxQuoteBytes {
			b.WriteString(cutAt(msg[start:], maxQuoteBytes))
			b.WriteString("…")
		} else {
			b.WriteString(msg[start:end])
		}
		if end < len(msg) {
			b.WriteByte('"')
		}
		i = end + 1
	}
	out := b.String()
	if len(out) > maxReasonBytes {
		out = cutAt(out, maxReasonBytes) + "… (cut)"
	}
	return out
}

// cutAt is the longest prefix of s of at most n bytes that ends on a
// character boundary.
func cutAt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Registry returns the registry the dispatcher gates.
func (d *Dispatcher) Registry() *registry.Registry { return d.reg }

// check runs the steps that do not depend on the arguments, under pol.
func check(pol *compiledPolicy, p Principal, c *registry.Capability) *Refusal {
	if pol.disabled[c.Name] {
		return &Refusal{Step: StepKillSwitch, Capability: c.Name, Reason: "the operator has switched this capability off"}
	}
	if pol.actionsOff && c.Kind == registry.Action {
		return &Refusal{Step: StepKillSwitch, Capability: c.Name, Reason: "the operator has switched every action off; reads still work"}
	}
	if !pol.packs[c.Pack] {
		return &Refusal{Step: StepPack, Capability: c.Name, Reason: fmt.Sprintf("pack %q is not enabled on this server", c.Pack)}
	}
	if c.Kind == registry.Action && p.UserID == "" {
		return &Refusal{Step: StepUserBinding, Capability: c.Name, Reason: "an action needs a token bound to a user; this token acts for nobody"}
	}
	if !p.Scope.Valid() {
		// Fail closed: a principal built without a known scope calls nothing.
		return &Refusal{Step: StepScope, Capability: c.Name, Reason: fmt.Sprintf("the token's scope %q is not one of read, action, admin", p.Scope)}
	}
	if c.Kind == registry.Action && p.Scope == ScopeRead {
		return &Refusal{Step: StepScope, Capability: c.Name, Reason: "this is an action and the token's scope is \"read\"; it needs scope \"action\""}
	}
	if c.Permission != "" && !pol.roles[p.Role].holds(c.Permission) {
		return &Refusal{Step: StepPermission, Capability: c.Name, Reason: fmt.Sprintf("role %q does not hold permission %q", p.Role, c.Permission)}
	}
	// After permission, so that only a caller who may call it learns that
	// the capability is blocked.
	if pol.riskOf(c) == registry.RiskBlocked {
		return &Refusal{Step: StepRisk, Capability: c.Name, Reason: "this capability is blocked: no call may run it on this server"}
	}
	return nil
}

// Allowed reports whether every argument-independent step admits p to the
// capability: exactly the capabilities a tools/list should show.
func (d *Dispatcher) Allowed(p Principal, c *registry.Capability) bool {
	return check(d.policy.Load(), p, c) == nil
}

// Check runs the steps that do not depend on the arguments (kill switch,
// pack, user binding, scope, permission, and risk for a blocked
// capability) for p and c under the current policy, and returns the
// refusal Invoke would meet first among them, or nil when every one
// admits p. It is the gate's own code, so tools that explain a token's
// reach (the admin API, capgate capabilities) cannot drift from it. Nil
// does not promise a call runs: the audit, rate-limit and ownership steps
// depend on the moment and the arguments, and a review_required or
// dangerous call is then held for a human.
func (d *Dispatcher) Check(p Principal, c *registry.Capability) *Refusal {
	return check(d.policy.Load(), p, c)
}

// Listed is a capability as a listing shows it.
type Listed struct {
	*registry.Entry
	// Risk is the level the policy gives it: never RiskBlocked, which is
	// listed to no one.
	Risk registry.Risk
}

// Visible returns the capabilities p may call, in name order, each with
// its risk, all under one policy. Rate limits do not hide anything: a
// capability over its limit now is callable later.
func (d *Dispatcher) Visible(p Principal) []Listed {
	pol := d.policy.Load()
	all := d.reg.All()
	out := make([]Listed, 0, len(all))
	for _, e := range all {
		if check(pol, p, &e.Capability) == nil {
			out = append(out, Listed{Entry: e, Risk: pol.riskOf(&e.Capability)})
		}
	}
	return out
}

// Holds reports whether p's role holds perm under the current policy,
// for the host's own checks outside a call (who may approve one).
func (d *Dispatcher) Holds(p Principal, perm string) bool {
	return d.policy.Load().roles[p.Role].holds(perm)
}

// Risk is the level the current policy gives c.
func (d *Dispatcher) Risk(c *registry.Capability) registry.Risk {
	return d.policy.Load().riskOf(c)
}

// Invoke is the gate: it runs every step, validates the arguments, and only
// then calls the providing plugin. With an auditor (UseAuditor) the
// decision is recorded, and an internal failure comes back as an
// *InternalError naming its record.
func (d *Dispatcher) Invoke(ctx context.Context, p Principal, name string, args json.RawMessage) (json.RawMessage, error) {
	if d.auditor != nil {
		return d.audited(ctx, p, name, args)
	}
	if d.observer != nil {
		return d.observed(ctx, p, name, args)
	}
	return d.invoke(ctx, p, name, args, &call{origin: OriginOf(ctx)})
}

// call is what the gate learns of one call on its way, for its audit
// record.
type call struct {
	id         string          // the auditor's name for it; empty without one
	entry      *registry.Entry // what it called; nil when no plugin provides it
	origin     Origin          // where it came from (OriginOf)
	approvalID string          // the held call's request, or the approved one's
	held       bool            // held for a human: nothing ran
	confirmID  string          // the question asked of its user, or answered
	asked      bool            // its user was asked to confirm it: nothing ran
	confirmed  bool            // ran on its user's yes
	// inputID names the round it answers or asks; inputAsked says it
	// asked its caller's client (nothing finished); inputConfirmed is
	// the question its user said yes to in an earlier round.
	inputID        string
	inputAsked     bool
	inputConfirmed string
	// pending: its record was given to Auditor.Admit before it ran.
	pending bool
}

// invoke is the gate for one call.
func (d *Dispatcher) invoke(ctx context.Context, p Principal, name string, args json.RawMessage, c *call) (json.RawMessage, error) {
	pol := d.policy.Load()
	e, ok := d.reg.Lookup(name)
	if !ok {
		return nil, d.unseen(ctx, pol, p, name, nil)
	}
	c.entry = e
	if r := check(pol, p, &e.Capability); r != nil {
		return nil, d.refusedAt(ctx, pol, p, e, r)
	}
	if r := d.auditDown(e); r != nil {
		return nil, r
	}
	if r, err := d.limit(ctx, pol, p, e.Name); r != nil || err != nil {
		if err != nil {
			return nil, err
		}
		return nil, r
	}
	if registry.NoArgs(args) {
		// Providers always see an object, never an absent body.
		args = json.RawMessage("{}")
	}
	if err := e.ValidateArgs(args); err != nil {
		return nil, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("invalid arguments for %s: %s", name, shorten(err.Error()))}
	}
	round, err := d.inputRound(ctx, e, p, args, c)
	if err != nil {
		return nil, err
	}
	if res, err := d.hold(ctx, pol, e, p, args, c); res != nil || err != nil {
		return res, err
	}
	if d.auditor != nil && e.Kind == registry.Action {
		if err := d.keepAdmission(ctx, p, e, args, c); err != nil {
			return nil, err
		}
	}
	ctx, err = admitted(ctx)
	if err != nil {
		return nil, err
	}
	req := Request{Principal: p, Capability: e.Name, Args: args, CallID: c.id, Origin: c.origin, Input: round}
	var res json.RawMessage
	if key := idempotencyKeyOf(ctx); key != "" && e.Kind == registry.Action && d.idem != nil {
		res, err = d.idempotent(ctx, e, req, key)
	} else {
		res, err = d.run(ctx, e, req)
	}
	if err != nil && pol.asMissing && e.OwnerGuarded && p.Scope != ScopeAdmin {
		err = asMissing(e.Name, err)
	}
	if err != nil {
		var ir *InputRequired
		if errors.As(err, &ir) {
			return nil, d.asked(ctx, e, req, ir, c)
		}
	}
	return res, err
}

// OwnershipReason is what an ownership refusal says.
const OwnershipReason = "the target does not belong to this token's user"

// ErrResultMismatch wraps a result that does not match the capability's
// output schema: a bug in the providing plugin, which the caller can do
// nothing about.
var ErrResultMismatch = errors.New("result does not match the output schema")

// run is the ownership step and the call itself, sent together: the
// providing plugin resolves the owner and runs the call in one round trip.
// The result is checked against the output schema before anyone sees it.
func (d *Dispatcher) run(ctx context.Context, e *registry.Entry, req Request) (json.RawMessage, error) {
	check := e.OwnerGuarded && req.Principal.Scope != ScopeAdmin
	req.CheckOwner = check
	res, err := d.providers[e.Plugin].Invoke(ctx, req)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			if !check || r.Step != StepOwnership {
				return nil, fmt.Errorf("plugin %q refused %s at step %q it was not asked to decide", e.Plugin, e.Name, r.Step)
			}
			r.Capability = e.Name
		}
		return nil, err
	}
	if verr := e.ValidateResult(res); verr != nil {
		return nil, fmt.Errorf("plugin %q: %s: %w: %s", e.Plugin, e.Name, ErrResultMismatch, shorten(verr.Error()))
	}
	return res, nil
}
