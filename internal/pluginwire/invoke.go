package pluginwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Invoke sends one admitted call over the stream under callID and
// translates the plugin's answer into the gate's terms: the result, a
// *dispatch.ToolError, or a *dispatch.Refusal (which the gate accepts only
// at the ownership step it asked the plugin to decide). Any other error is the link's: a gRPC
// status the plugin answered with, the context's error, or ErrNotSent
// wrapped when nothing reached the plugin.
func (c *CallStream) Invoke(ctx context.Context, callID string, r dispatch.Request) (json.RawMessage, error) {
	res, _, err := c.invoke(ctx, callID, r, false, nil)
	return res, err
}

// InvokeTraced is Invoke for a traced call: traceContext (W3C keys) goes
// with it, and the spans the plugin recorded serving it come back, as the
// plugin sent them (see CallsResponse.trace_spans), whatever the outcome.
func (c *CallStream) InvokeTraced(ctx context.Context, callID string, r dispatch.Request, traceContext map[string]string) (json.RawMessage, []byte, error) {
	return c.invoke(ctx, callID, r, false, traceContext)
}

// CheckOwner sends the ownership step of r alone (OwnerCheck.only): the
// plugin decides it and runs nothing. Send it only to a plugin that says
// it honours it (DescribeResponse.checks_owner_only).
func (c *CallStream) CheckOwner(ctx context.Context, callID string, r dispatch.Request) error {
	r.CheckOwner = true
	_, _, err := c.invoke(ctx, callID, r, true, nil)
	return err
}

func (c *CallStream) invoke(ctx context.Context, callID string, r dispatch.Request, ownerOnly bool, traceContext map[string]string) (json.RawMessage, []byte, error) {
	req := &capgatev1.InvokeRequest{
		Capability:   r.Capability,
		Arguments:    r.Args,
		Principal:    &capgatev1.Principal{Role: r.Principal.Role, Scope: string(r.Principal.Scope), UserId: r.Principal.UserID},
		CallId:       callID,
		TraceContext: traceContext,
	}
	if r.CheckOwner {
		req.OwnerCheck = &capgatev1.OwnerCheck{UserId: r.Principal.UserID, Only: ownerOnly}
	}
	if !ownerOnly {
		req.RequestState, req.InputResponses = inputContext(r.Input)
	}
	var notices dispatch.Notices
	if !ownerOnly {
		// The ownership step alone tells the caller nothing.
		if notices = dispatch.NoticesOf(ctx); notices != nil {
			if w := notices.Wants(); w.Any() {
				req.Notices = &capgatev1.Notices{Progress: w.Progress, LogLevel: capgatev1.LogLevel(w.LogLevel)}
			} else {
				notices = nil
			}
		}
	}
	resp, err := c.call(ctx, &capgatev1.CallsRequest{Call: &capgatev1.CallsRequest_Invoke{Invoke: req}}, notices)
	spans := resp.GetTraceSpans()
	if err != nil {
		return nil, spans, err
	}
	out := resp.GetInvoke()
	if out == nil {
		return nil, spans, fmt.Errorf("plugin answered call %d of %s with no result", resp.Id, r.Capability)
	}
	if rf := out.GetRefusal(); rf != nil {
		// Whether the plugin may refuse this call at this step is the
		// gate's to judge (dispatch refuses anything but an ownership
		// refusal it asked for); the reason is always the host's wording.
		return nil, spans, &dispatch.Refusal{Step: dispatch.Step(rf.Step), Capability: r.Capability, Reason: dispatch.OwnershipReason}
	}
	if e := out.GetError(); e != nil {
		return nil, spans, ToolError(e)
	}
	if ir := out.GetInputRequired(); ir != nil {
		// Whether the plugin may ask, and what, is the gate's to judge.
		return nil, spans, InputRequired(ir)
	}
	if len(out.Content) > 0 {
		blocks, size, err := Contents(out.Content)
		if err != nil {
			return nil, spans, fmt.Errorf("plugin answered call %d of %s with %w", resp.Id, r.Capability, err)
		}
		// Only an adapter that renders blocks asks for them; a nested
		// call, or another protocol's, gets the structured result alone.
		if rep := dispatch.ContentReportOf(ctx); rep != nil {
			rep.Blocks, rep.Bytes = blocks, size
		}
	}
	return out.Result, spans, nil
}

