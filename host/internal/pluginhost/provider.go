package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/host/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// callSeq numbers calls for the plugins' logs and for host callbacks.
var callSeq atomic.Uint64

// Providers returns a dispatch.Provider per plugin name.
func (h *Host) Providers() map[string]dispatch.Provider {
	m := make(map[string]dispatch.Provider, len(h.plugins))
	for _, p := range h.plugins {
		m[p.spec.Name] = p
	}
	return m
}

// Invoke runs a capability in the plugin. The gate has already admitted the
// principal and validated args.
func (p *Plugin) Invoke(ctx context.Context, pr dispatch.Principal, capability string, args json.RawMessage) (json.RawMessage, error) {
	id := strconv.FormatUint(callSeq.Add(1), 36)
	// While the call runs, the plugin may call back through the gate as pr.
	p.inflight.add(id, inflightCall{principal: pr, depth: nestedDepth(ctx)})
	defer p.inflight.remove(id)
	r, err := p.calls.call(ctx, &capgatev1.CallsRequest{Call: &capgatev1.CallsRequest_Invoke{Invoke: &capgatev1.InvokeRequest{
		Capability: capability,
		Arguments:  args,
		Principal:  &capgatev1.Principal{Role: pr.Role, Scope: string(pr.Scope), UserId: pr.UserID},
		CallId:     id,
	}}})
	if err != nil {
		return nil, p.rpcError(ctx, "invoke", capability, err)
	}
	resp := r.GetInvoke()
	if e := resp.GetError(); e != nil {
		return nil, toolError(e)
	}
	return resp.Result, nil
}

// ResolveOwner asks the plugin who owns the target of the call.
func (p *Plugin) ResolveOwner(ctx context.Context, capability string, args json.RawMessage) (string, error) {
	r, err := p.calls.call(ctx, &capgatev1.CallsRequest{Call: &capgatev1.CallsRequest_ResolveOwner{
		ResolveOwner: &capgatev1.ResolveOwnerRequest{Capability: capability, Arguments: args},
	}})
	if err != nil {
		return "", p.rpcError(ctx, "resolve owner of", capability, err)
	}
	resp := r.GetResolveOwner()
	if e := resp.GetError(); e != nil {
		return "", toolError(e)
	}
	return resp.OwnerUserId, nil
}

func (p *Plugin) rpcError(ctx context.Context, what, capability string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %q: %s %s: %w", p.spec.Name, what, capability, ctx.Err())
	}
	// The plugin holds the call's deadline too and may report it a moment
	// before the host's own timer fires: still the caller's deadline.
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return fmt.Errorf("plugin %q: %s %s: %w", p.spec.Name, what, capability, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("plugin %q: %s %s: %w", p.spec.Name, what, capability, context.Canceled)
	}
	msg := statusMessage(err)
	// A dead plugin fails every call at once; say so rather than how the
	// stream broke, so the log names the plugin that died.
	if dead := p.deadError(); dead != "" {
		msg = dead
	} else if p.client.Exited() {
		msg = "the plugin process has exited"
	}
	return fmt.Errorf("plugin %q: %s %s: %s", p.spec.Name, what, capability, msg)
}

func toolError(e *capgatev1.ToolError) *dispatch.ToolError {
	code := dispatch.InvalidInput
	switch e.Code {
	case capgatev1.ToolError_CODE_NOT_FOUND:
		code = dispatch.NotFound
	case capgatev1.ToolError_CODE_CONFLICT:
		code = dispatch.Conflict
	}
	return &dispatch.ToolError{Code: code, Message: e.Message}
}
