package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// ErrUnknownCapability is returned (wrapped) by Call.Invoke when no plugin
// provides the capability: a plugin that grounds its answers in another
// pack's capability can fall back when that pack is not installed.
var ErrUnknownCapability = errors.New("no such capability")

// Invoke calls another capability as this call's caller, through the
// host's gate: it passes exactly the checks a direct call by the same
// caller would, so a plugin can never read or do more than its caller may.
// args is marshalled to a JSON object (nil means {}); the result is the
// capability's JSON output. A refusal is a *RefusedError, a failure the
// caller can act on is the callee's *Error (return it as is to pass it
// on), a capability no plugin provides
// ErrUnknownCapability, anything else an internal error.
func (c Call) Invoke(ctx context.Context, capability string, args any) (json.RawMessage, error) {
	if c.host == nil {
		return nil, ErrNoHost
	}
	raw := []byte("{}")
	if args != nil {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("invoke %s: encode arguments: %w", capability, err)
		}
	}
	resp, err := capgatev1.NewHostServiceClient(c.host).Invoke(ctx, &capgatev1.HostServiceInvokeRequest{
		CallId: c.ID, Capability: capability, Arguments: raw,
		// The nested call continues the trace of the span that makes it.
		TraceContext: injectTrace(ctx),
	})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, fmt.Errorf("invoke %s: %w", capability, ErrUnknownCapability)
		}
		return nil, hostError("invoke "+capability, err)
	}
	if r := resp.GetRefusal(); r != nil {
		return nil, &RefusedError{Capability: capability, Step: Step(r.Step), Reason: r.Reason}
	}
	if te := resp.GetError(); te != nil {
		return nil, fromWireError(te)
	}
	return resp.Result, nil
}
