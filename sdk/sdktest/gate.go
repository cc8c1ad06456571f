package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/sdk"
)

// maxResultBytes is the host's default max_result_bytes.
const maxResultBytes = 4 << 20

// invoke runs a call through the gate and returns its outcome in the SDK's
// terms.
func (h *Host) invoke(ctx context.Context, pr sdk.Principal, capability string, args json.RawMessage, depth int) (json.RawMessage, error) {
	p := dispatch.Principal{Role: pr.Role, Scope: dispatch.Scope(pr.Scope), UserID: pr.UserID}
	res, err := h.invokeGate(ctx, p, capability, args, depth)
	return res, fromGate(capability, err)
}

// invokeGate runs a call through the gate and returns its outcome in the
// gate's terms.
func (h *Host) invokeGate(ctx context.Context, p dispatch.Principal, capability string, args json.RawMessage, depth int) (json.RawMessage, error) {
	gate, err := h.gateFor(p.Role)
	if err != nil {
		return nil, err
	}
	return gate.Invoke(context.WithValue(ctx, depthKey{}, depth), p, capability, args)
}

// gateFor returns the gate, grown to hold every permission for role when
// the test declared no Roles.
func (h *Host) gateFor(role string) (*dispatch.Dispatcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started {
		return nil, errors.New("sdktest: the host is not started: call Host.Start (sdktest.Start does) before calling capabilities")
	}
	if _, known := h.policy.Roles[role]; known || h.Roles != nil {
		return h.gate, nil
	}
	h.policy.Roles[role] = []string{"*"}
	gate, err := dispatch.New(h.reg, h.policy, h.providers)
	if err != nil {
		return nil, fmt.Errorf("sdktest: %w", err)
	}
	gate.UseConfirmer(&h.rounds)
	h.gate = gate
	return gate, nil
}

// gateProvider runs the gate's admitted calls in one plugin over its Calls
// stream, as the host's plugin provider does.
type gateProvider struct{ c *Client }

func (g gateProvider) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	depth, _ := ctx.Value(depthKey{}).(int)
	id := g.c.host.beginCall(r.Principal, depth)
	defer g.c.host.endCall(id)
	res, err := g.c.calls.Invoke(ctx, id, r)
	if err == nil || isGateOutcome(err) {
		return res, err
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("plugin %s: %s: %w", g.c.name, r.Capability, ctx.Err())
	}
	return nil, fmt.Errorf("plugin %s: %s: %s", g.c.name, r.Capability, pluginwire.StatusMessage(err))
}

// isGateOutcome reports whether err is a refusal or a tool error: an
// outcome for the caller, not a failure.
func isGateOutcome(err error) bool {
	var (
		r  *dispatch.Refusal
		te *dispatch.ToolError
		ir *dispatch.InputRequired
	)
	return errors.As(err, &r) || errors.As(err, &te) || errors.As(err, &ir)
}

var sdkCodes = map[dispatch.ToolErrorCode]sdk.ErrorCode{
	dispatch.InvalidInput: sdk.CodeInvalidInput,
	dispatch.NotFound:     sdk.CodeNotFound,
	dispatch.Conflict:     sdk.CodeConflict,
	dispatch.Unavailable:  sdk.CodeUnavailable,
}

// fromGate is the gate's outcome as the SDK reports it.
func fromGate(capability string, err error) error {
	var (
		r  *dispatch.Refusal
		te *dispatch.ToolError
		mc *dispatch.MissingCapability
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mc):
		// Asked of a client that declared nothing it needs.
		return &MissingCapabilityError{Needs: mc.Needs}
	case errors.As(err, &r):
		return &sdk.RefusedError{Capability: r.Capability, Step: sdk.Step(r.Step), Reason: r.Reason}
	case errors.As(err, &te):
		code, ok := sdkCodes[te.Code]
		if !ok {
			code = sdk.CodeInvalidInput
		}
		return &sdk.Error{Code: code, Message: te.Message}
	case errors.Is(err, dispatch.ErrUnknownCapability):
		return fmt.Errorf("%q: %w", capability, sdk.ErrUnknownCapability)
	}
	return err
}
