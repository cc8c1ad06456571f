package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/internal/registry"
)

// In-band confirmation: a call at RiskReviewRequired whose client can put
// a question to its user (MCP's elicitation, from 2026-07-28 in a
// multi-round-trip result) need not wait for an approver. The gate asks
// instead: it answers NeedsConfirmation, carrying a sealed state, and runs
// the call when the caller sends it again with that state and its user's
// yes. A Confirmer seals the state to the principal, the capability and
// the arguments' digest, lets it expire, and lets it be answered once
// across replicas; the gate decides everything else. A client that cannot
// ask falls back to an approver, and RiskDangerous always does, as does a
// capability the operator turned in-band confirmation off for (InBand):
// there a yes from the caller's own user is not enough.

// Confirmation is what a call brings about asking its user. Protocol
// adapters set it (WithConfirmation); it is the caller's claim, so the
// gate trusts State only once its Confirmer has opened it.
type Confirmation struct {
	// CanAsk says the client can put a question to its user and send the
	// call again with the answer.
	CanAsk bool
	// State is the state of an earlier question, sent back with Answer;
	// empty when the call answers none.
	State string
	// Answer is the user's answer to that question.
	Answer Answer
}

// Answer is a user's answer to a question the gate asked.
type Answer uint8

const (
	// NoAnswer: the call brings no answer (it may still bring the state
	// of a question, which is then asked anew).
	NoAnswer Answer = iota
	// Accepted: the user said yes; the call runs.
	Accepted
	// Declined: the user said no, or dismissed the question; nothing runs.
	Declined
)

type confirmationKey struct{}

// WithConfirmation returns ctx carrying c for the call made with it.
func WithConfirmation(ctx context.Context, c Confirmation) context.Context {
	return context.WithValue(ctx, confirmationKey{}, c)
}

// ConfirmationOf returns the Confirmation ctx carries, if any.
func ConfirmationOf(ctx context.Context) (Confirmation, bool) {
	c, ok := ctx.Value(confirmationKey{}).(Confirmation)
	return c, ok
}

// Question is a call the gate asks its caller's user to confirm.
type Question struct {
	Principal  Principal
	Capability string
	// Args are the validated arguments; Sensitive the property paths whose
	// values a question must not show (registry.Entry.Sensitive).
	Args      json.RawMessage
	Sensitive [][]string
	Risk      registry.Risk
}

// Asked is a question as its caller receives it.
type Asked struct {
	// ID names the question: the audit trail links the call that asked it
	// and the call that answered it by this ID.
	ID string
	// State is what the caller sends back with its user's answer.
	State     string
	ExpiresAt time.Time
	// Message is the question, for the user to read.
	Message string
}

// Confirmer seals and opens the state of the questions the gate asks
// (UseConfirmer). The host's keeps a key and a record of the answered
// states that every replica shares.
type Confirmer interface {
	// Ask seals the state of a question about q's call.
	Ask(ctx context.Context, q Question) (Asked, error)
	// Answered opens state, sent back with an answer to a question about
	// q's call, and uses it up. It returns the question's ID when state
	// is one Ask made for exactly this call (principal, capability and
	// arguments), unexpired and not answered before on any replica; else
	// an error wrapping ErrConfirmationState that says which of those
	// failed, or another error when it could not tell.
	Answered(ctx context.Context, state string, q Question) (id string, err error)
}

// ErrConfirmationState marks a state sent back that the gate cannot
// accept: altered, expired, answered before, or made for another
// principal or another call. The call is refused at StepRisk with why.
var ErrConfirmationState = errors.New("confirmation state not accepted")

// NeedsConfirmation is the gate's answer to a call its caller's user must
// confirm first. Nothing ran; it is neither a refusal nor a failure, but
// the question a protocol adapter puts to the client (MCP: an
// input_required result with one elicitation).
type NeedsConfirmation struct {
	Capability string
	Risk       registry.Risk
	Asked
}

func (n *NeedsConfirmation) Error() string {
	return fmt.Sprintf("%s needs its caller's user to confirm it first (question %s)", n.Capability, n.ID)
}

// UseConfirmer lets the gate ask the caller's user to confirm a call at
// RiskReviewRequired, with c sealing the state, when the caller can ask
// (WithConfirmation); other such calls wait for an approver, or are
// refused without one. Call it before serving.
//
// A Confirmer that is also an InputSealer seals the rounds of calls that
// ask their caller's client too.
func (d *Dispatcher) UseConfirmer(c Confirmer) {
	g := &confirmGate{Confirmer: c}
	if old, ok := d.confirmer.(*confirmGate); ok {
		g.inBand.Store(old.inBand.Load())
	}
	d.confirmer = g
	d.inputs, _ = c.(InputSealer)
}