// inputContext is a round as the contract carries it to the plugin (a
// call's or a prompt's): what the client can be asked with the state kept
// the round before, and the client's answers. Nil when the client can be
// asked nothing.
func inputContext(in *dispatch.InputRound) (*capgatev1.InputContext, map[string][]byte) {
	if in == nil {
		return nil, nil
	}
	rs := &capgatev1.InputContext{CanAsk: in.CanAsk, State: in.State, Round: uint32(min(max(in.Round, 0), 1<<31))}
	if len(in.Responses) == 0 {
		return rs, nil
	}
	answers := make(map[string][]byte, len(in.Responses))
	for k, v := range in.Responses {
		answers[k] = v
	}
	return rs, answers
}

// InputRequired is a plugin's request for its caller's client's answers
// in the gate's terms, its requests in key order.
func InputRequired(ir *capgatev1.InputRequired) *dispatch.InputRequired {
	out := &dispatch.InputRequired{State: ir.State, Missing: ir.MissingCapabilities}
	keys := make([]string, 0, len(ir.Requests))
	for k := range ir.Requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := ir.Requests[k]
		out.Requests = append(out.Requests, dispatch.InputRequest{Key: k, Method: r.GetMethod(), Params: r.GetParams()})
	}
	return out
}

// ToolError is a plugin's tool error in the gate's terms.
func ToolError(e *capgatev1.ToolError) *dispatch.ToolError {
	code := dispatch.InvalidInput
	switch e.Code {
	case capgatev1.ToolError_CODE_NOT_FOUND:
		code = dispatch.NotFound
	case capgatev1.ToolError_CODE_CONFLICT:
		code = dispatch.Conflict
	case capgatev1.ToolError_CODE_UNAVAILABLE:
		code = dispatch.Unavailable
	}
	return &dispatch.ToolError{Code: code, Message: e.Message}
}

// WireToolError is the gate's tool error as the contract carries it.
func WireToolError(te *dispatch.ToolError) *capgatev1.ToolError {
	code := capgatev1.ToolError_CODE_INVALID_INPUT
	switch te.Code {
	case dispatch.NotFound:
		code = capgatev1.ToolError_CODE_NOT_FOUND
	case dispatch.Conflict:
		code = capgatev1.ToolError_CODE_CONFLICT
	case dispatch.Unavailable:
		code = capgatev1.ToolError_CODE_UNAVAILABLE
	}
	return &capgatev1.ToolError{Code: code, Message: te.Message}
}

// StatusMessage returns the text of a gRPC status without the "rpc error:
// code = ... desc =" framing, which says nothing to an operator.
func StatusMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// MaxNestedDepth bounds how deep plugins may call capabilities through the
// host while serving a call (llm.ask calling platform.search is depth 1),
// so two plugins calling each other cannot loop forever.
const MaxNestedDepth = 4

// NestedTooDeep is the refusal of a nested call made while serving a call
// at depth (0 for a call from a protocol adapter), nil while the bound
// allows it.
func NestedTooDeep(depth int) error {
	if depth >= MaxNestedDepth {
		return status.Errorf(codes.ResourceExhausted, "calls nest deeper than %d", MaxNestedDepth)
	}
	return nil
}

