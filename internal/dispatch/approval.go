package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/registry"
)

// OwnerChecker is a Provider that can decide the ownership step of a call
// alone, running nothing: nil when r's target belongs to r.Principal's
// user, the *Refusal at StepOwnership or the NotFound *ToolError
// otherwise, or ErrCannotCheckOnly when it cannot tell without running
// the call (a plugin built before the check existed). The gate asks it
// before it holds a call for a human. A Provider that is not one is never
// asked, and its held calls are checked when they run.
type OwnerChecker interface {
	CheckOwner(ctx context.Context, r Request) error
}

// ErrCannotCheckOnly is an OwnerChecker that cannot answer alone.
var ErrCannotCheckOnly = errors.New("the provider cannot check ownership without running the call")

// Held is a call the gate holds for a human's yes: it passed every step
// that does not need the target's owner, and its arguments are valid.
type Held struct {
	Principal  Principal
	Capability string
	// Args are the arguments exactly as the caller sent them (an absent
	// body is "{}"); Sensitive the property paths whose values no one
	// deciding or following the call may see (registry.Entry.Sensitive).
	Args      json.RawMessage
	Sensitive [][]string
	Risk      registry.Risk
	// CallID is the audit ID of the call that asked.
	CallID string
	Origin Origin
}

// Pending is the result a held call answers: a normal result, not an
// error, that the agent can show its user and follow.
type Pending struct {
	Status     string `json:"status"` // PendingStatus
	ApprovalID string `json:"approval_id"`
	ExpiresAt  string `json:"expires_at"` // RFC 3339
	Message    string `json:"message"`
}

// PendingStatus is Pending.Status.
const PendingStatus = "pending_approval"