// InBand is the operator's switch over in-band confirmation: a capability
// set false in Capabilities, or one of a pack set false in Packs, has its
// review_required calls wait for a human approver (or refused, on a
// server that takes no approvals) even when its caller could ask its
// user. A capability's setting wins over its pack's; absent is on.
type InBand struct {
	Capabilities map[string]bool
	Packs        map[string]bool
}

func (ib *InBand) allows(c *registry.Capability) bool {
	if ib == nil {
		return true
	}
	if on, ok := ib.Capabilities[c.Name]; ok {
		return on
	}
	if on, ok := ib.Packs[c.Pack]; ok {
		return on
	}
	return true
}

// SetInBand replaces the in-band switch at once; safe while serving. A
// call reads it once, at its risk step.
func (d *Dispatcher) SetInBand(ib InBand) {
	g, ok := d.confirmer.(*confirmGate)
	if !ok {
		// Not serving yet: keep the switch for the confirmer to come.
		g = &confirmGate{}
		d.confirmer = g
	}
	g.inBand.Store(&InBand{Capabilities: maps.Clone(ib.Capabilities), Packs: maps.Clone(ib.Packs)})
}

// confirmGate is the Confirmer the gate was given, with the in-band switch
// beside it; Confirmer is nil until UseConfirmer.
type confirmGate struct {
	Confirmer
	inBand atomic.Pointer[InBand]
}

// confirmerFor is the confirmer that may ask about e's calls: nil when
// there is none, or the operator turned in-band confirmation off for e.
func (d *Dispatcher) confirmerFor(e *registry.Entry) Confirmer {
	g, ok := d.confirmer.(*confirmGate)
	if !ok || g.Confirmer == nil || !g.inBand.Load().allows(&e.Capability) {
		return nil
	}
	return g.Confirmer
}

// confirm is the risk step of a call at RiskReviewRequired whose caller
// can ask its user, or answers a question: it returns the question to ask
// (NeedsConfirmation), a refusal, or nil to run the call. handled is false
// when the call neither answers a question nor can ask one, which leaves
// it to an approver.
func (d *Dispatcher) confirm(ctx context.Context, e *registry.Entry, p Principal, args json.RawMessage, risk registry.Risk, c *call) (handled bool, err error) {
	cf, ok := ConfirmationOf(ctx)
	if !ok || risk != registry.RiskReviewRequired {
		return false, nil
	}
	confirmer := d.confirmerFor(e)
	if confirmer == nil {
		// A state sent back for a capability in-band was turned off for
		// since is not taken either: the call waits for an approver.
		return false, nil
	}
	if c.inputConfirmed != "" {
		// A later round of a call its user said yes to: the state that
		// says so is sealed to exactly this call, and was used up.
		c.confirmID, c.confirmed = c.inputConfirmed, true
		return true, nil
	}
	q := Question{Principal: p, Capability: e.Name, Args: args, Sensitive: e.Sensitive, Risk: risk}
	if cf.State != "" && cf.Answer != NoAnswer && c.inputID == "" {
		id, err := confirmer.Answered(ctx, cf.State, q)
		if err != nil {
			if errors.Is(err, ErrConfirmationState) {
				return true, &Refusal{Step: StepRisk, Capability: e.Name, Reason: err.Error()}
			}
			return true, fmt.Errorf("check the confirmation of %s: %w", e.Name, err)
		}
		c.confirmID = id
		if cf.Answer != Accepted {
			return true, &Refusal{Step: StepRisk, Capability: e.Name,
				Reason: "the user declined to confirm this call, so it did not run"}
		}
		c.confirmed = true
		return true, nil
	}
	if !cf.CanAsk {
		return false, nil
	}
	// As before holding a call: no one is asked about a call the
	// ownership step would refuse.
	if r, err := d.ownedBeforeHold(ctx, e, p, args); r != nil || err != nil {
		return true, errOr(r, err)
	}
	asked, err := confirmer.Ask(ctx, q)
	if err == nil && (asked.ID == "" || asked.State == "") {
		err = errors.New("the confirmer answered nothing")
	}
	if err != nil {
		return true, fmt.Errorf("ask to confirm %s: %w", e.Name, err)
	}
	c.confirmID, c.asked = asked.ID, true
	return true, &NeedsConfirmation{Capability: e.Name, Risk: risk, Asked: asked}
}
