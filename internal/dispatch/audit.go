package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/capgate/capgate/internal/registry"
)

// StepAudit refuses actions while the audit trail cannot be written, when
// the dispatcher was told to (UseAuditor).
const StepAudit Step = "audit"

// Origin says where a call came from, for the audit trail. Protocol
// adapters set it (WithOrigin); the plugin host carries it, with the
// parent's ID, into the nested calls a plugin makes.
type Origin struct {
	Protocol, ProtocolVersion string
	// RequestID is the protocol's request id, as the caller sent it.
	RequestID string
	// ParentID is the audit ID of the call that made this nested call;
	// empty for a call from a protocol adapter.
	ParentID string
}

type originKey struct{}

// WithOrigin returns ctx carrying o for the calls made with it.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginOf returns the Origin ctx carries, zero when none.
func OriginOf(ctx context.Context) Origin {
	o, _ := ctx.Value(originKey{}).(Origin)
	return o
}

// Decision is one call as the gate decided and ran it.
type Decision struct {
	// ID names the call (Auditor.NewID); its nested calls name it as their
	// Origin.ParentID.
	ID     string
	Origin Origin
	// Time is when the call reached the gate, Latency how long it took to
	// its outcome.
	Time      time.Time
	Latency   time.Duration
	Principal Principal
	// Capability and Plugin name what was called; Plugin is empty when the
	// capability does not exist.
	Capability, Plugin string
	// Args are the arguments as the caller sent them: unvalidated,
	// possibly large. Sensitive lists the property paths ("*" for any
	// element or member) whose values the trail must not keep.
	Args      json.RawMessage
	Sensitive [][]string
	// Refusal is the gate's no; nil when the call was admitted.
	Refusal *Refusal
	// Err is the outcome of an admitted call: nil, a *ToolError, or an
	// *InternalError.
	Err error
	// ApprovalID names the request of a call held for a human, or of the
	// approved call this one runs, or the question put to the caller's
	// user about this call (Asked) or answered by it (Confirmed, or a
	// refusal at StepRisk); empty otherwise.
	ApprovalID string
	// Held says the call was held for a human: it answered the pending
	// result and ran nothing.
	Held bool
	// Asked says the caller's user was asked to confirm the call: it
	// answered NeedsConfirmation and ran nothing. Confirmed says it ran
	// on that user's yes.
	Asked, Confirmed bool
	// AskedClient says the call asked its caller's client for input
	// (NeedsInput): nothing finished, and ApprovalID names the round.
	AskedClient bool
	// Pending says the gate asked the auditor to keep the call's record
	// before it ran (Auditor.Admit), whether or not that succeeded: this
	// decision replaces that record.
	Pending bool
}

// Auditor keeps the gate's decisions. The host's writes them to the audit
// trail's store.
type Auditor interface {
	// NewID names a call before it runs; at is when it started.
	NewID(at time.Time) string
	// Record keeps d. It must not block the call: the trail is written
	// behind it.
	Record(d Decision)
	// Admit keeps d, an action that has passed every step and is about
	// to run, durably, and returns once it is kept: an action runs only
	// once its record would survive the host stopping while it runs. The
	// outcome's Record, with d.Pending set, replaces it.
	Admit(ctx context.Context, d Decision) error
	// Healthy reports whether records are reaching the store.
	Healthy() bool
}

// InternalError is a failure that is neither a refusal nor the caller's
// to fix. Ref names it for the caller, who sees no more than that; the
// same reference is in the audit trail and the host's log.
type InternalError struct {
	Ref string
	Err error
}

func (e *InternalError) Error() string { return fmt.Sprintf("%v (reference %s)", e.Err, e.Ref) }

func (e *InternalError) Unwrap() error { return e.Err }

// UseAuditor makes the gate record every decision with a. With
// refuseActions, actions are refused at StepAudit while a is not healthy;
// reads carry on either way. Call it before serving.
func (d *Dispatcher) UseAuditor(a Auditor, refuseActions bool) {
	d.auditor, d.auditRequired = a, refuseActions
}