// PendingSchema is the JSON Schema of Pending. A protocol that declares a
// capability's output schema admits it beside the capability's own for a
// capability that may be held, so that clients checking results against
// the schema accept the pending one.
var PendingSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"status":{"type":"string","const":"pending_approval"},` +
	`"approval_id":{"type":"string","description":"names the request; follow it with approvals.get"},` +
	`"expires_at":{"type":"string","format":"date-time","description":"when the request lapses if no one decides it"},` +
	`"message":{"type":"string","description":"what happens next, for the user"}},` +
	`"required":["status","approval_id","expires_at","message"]}`)

// MayBeHeld reports whether a call at risk waits for a human.
func MayBeHeld(risk registry.Risk) bool {
	return risk == registry.RiskReviewRequired || risk == registry.RiskDangerous
}

// Approver keeps the calls that wait for a human (UseApprover).
type Approver interface {
	// Hold stores h for a decision and returns its request's id and what
	// the caller gets now: a result saying the call is pending, which is
	// not an error. An error means nothing was stored and nothing ran; a
	// *Refusal (too many calls of this user already wait) is the call's
	// refusal at StepRisk.
	Hold(ctx context.Context, h Held) (Holding, error)
}

// Holding is a held call's request and the caller's answer.
type Holding struct {
	ApprovalID string
	Result     json.RawMessage
}

// UseApprover makes the gate hold calls at RiskReviewRequired and
// RiskDangerous with a instead of refusing them. Call it before serving.
func (d *Dispatcher) UseApprover(a Approver) { d.approver = a }

// Grant is a human's yes to one held call, as the host runs it: the same
// principal's token and user, the same capability, the same arguments.
type Grant struct {
	ApprovalID string
	Token      string
	UserID     string
	Capability string
	ArgsSHA256 [32]byte
}

type grantKey struct{}

// WithGrant returns ctx carrying g: the call made with it passes the risk
// step if it is the call g approves, and passes every other step as any
// call does. Only the host's runner of approved calls sets it; no
// protocol adapter may, as no caller can approve its own call.
func WithGrant(ctx context.Context, g Grant) context.Context {
	return context.WithValue(ctx, grantKey{}, g)
}

// GrantOf returns the Grant ctx carries, if any.
func GrantOf(ctx context.Context) (Grant, bool) {
	g, ok := ctx.Value(grantKey{}).(Grant)
	return g, ok
}

// HeldReport is where the gate says that a call was held for a human: a
// protocol whose answer differs for a held call (HTTP's 202) learns it
// from the gate, not from the shape of the result, which a capability's
// own result could take.
type HeldReport struct {
	// Held is set when the call was held; ApprovalID names its request.
	Held       bool
	ApprovalID string
}

type heldKey struct{}

// WithHeldReport returns ctx carrying r, which the gate fills when the
// call made with ctx is held. Only an adapter that needs it should add
// it: every context layer lengthens the lookups below it.
func WithHeldReport(ctx context.Context, r *HeldReport) context.Context {
	return context.WithValue(ctx, heldKey{}, r)
}

// ownedBeforeHold is the ownership step of an owner-guarded call asked
// alone, so that no human is asked to approve a call it would refuse. A
// provider that cannot answer it alone leaves it to the run, which checks
// it as every run does.
func (d *Dispatcher) ownedBeforeHold(ctx context.Context, e *registry.Entry, p Principal, args json.RawMessage) (*Refusal, error) {
	oc, ok := d.providers[e.Plugin].(OwnerChecker)
	if !e.OwnerGuarded || p.Scope == ScopeAdmin || !ok {
		return nil, nil
	}
	err := oc.CheckOwner(ctx, Request{Principal: p, Capability: e.Name, Args: args, CheckOwner: true})
	var r *Refusal
	switch {
	case err == nil, errors.Is(err, ErrCannotCheckOnly):
		return nil, nil
	case errors.As(err, &r):
		if r.Step != StepOwnership {
			return nil, fmt.Errorf("plugin %q refused %s at step %q it was not asked to decide", e.Plugin, e.Name, r.Step)
		}
		r.Capability = e.Name
		return r, nil
	}
	return nil, err
}

// errOr is r as an error when set, else err.
func errOr(r *Refusal, err error) error {
	if r != nil {
		return r
	}
	return err
}

// covers reports whether g approves exactly this call.
func (g Grant) covers(p Principal, capability string, args json.RawMessage) bool {
	return g.ApprovalID != "" && g.Token == p.Token && g.UserID == p.UserID && g.Capability == capability &&
		g.ArgsSHA256 == sha256.Sum256(args)
}

// hold is the risk step for a call that passed every other step but
// ownership: one that needs a human first is held (or refused, without an
// approver) unless ctx carries the grant of exactly this call. It returns
// the held call's answer, or nil to run it.
func (d *Dispatcher) hold(ctx context.Context, pol *compiledPolicy, e *registry.Entry, p Principal, args json.RawMessage, c *call) (json.RawMessage, error) {
	risk := pol.riskOf(&e.Capability)
	if !MayBeHeld(risk) {
		return nil, nil
	}
	if g, ok := GrantOf(ctx); ok && g.covers(p, e.Name, args) {
		c.approvalID = g.ApprovalID
		return nil, nil
	}
	if handled, err := d.confirm(ctx, e, p, args, risk, c); handled {
		return nil, err
	}
	if d.approver == nil {
		return nil, &Refusal{Step: StepRisk, Capability: e.Name, Reason: fmt.Sprintf(
			"this capability is %s: a call runs only once a human approves it, and this server takes no approvals", risk)}
	}
	if r, err := d.ownedBeforeHold(ctx, e, p, args); r != nil || err != nil {
		return nil, errOr(r, err)
	}
	if p.UserID == "" {
		// A held call is the user's to follow (approvals.get lists a
		// user's own), and four eyes compare users: a token bound to
		// nobody has no one to hold it for.
		return nil, &Refusal{Step: StepRisk, Capability: e.Name, Reason: fmt.Sprintf(
			"this capability is %s: only a token bound to a user can ask for a call to be approved", risk)}
	}
	h, err := d.approver.Hold(ctx, Held{Principal: p, Capability: e.Name, Args: args, Sensitive: e.Sensitive, Risk: risk, CallID: c.id, Origin: c.origin})
	if err == nil && (len(h.Result) == 0 || h.ApprovalID == "") {
		err = fmt.Errorf("the approver answered nothing")
	}
	var refused *Refusal
	if errors.As(err, &refused) {
		r := *refused
		r.Step, r.Capability = StepRisk, e.Name
		return nil, &r
	}
	if err != nil {
		return nil, fmt.Errorf("hold %s for approval: %w", e.Name, err)
	}
	c.approvalID, c.held = h.ApprovalID, true
	if r, ok := ctx.Value(heldKey{}).(*HeldReport); ok && r != nil {
		r.Held, r.ApprovalID = true, h.ApprovalID
	}
	return h.Result, nil
}
