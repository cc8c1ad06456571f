package sdk

import (
	"context"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// A plugin's spans go back to the host with the answer of the call they
// belong to (CallsResponse.trace_spans), and the host exports them with its
// own: a plugin needs no exporter, no collector address and no network,
// and a host that does not trace sends no trace context, so nothing is
// recorded. Spans are recorded only under a sampled context the host sent
// (the sampler never starts a trace of its own), so a span an author
// starts outside a call, or after it answered, is not recorded.

// tracerName names the SDK's instrumentation scope.
const tracerName = "github.com/capgate/capgate/sdk"

// w3c is the only propagation the contract carries.
var w3c = propagation.TraceContext{}

// Span limits for a plugin's spans: each stays small, so a call's spans fit
// the contract's bound (pluginwire.MaxCallSpansBytes).
var spanLimits = sdktrace.SpanLimits{
	AttributeValueLengthLimit:   512,
	AttributeCountLimit:         32,
	EventCountLimit:             16,
	LinkCountLimit:              4,
	AttributePerEventCountLimit: 16,
	AttributePerLinkCountLimit:  4,
}

// tracing records the spans of the calls a plugin serves.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	spans    *callSpans
}

func newTracing() *tracing {
	spans := &callSpans{traces: map[trace.TraceID]*traceSpans{}}
	p := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithSpanProcessor(spans),
		sdktrace.WithRawSpanLimits(spanLimits),
		// The host describes the plugin to the backend; this process's
		// environment says nothing it should trust.
		sdktrace.WithResource(resource.Empty()),
	)
	return &tracing{provider: p, tracer: p.Tracer(tracerName), spans: spans}
}

// start begins the plugin's span for call req under the host's trace
// context, or returns a nil span when the host traces nothing of it.
func (t *tracing) start(ctx context.Context, req *capgatev1.InvokeRequest) (context.Context, trace.Span) {
	if len(req.TraceContext) == 0 {
		return ctx, nil
	}
	ctx = w3c.Extract(ctx, propagation.MapCarrier(req.TraceContext))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ctx, nil
	}
	t.spans.begin(sc.TraceID())
	ctx, span := t.tracer.Start(ctx, "execute_tool "+req.Capability,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", req.Capability),
			attribute.String("rpc.system", "grpc"),
			attribute.String("rpc.service", "capgate.v1.PluginService"),
			attribute.String("rpc.method", "Calls"),
			attribute.String("capgate.call_id", req.CallId),
		))
	return ctx, span
}

// finish ends span with the call's outcome, as out answers it, and puts
// the call's finished spans into out.
func (t *tracing) finish(span trace.Span, out *capgatev1.CallsResponse, log func(msg string, args ...any)) {
	if et := errorType(out); et != "" {
		span.SetAttributes(attribute.String("error.type", et))
		// The text stays in the plugin's log: a handler's error may say
		// more than the trace backend should keep.
		span.SetStatus(codes.Error, "")
	}
	span.End()
	sc := span.SpanContext()
	spans, dropped := t.spans.end(sc.TraceID())
	b, cut := encodeSpans(spans, sc.SpanID())
	out.TraceSpans = b
	if dropped+cut > 0 {
		log("spans dropped: a call's spans are bounded", "dropped", dropped+cut,
			"max_spans", pluginwire.MaxCallSpans, "max_bytes", pluginwire.MaxCallSpansBytes)
	}
}

// errorType is the outcome of a call that did not succeed, as the
// error.type of its span; empty for a success.
func errorType(out *capgatev1.CallsResponse) string {
	if f := out.GetFailure(); f != nil {
		return grpccodes.Code(f.Code).String()
	}
	switch inv := out.GetInvoke(); {
	case inv.GetError() != nil:
		return "tool_error"
	case inv.GetRefusal() != nil:
		return "refused"
	}
	return ""
}

// callSpans keeps the ended spans of the traces whose calls are being
// served, for the answers of those calls. Calls of one trace served at
// once (a plugin nested in its own call) share what they keep.
type callSpans struct {
	mu     sync.Mutex
	traces map[trace.TraceID]*traceSpans
}

type traceSpans struct {
	calls   int // calls of the trace being served
	spans   []sdktrace.ReadOnlySpan
	dropped int
}

func (c *callSpans) begin(id trace.TraceID) {
	c.mu.Lock()
	t := c.traces[id]
	if t == nil {
		t = &traceSpans{}
		c.traces[id] = t
	}
	t.calls++
	c.mu.Unlock()
}

// end takes the spans kept for the trace, and how many it dropped, for a
// call of it that ends.
func (c *callSpans) end(id trace.TraceID) ([]sdktrace.ReadOnlySpan, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.traces[id]
	if t == nil {
		return nil, 0
	}
	spans, dropped := t.spans, t.dropped
	t.spans, t.dropped = nil, 0
	if t.calls--; t.calls == 0 {
		delete(c.traces, id)
	}
	return spans, dropped
}