// audited runs one call through the gate and records its decision.
func (d *Dispatcher) audited(ctx context.Context, p Principal, name string, args json.RawMessage) (json.RawMessage, error) {
	start := time.Now()
	// The ID reaches the provider in its Request, not in ctx: another
	// layer of ctx would lengthen every lookup below it.
	c := call{id: d.auditor.NewID(start), origin: OriginOf(ctx)}
	res, err := d.invoke(ctx, p, name, args, &c)
	dec := Decision{
		ID: c.id, Origin: c.origin, Time: start, Latency: time.Since(start), Principal: p,
		Capability: name, Args: args, ApprovalID: c.approvalID, Held: c.held, Asked: c.asked, Confirmed: c.confirmed,
		Pending: c.pending,
	}
	switch {
	case c.inputAsked:
		dec.ApprovalID, dec.AskedClient = c.inputID, true
	case c.confirmID != "":
		dec.ApprovalID = c.confirmID
	case c.inputID != "":
		dec.ApprovalID = c.inputID
	}
	if e := c.entry; e != nil {
		dec.Plugin, dec.Sensitive = e.Plugin, e.Sensitive
	}
	if err != nil {
		err = classify(&dec, err)
	}
	d.auditor.Record(dec)
	if d.observer != nil {
		d.observer.Observe(observation(&c, err))
	}
	return res, err
}

// classify records in dec how a call failed and returns the error its
// caller gets: an error that is neither a refusal nor a tool error
// becomes an InternalError whose reference is the record's ID. Apart from
// audited so that calls that succeed do not pay for the targets of
// errors.As, which escape.
func classify(dec *Decision, err error) error {
	var (
		r  *Refusal
		te *ToolError
		nc *NeedsConfirmation
		ni *NeedsInput
		mc *MissingCapability
		h  *hiddenRefusal
		mo *maskedOwnership
	)
	switch {
	case errors.As(err, &mo):
		// The caller hears "no such target"; the trail keeps the step.
		dec.Refusal = mo.refusal
	case errors.As(err, &r):
		dec.Refusal = r
	case errors.As(err, &nc):
		// A question, not a failure: Asked says so.
	case errors.As(err, &ni):
		// Input asked of the client: AskedClient says so.
	case errors.As(err, &mc):
		dec.Err = &ToolError{Code: InvalidInput, Message: mc.Error()}
	case errors.As(err, &te):
		dec.Err = te
	case errors.As(err, &h):
		// The caller hears "unknown"; the trail keeps the real step.
		dec.Refusal = h.refusal
	case errors.Is(err, ErrUnknownCapability):
		dec.Refusal = &Refusal{Step: StepUnknown, Capability: dec.Capability, Reason: "no plugin provides this capability"}
	default:
		err = &InternalError{Ref: dec.ID, Err: err}
		dec.Err = err
	}
	return err
}

// StepUnknown is how the audit trail records a call to a capability that
// does not exist. The caller gets ErrUnknownCapability, not a refusal.
const StepUnknown Step = "unknown_capability"

// keepAdmission is the audit step's second half, for an action that has
// passed every other step: its record is kept durably before it runs.
// When that fails the action is refused at StepAudit (or, with
// audit.on_unavailable: allow, runs unrecorded until its outcome).
func (d *Dispatcher) keepAdmission(ctx context.Context, p Principal, e *registry.Entry, args json.RawMessage, c *call) error {
	c.pending = true
	err := d.auditor.Admit(ctx, Decision{
		ID: c.id, Origin: c.origin, Time: time.Now(), Principal: p, Capability: e.Name, Plugin: e.Plugin,
		Args: args, Sensitive: e.Sensitive, ApprovalID: c.approvalID, Confirmed: c.confirmed,
	})
	switch {
	case err == nil, !d.auditRequired:
		return nil
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return &Refusal{Step: StepAudit, Capability: e.Name,
		Reason: "the audit trail (its database) could not keep this action's record before it ran, so it did not run; retry shortly"}
}

// auditDown is the audit step: an action is refused while the trail
// cannot be written, if the operator asked for that.
func (d *Dispatcher) auditDown(e *registry.Entry) *Refusal {
	if d.auditor == nil || !d.auditRequired || e.Kind != registry.Action || d.auditor.Healthy() {
		return nil
	}
	return &Refusal{Step: StepAudit, Capability: e.Name,
		Reason: "the audit trail (its database) cannot be written now, so actions are refused until it can; reads still work"}
}
