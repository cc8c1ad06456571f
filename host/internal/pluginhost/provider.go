package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
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

// Invoke runs an admitted call in the plugin, its ownership step included,
// in one round trip.
func (p *Plugin) Invoke(ctx context.Context, r dispatch.Request) (res json.RawMessage, err error) {
	inst, err := p.acquire()
	if err != nil {
		return nil, err
	}
	defer p.active.Add(-1)
	id := strconv.FormatUint(callSeq.Add(1), 36)
	var span trace.Span
	if t := p.opts.Tracing; t != nil {
		ctx, span = p.startCall(ctx, t, id, r)
		defer func() { endCall(span, err) }()
	}
	// While the call runs, the plugin may call back through the gate as the
	// caller.
	origin := r.Origin
	origin.ParentID = r.CallID
	c := inflightCall{principal: r.Principal, depth: nestedDepth(ctx), origin: origin}
	if span != nil {
		c.span = span.SpanContext()
	}
	p.inflight.add(id, c)
	defer p.inflight.remove(id)
	if span != nil {
		res, err = p.invokeTraced(ctx, p.opts.Tracing, span, inst, id, r)
	} else {
		res, err = inst.calls.Invoke(ctx, id, r)
	}
	var (
		te      *dispatch.ToolError
		refusal *dispatch.Refusal
		ir      *dispatch.InputRequired
	)
	switch {
	case err == nil:
	case errors.As(err, &te), errors.As(err, &refusal), errors.As(err, &ir):
		return nil, err
	default:
		return nil, p.rpcError(ctx, inst, "invoke", r.Capability, err)
	}
	n := len(res)
	if rep := dispatch.ContentReportOf(ctx); rep != nil {
		// The content blocks are part of the answer, under the same limit.
		n += rep.Bytes
	}
	if n > p.opts.MaxResultBytes {
		// The SDK refuses to send such a result; a plugin written without
		// it may not, and the agent must not receive it either way.
		p.log.Warn("result over max_result_bytes refused", "capability", r.Capability, "bytes", n, "limit", p.opts.MaxResultBytes)
		return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf(
			"the result of %s is %d bytes, more than this server's limit of %d bytes: ask for less (a smaller limit or a narrower request)",
			r.Capability, n, p.opts.MaxResultBytes)}
	}
	return res, nil
}

// CheckOwner implements dispatch.OwnerChecker: the ownership step alone,
// for a plugin that says it honours it; one built before would run the
// call, so it is not asked.
func (p *Plugin) CheckOwner(ctx context.Context, r dispatch.Request) error {
	if !p.describe.GetChecksOwnerOnly() {
		return dispatch.ErrCannotCheckOnly
	}
	inst, err := p.acquire()
	if err != nil {
		return err
	}
	defer p.active.Add(-1)
	err = inst.calls.CheckOwner(ctx, strconv.FormatUint(callSeq.Add(1), 36), r)
	var (
		te      *dispatch.ToolError
		refusal *dispatch.Refusal
	)
	switch {
	case err == nil, errors.As(err, &te), errors.As(err, &refusal):
		return err
	}
	return p.rpcError(ctx, inst, "check owner", r.Capability, err)
}

var _ dispatch.OwnerChecker = (*Plugin)(nil)

// acquire takes one of the plugin's in-flight slots for a call and returns
// the process to send it to; the caller gives the slot back with
// p.active.Add(-1). A plugin no process serves, or one at its bound, fails
// the call at once: waiting would only queue work without bound behind a
// plugin that cannot take it.
func (p *Plugin) acquire() (*instance, error) {
	if err := p.unavailable(); err != nil {
		return nil, err
	}
	inst := p.cur.Load()
	if inst.calls.Ended() {
		// Dead a moment before the supervisor marks it so.
		return nil, p.stoppedError(inst)
	}
	if n := p.active.Add(1); n > int64(p.spec.MaxInFlight) {
		p.active.Add(-1)
		return nil, unavailableError(fmt.Sprintf("plugin %q is at its limit of %d calls in flight (max_in_flight); nothing ran: retry shortly", p.spec.Name, p.spec.MaxInFlight))
	}
	return inst, nil
}

// stoppedError is the error for a call that found the plugin's process
// gone before the call was sent: the supervisor restarts it, nothing ran.
func (p *Plugin) stoppedError(inst *instance) *dispatch.ToolError {
	return unavailableError(fmt.Sprintf("plugin %q is restarting after it stopped (%s); nothing ran: retry in a moment",
		p.spec.Name, inst.calls.Failure()))
}

// InFlight is how many calls the plugin is serving now.
func (p *Plugin) InFlight() int { return int(p.active.Load()) }

func unavailableError(msg string) *dispatch.ToolError {
	return &dispatch.ToolError{Code: dispatch.Unavailable, Message: msg}
}

func (p *Plugin) rpcError(ctx context.Context, inst *instance, what, capability string, err error) error {
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
	if errors.Is(err, pluginwire.ErrNotSent) {
		return p.stoppedError(inst)
	}
	msg := pluginwire.StatusMessage(err)
	// A call the process's death cut short: say so, not how the stream
	// broke, so the log names the plugin that died.
	if inst.client.Exited() {
		msg = "the plugin process exited while serving the call"
	}
	return fmt.Errorf("plugin %q: %s %s: %s", p.spec.Name, what, capability, msg)
}