func (c *callSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps a span of a trace being served, up to the bound; any other
// (one ending after its call answered) has nowhere to go. A call's own
// span, the one child of the host's, ends last and is always kept: the
// rest hang from it.
func (c *callSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.traces[s.SpanContext().TraceID()]
	switch {
	case t == nil:
	case len(t.spans) >= pluginwire.MaxCallSpans-1 && !s.Parent().IsRemote():
		t.dropped++
	default:
		t.spans = append(t.spans, s)
	}
}

func (c *callSpans) Shutdown(context.Context) error   { return nil }
func (c *callSpans) ForceFlush(context.Context) error { return nil }

// spanRoom is what encodeSpans leaves of the bound for the message's own
// framing (the resource, the scopes).
const spanRoom = 1 << 10

// encodeSpans encodes spans as an OTLP TracesData message within the
// contract's bound, the call's own span (first) first, and says how many
// did not fit.
func encodeSpans(spans []sdktrace.ReadOnlySpan, first trace.SpanID) ([]byte, int) {
	if len(spans) == 0 {
		return nil, 0
	}
	// The call's span is the parent of the rest: without it they hang
	// from nothing, so it is the last to be cut.
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int {
		switch {
		case a.SpanContext().SpanID() == first:
			return -1
		case b.SpanContext().SpanID() == first:
			return 1
		}
		return 0
	})
	var (
		scopes []*tracepb.ScopeSpans
		byName = map[string]*tracepb.ScopeSpans{}
		size   int
		kept   int
		cut    int
	)
	for _, s := range spans {
		ps := toProto(s)
		n := proto.Size(ps) + 8 // its tag and length
		if kept == pluginwire.MaxCallSpans || size+n > pluginwire.MaxCallSpansBytes-spanRoom {
			cut++
			continue
		}
		size += n
		kept++
		sc := s.InstrumentationScope()
		key := sc.Name + "\x00" + sc.Version
		ss := byName[key]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: sc.Name, Version: sc.Version}, SchemaUrl: sc.SchemaURL}
			byName[key] = ss
			scopes = append(scopes, ss)
		}
		ss.Spans = append(ss.Spans, ps)
	}
	b, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: scopes}}})
	if err != nil || len(b) > pluginwire.MaxCallSpansBytes {
		return nil, len(spans)
	}
	return b, cut
}

// OTLP's span flags: the W3C flags, and whether the parent is remote.
const (
	flagHasIsRemote = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	flagIsRemote    = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
)

// toProto is span s in OTLP's form.
func toProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	ps := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   tracepb.Span_SpanKind(s.SpanKind()), // both number the kinds alike
		StartTimeUnixNano:      uint64(max(s.StartTime().UnixNano(), 0)),
		EndTimeUnixNano:        uint64(max(s.EndTime().UnixNano(), 0)),
		Attributes:             keyValues(s.Attributes()),
		DroppedAttributesCount: uint32(max(s.DroppedAttributes(), 0)),
		DroppedEventsCount:     uint32(max(s.DroppedEvents(), 0)),
		DroppedLinksCount:      uint32(max(s.DroppedLinks(), 0)),
		Flags:                  uint32(sc.TraceFlags()) | flagHasIsRemote,
		Status:                 spanStatus(s.Status()),
	}
	if parent.IsValid() {
		pid := parent.SpanID()
		ps.ParentSpanId = pid[:]
		if parent.IsRemote() {
			ps.Flags |= flagIsRemote
		}
	}
	for _, e := range s.Events() {
		ps.Events = append(ps.Events, &tracepb.Span_Event{
			TimeUnixNano: uint64(max(e.Time.UnixNano(), 0)), Name: e.Name,
			Attributes: keyValues(e.Attributes), DroppedAttributesCount: uint32(max(e.DroppedAttributeCount, 0)),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		ps.Links = append(ps.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(max(l.DroppedAttributeCount, 0)),
			Flags: uint32(l.SpanContext.TraceFlags()) | flagHasIsRemote,
		})
	}
	return ps
}

func spanStatus(s sdktrace.Status) *tracepb.Status {
	switch s.Code {
	case codes.Error:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: s.Description}
	case codes.Ok:
		return &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	return nil
}

func keyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)}
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue { return anyValue(attribute.BoolValue(b)) })
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(n int64) *commonpb.AnyValue { return anyValue(attribute.Int64Value(n)) })
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue { return anyValue(attribute.Float64Value(f)) })
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) *commonpb.AnyValue { return anyValue(attribute.StringValue(s)) })
	case attribute.SLICE:
		return array(v.AsSlice(), anyValue)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: keyValues(v.AsMap())}}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	}
	return &commonpb.AnyValue{}
}

func array[T any](vs []T, one func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	arr := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, len(vs))}
	for i, v := range vs {
		arr.Values[i] = one(v)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}
}

// injectTrace is the W3C trace context of ctx's span, for a request to the
// host; nil when ctx carries none.
func injectTrace(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	w3c.Inject(ctx, m)
	return m
}
