package pluginhost

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
)

// Tracing traces the calls the host makes to plugins with OpenTelemetry.
type Tracing struct {
	// Tracer starts the host's span of each call to a plugin.
	Tracer trace.Tracer
	// Export takes the spans a plugin sent back with a traced call, once
	// checked: every one in the call's trace, within the contract's bounds
	// (pluginwire.MaxCallSpans, MaxCallSpansBytes). It must not block.
	Export func(plugin string, spans []*tracepb.ScopeSpans)
}

// w3c is the propagation the plugin contract carries.
var w3c = propagation.TraceContext{}

// spanWarnEvery spaces the warnings about a plugin's spans: a plugin that
// keeps sending bad ones must not flood the log.
const spanWarnEvery = time.Minute

// startCall starts the host's span of call id to the plugin.
func (p *Plugin) startCall(ctx context.Context, t *Tracing, id string, r dispatch.Request) (context.Context, trace.Span) {
	return t.Tracer.Start(ctx, "execute_tool "+r.Capability,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", r.Capability),
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", "capgate.v1.PluginService"),
			attribute.String("rpc.method", "Calls"),
			attribute.String("capgate.plugin", p.spec.Name),
			attribute.String("capgate.call_id", id),
		))
}

// endCall ends the span of a call that ended with err.
func endCall(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("error.type", callErrorType(err)))
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// callErrorType is the kind of a call's failure, as its span's error.type:
// low in cardinality, and nothing of the message.
func callErrorType(err error) string {
	var (
		te      *dispatch.ToolError
		refusal *dispatch.Refusal
	)
	switch {
	case errors.As(err, &refusal):
		return "refused"
	case errors.As(err, &te) && te.Code == dispatch.Unavailable:
		return "unavailable"
	case errors.As(err, &te):
		return "tool_error"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "plugin_error"
}

// invokeTraced sends call id with span's trace context, and hands the
// spans the plugin sent back, once checked, to the exporter.
func (p *Plugin) invokeTraced(ctx context.Context, t *Tracing, span trace.Span, inst *instance, id string, r dispatch.Request) ([]byte, error) {
	tc := propagation.MapCarrier{}
	w3c.Inject(ctx, tc)
	res, raw, err := inst.calls.InvokeTraced(ctx, id, r, tc)
	if len(raw) > 0 {
		p.acceptSpans(t, span.SpanContext(), raw)
	}
	return res, err
}

// acceptSpans exports what a plugin sent back with a call of trace sc: a
// plugin is not trusted to say which trace it is in, so spans of any other
// trace, or sent for a call the host does not record, are dropped, and so
// is all of a message over the contract's bounds.
func (p *Plugin) acceptSpans(t *Tracing, sc trace.SpanContext, raw []byte) {
	if !sc.IsSampled() {
		p.warnSpans("a plugin sent spans for a call the host does not record; dropped")
		return
	}
	if len(raw) > pluginwire.MaxCallSpansBytes {
		p.warnSpans("a plugin sent more span bytes with a call than the contract allows; dropped", "bytes", len(raw), "limit", pluginwire.MaxCallSpansBytes)
		return
	}
	var td tracepb.TracesData
	if err := proto.Unmarshal(raw, &td); err != nil {
		p.warnSpans("a plugin sent spans that are not OTLP; dropped", "err", err)
		return
	}
	tid := sc.TraceID()
	var (
		out      []*tracepb.ScopeSpans
		kept     int
		refused  int
		overflow int
	)
	for _, rs := range td.ResourceSpans {
		for _, ss := range rs.GetScopeSpans() {
			var spans []*tracepb.Span
			for _, s := range ss.GetSpans() {
				switch {
				case len(s.TraceId) != len(tid) || trace.TraceID(s.TraceId) != tid || len(s.SpanId) != 8:
					refused++
				case kept == pluginwire.MaxCallSpans:
					overflow++
				default:
					spans = append(spans, s)
					kept++
				}
			}
			if len(spans) > 0 {
				out = append(out, &tracepb.ScopeSpans{Scope: ss.Scope, SchemaUrl: ss.SchemaUrl, Spans: spans})
			}
		}
	}
	if refused > 0 {
		p.warnSpans("a plugin sent spans outside the trace of its call; dropped", "spans", refused)
	}
	if overflow > 0 {
		p.warnSpans("a plugin sent more spans with a call than the contract allows; the rest dropped", "spans", overflow, "limit", pluginwire.MaxCallSpans)
	}
	if len(out) > 0 {
		t.Export(p.spec.Name, out)
	}
}

// warnSpans logs a problem with a plugin's spans, at most once every
// spanWarnEvery per plugin.
func (p *Plugin) warnSpans(msg string, args ...any) {
	now := time.Now().UnixNano()
	if last := p.spanWarned.Load(); now-last < int64(spanWarnEvery) || !p.spanWarned.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn(msg, args...)
}

// nestedParent is the parent of the gate's span for a nested call made
// while serving call c: the plugin's span that made it, as the request
// says, when it is in c's trace, or else c's own span. A plugin cannot
// put a nested call into a trace of its choosing.
func nestedParent(ctx context.Context, c inflightCall, traceContext map[string]string) context.Context {
	if !c.span.IsValid() {
		return ctx
	}
	if len(traceContext) > 0 {
		if sc := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(traceContext))); sc.IsValid() && sc.TraceID() == c.span.TraceID() {
			return trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return trace.ContextWithSpanContext(ctx, c.span)
}