// NestedResponse is the outcome of a nested call through the gate (a
// plugin calling another capability as its caller) as the HostService
// answers it: a result, a refusal or a tool error in the response, and an
// unknown capability, the caller's own deadline or any other failure as a
// gRPC status. The text of an internal failure stays in the host's log.
func NestedResponse(ctx context.Context, capability string, res json.RawMessage, err error) (*capgatev1.HostServiceInvokeResponse, error) {
	var (
		refusal *dispatch.Refusal
		te      *dispatch.ToolError
	)
	switch {
	case err == nil:
		return &capgatev1.HostServiceInvokeResponse{Result: res}, nil
	case errors.As(err, &refusal):
		return &capgatev1.HostServiceInvokeResponse{Refusal: &capgatev1.Refusal{Step: string(refusal.Step), Reason: refusal.Reason}}, nil
	case errors.As(err, &te):
		return &capgatev1.HostServiceInvokeResponse{Error: WireToolError(te)}, nil
	case errors.Is(err, dispatch.ErrUnknownCapability):
		return nil, status.Errorf(codes.NotFound, "no capability %q", capability)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return nil, status.Errorf(codes.Internal, "%s failed", capability)
}

// risks maps the wire's levels to the registry's; unspecified, from a
// plugin built before risk existed, is safe.
var risks = map[capgatev1.Risk]registry.Risk{
	capgatev1.Risk_RISK_UNSPECIFIED:     registry.RiskSafe,
	capgatev1.Risk_RISK_SAFE:            registry.RiskSafe,
	capgatev1.Risk_RISK_REVIEW_REQUIRED: registry.RiskReviewRequired,
	capgatev1.Risk_RISK_DANGEROUS:       registry.RiskDangerous,
	capgatev1.Risk_RISK_BLOCKED:         registry.RiskBlocked,
}

// taskSupports maps the wire's task support to the registry's;
// unspecified, from a plugin built before tasks existed, is forbidden.
var taskSupports = map[capgatev1.TaskSupport]registry.TaskSupport{
	capgatev1.TaskSupport_TASK_SUPPORT_UNSPECIFIED: registry.TaskForbidden,
	capgatev1.TaskSupport_TASK_SUPPORT_FORBIDDEN:   registry.TaskForbidden,
	capgatev1.TaskSupport_TASK_SUPPORT_OPTIONAL:    registry.TaskOptional,
	capgatev1.TaskSupport_TASK_SUPPORT_REQUIRED:    registry.TaskRequired,
}

// Capability is a plugin's declaration of a capability in the registry's
// terms.
func Capability(c *capgatev1.Capability, plugin string) (registry.Capability, error) {
	var kind registry.Kind
	switch c.Kind {
	case capgatev1.Kind_KIND_READ:
		kind = registry.Read
	case capgatev1.Kind_KIND_ACTION:
		kind = registry.Action
	default:
		return registry.Capability{}, fmt.Errorf("capability %q: kind %v is neither read nor action", c.Name, c.Kind)
	}
	risk, ok := risks[c.Risk]
	if !ok {
		return registry.Capability{}, fmt.Errorf("capability %q: risk %v is not one the host knows", c.Name, c.Risk)
	}
	tasks, ok := taskSupports[c.TaskSupport]
	if !ok {
		return registry.Capability{}, fmt.Errorf("capability %q: task support %v is not one the host knows", c.Name, c.TaskSupport)
	}
	return registry.Capability{
		TaskSupport:  tasks,
		Risk:         risk,
		Name:         c.Name,
		Description:  c.Description,
		Kind:         kind,
		InputSchema:  c.InputSchema,
		OutputSchema: c.OutputSchema,
		Pack:         c.Pack,
		Permission:   c.Permission,
		OwnerGuarded: c.OwnerGuarded,
		Destructive:  c.Destructive,
		Plugin:       plugin,
		Title:        c.Title,
		Icons:        icons(c.Icons),
		// Optional on the wire: a plugin that says nothing leaves the
		// host's defaults.
		IdempotentHint: c.IdempotentHint,
		OpenWorldHint:  c.OpenWorldHint,
	}, nil
}

func icons(in []*capgatev1.Icon) []registry.Icon {
	if len(in) == 0 {
		return nil
	}
	out := make([]registry.Icon, 0, len(in))
	for _, ic := range in {
		out = append(out, registry.Icon{Src: ic.GetSrc(), MIMEType: ic.GetMimeType(), Sizes: ic.GetSizes(), Theme: ic.GetTheme()})
	}
	return out
}
