package pluginhost

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

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
	// origin is what the plugin's nested calls carry: the call's own
	// origin, with the call as their parent in the audit trail.
	origin dispatch.Origin
	// span is the host's span of the call, when it is traced: its nested
	// calls stay in its trace.
	span trace.SpanContext
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
	if err := pluginwire.NestedTooDeep(parent.depth); err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, depthKey{}, parent.depth+1)
	ctx = dispatch.WithOrigin(ctx, parent.origin)
	ctx = nestedParent(ctx, parent, req.TraceContext)
	res, err := (*g).Invoke(ctx, parent.principal, req.Capability, json.RawMessage(req.Arguments))
	resp, rerr := pluginwire.NestedResponse(ctx, req.Capability, res, err)
	if rerr != nil && status.Code(rerr) == codes.Internal {
		h.svc.log.Warn("a plugin's nested call failed", "plugin", h.plugin, "capability", req.Capability, "err", err)
	}
	return resp, rerr
}
