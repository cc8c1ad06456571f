package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// MaxNestedDepth bounds how deep plugins may call capabilities through the
// host while serving a call (llm.ask calling platform.search is depth 1),
// so two plugins calling each other cannot loop forever.
const MaxNestedDepth = 4

// Gate is the gate as nested calls reach it: dispatch.Dispatcher.
type Gate interface {
	Invoke(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error)
}

// SetGate makes g the gate of the plugins' nested calls. Until it is set,
// nested calls answer Unavailable; the host sets it before it serves.
func (h *Host) SetGate(g Gate) { h.services.gate.Store(&g) }

// inflight records the callers of the calls a plugin is serving: a plugin
// may call back through the gate as one of them, and as no one else.
type inflight struct {
	mu    sync.Mutex
	calls map[string]inflightCall
}

type inflightCall struct {
	principal dispatch.Principal
	depth     int // 0 for a call from a protocol adapter
}

func (f *inflight) add(id string, c inflightCall) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]inflightCall{}
	}
	f.calls[id] = c
	f.mu.Unlock()
}

func (f *inflight) remove(id string) {
	f.mu.Lock()
	delete(f.calls, id)
	f.mu.Unlock()
}

func (f *inflight) get(id string) (inflightCall, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.calls[id]
	return c, ok
}

type depthKey struct{}

// nestedDepth is how deep in nested calls ctx is: 0 outside any.
func nestedDepth(ctx context.Context) int {
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// gateRef is a settable Gate.
type gateRef = atomic.Pointer[Gate]

// Invoke runs a nested call through the gate as the caller of the call the
// plugin is serving.
func (h hostService) Invoke(ctx context.Context, req *capgatev1.HostServiceInvokeRequest) (*capgatev1.HostServiceInvokeResponse, error) {
	g := h.svc.gate.Load()
	if g == nil || h.self == nil {
		return nil, status.Error(codes.Unavailable, "the host is not serving calls yet")
	}
	parent, ok := h.self.inflight.get(req.CallId)
	if !ok {
		return nil, status.Errorf(codes.PermissionDenied,
			"call_id %q is not a call plugin %q is serving: nested calls act only for the caller of a call in progress", req.CallId, h.plugin)
	}
	if parent.depth >= MaxNestedDepth {
		return nil, status.Errorf(codes.ResourceExhausted, "calls nest deeper than %d", MaxNestedDepth)
	}
	ctx = context.WithValue(ctx, depthKey{}, parent.depth+1)
	res, err := (*g).Invoke(ctx, parent.principal, req.Capability, json.RawMessage(req.Arguments))
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
		return &capgatev1.HostServiceInvokeResponse{Error: wireToolError(te)}, nil
	case errors.Is(err, dispatch.ErrUnknownCapability):
		return nil, status.Errorf(codes.NotFound, "no capability %q", req.Capability)
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	h.svc.log.Warn("a plugin's nested call failed", "plugin", h.plugin, "capability", req.Capability, "err", err)
	return nil, status.Errorf(codes.Internal, "%s failed", req.Capability)
}

func wireToolError(te *dispatch.ToolError) *capgatev1.ToolError {
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
