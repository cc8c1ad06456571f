package dispatch

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/capgate/capgate/internal/registry"
)

// Observer counts the gate's decisions (the host's metrics). It is told
// of every call once, as the call ends, on the caller's goroutine: it must
// be cheap and must not block.
type Observer interface {
	Observe(o Observation)
}

// Outcome is how an admitted call ended.
type Outcome string

const (
	OutcomeOK            Outcome = "ok"
	OutcomeToolError     Outcome = "tool_error"
	OutcomeInternalError Outcome = "internal_error"
	// OutcomeHeld: held for an approver; nothing ran.
	OutcomeHeld Outcome = "held"
	// OutcomeAsked: its caller's user was asked to confirm it, or its
	// caller's client was asked for input; nothing finished.
	OutcomeAsked Outcome = "asked"
)

// Observation is one call as the gate decided it.
type Observation struct {
	// Entry is the capability called; nil for a name no plugin provides,
	// which is Step StepUnknown. The name itself is the caller's, and not
	// given: counting by it would let callers grow the counts without
	// bound.
	Entry *registry.Entry
	// Step is the refusing step; empty when the call was admitted.
	Step Step
	// Outcome is how an admitted call ended; empty for a refusal.
	Outcome Outcome
}

// UseObserver makes the gate tell o of every decision. Call it before
// serving.
func (d *Dispatcher) UseObserver(o Observer) { d.observer = o }

// observed runs one call through the gate, for an observer but no
// auditor.
func (d *Dispatcher) observed(ctx context.Context, p Principal, name string, args json.RawMessage) (json.RawMessage, error) {
	c := call{origin: OriginOf(ctx)}
	res, err := d.invoke(ctx, p, name, args, &c)
	d.observer.Observe(observation(&c, err))
	return res, err
}

// observation is what the observer is told of call c, which ended with
// err.
func observation(c *call, err error) Observation {
	o := Observation{Entry: c.entry}
	if err == nil {
		switch {
		case c.held:
			o.Outcome = OutcomeHeld
		default:
			o.Outcome = OutcomeOK
		}
		return o
	}
	var (
		r  *Refusal
		te *ToolError
		nc *NeedsConfirmation
		ni *NeedsInput
		mc *MissingCapability
	)
	switch {
	case errors.As(err, &r):
		o.Step = r.Step
	case errors.As(err, &nc), errors.As(err, &ni):
		o.Outcome = OutcomeAsked
	case errors.As(err, &te), errors.As(err, &mc):
		o.Outcome = OutcomeToolError
	case errors.Is(err, ErrUnknownCapability):
		o.Step = StepUnknown
	default:
		o.Outcome = OutcomeInternalError
	}
	return o
}
