package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
)

// tracerName names the host's instrumentation scope.
const tracerName = "github.com/capgate/capgate/host"

// tracingDrain bounds how long a stopping host spends sending the spans it
// still holds.
const tracingDrain = 5 * time.Second

// Bounds on the plugins' spans waiting to be sent: past them a plugin's
// spans are dropped rather than held, so a collector that is down costs
// the host a bounded amount of memory.
const (
	pluginSpanQueue = 1024 // calls' worth of spans
	pluginSpanBatch = 64   // calls' worth sent at once
)

// tracing is the host's OpenTelemetry tracing, exporting its own spans and
// the ones its plugins send back to one collector.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	client   otlptrace.Client
	service  string
	log      *slog.Logger

	mu      sync.RWMutex // guards closed against export
	closed  bool
	queue   chan *tracepb.ResourceSpans
	done    chan struct{}
	dropped atomic.Int64
	warned  atomic.Int64 // when a dropped span was last logged (unix nanoseconds)
}

// openTracing builds the tracing cfg asks for, or nil when it is off. It
// connects to nothing yet: a collector that is down costs spans, never
// the host's start.
func openTracing(ctx context.Context, cfg *config.Config, version string, log *slog.Logger) (*tracing, error) {
	tc := cfg.Tracing
	if tc.OTLPEndpoint == "" {
		return nil, nil
	}
	res, err := resource.New(ctx, resource.WithAttributes(
		attribute.String("service.name", tc.ServiceName),
		attribute.String("service.version", version),
		attribute.String("service.instance.id", instanceID()),
	))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	client, err := otlpClient(tc)
	if err != nil {
		return nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
	}
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
	}
	limits := sdktrace.NewSpanLimits()
	// Some values are a caller's (a resource URI, a request id): bounded.
	limits.AttributeValueLengthLimit = 512
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.SampleRatio))),
		sdktrace.WithRawSpanLimits(limits),
	)
	t := &tracing{
		provider: p, tracer: p.Tracer(tracerName), client: client, service: tc.ServiceName, log: log,
		queue: make(chan *tracepb.ResourceSpans, pluginSpanQueue), done: make(chan struct{}),
	}
	// Export failures are reported through OpenTelemetry's global handler,
	// which would otherwise print them unstructured; a collector that is
	// down fails every batch, so they are spaced out.
	var lastErr atomic.Int64
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		now := time.Now().UnixNano()
		if last := lastErr.Load(); now-last >= int64(time.Minute) && lastErr.CompareAndSwap(last, now) {
			log.Warn("tracing: spans could not be exported", "endpoint", tc.OTLPEndpoint, "err", err)
		}
	}))
	go t.sendPluginSpans()
	log.Info("tracing on", "endpoint", tc.OTLPEndpoint, "protocol", tc.OTLPProtocol, "sample_ratio", tc.SampleRatio, "service_name", tc.ServiceName)
	return t, nil
}

// otlpClient is the OTLP client cfg names. The headers go to the client
// and nowhere else.
func otlpClient(tc config.Tracing) (otlptrace.Client, error) {
	u, err := url.Parse(tc.OTLPEndpoint)
	if err != nil {
		return nil, errors.New("not a URL") // config refuses it first
	}
	if tc.OTLPProtocol == config.OTLPGRPC {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(tc.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(tc.Headers))
		}
		return otlptracegrpc.NewClient(opts...), nil
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
	if len(tc.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(tc.Headers))
	}
	return otlptracehttp.NewClient(opts...), nil
}

// instanceID tells this process's spans from another replica's.
func instanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// forPlugins is how the plugin host traces its calls; nil when tracing is
// off.
func (t *tracing) forPlugins() *pluginhost.Tracing {
	if t == nil {
		return nil
	}
	return &pluginhost.Tracing{Tracer: t.tracer, Export: t.exportPluginSpans}
}

// forMCP is how the MCP adapter traces its requests, the gate's decisions
// on d included; nil when tracing is off.
func (t *tracing) forMCP(d *dispatch.Dispatcher) *mcp.Tracing {
	if t == nil {
		return nil
	}
	return &mcp.Tracing{Tracer: t.tracer, Invoke: tracedGate{d: d, tracer: t.tracer}.Invoke}
}

// gate is the gate plugins' nested calls go through: d, with each decision
// in a span when tracing is on.
func (t *tracing) gate(d *dispatch.Dispatcher) pluginhost.Gate {
	if t == nil {
		return d
	}
	return tracedGate{d: d, tracer: t.tracer}
}

// approver is a, telling the gate's span when a call is held.
func (t *tracing) approver(a dispatch.Approver) dispatch.Approver {
	if t == nil {
		return a
	}
	return heldApprover{a}
}

// exportPluginSpans queues the spans a plugin sent with one call, under a
// resource naming the plugin. It never blocks a call: spans that find the
// queue full are dropped, and counted.
func (t *tracing) exportPluginSpans(plugin string, spans []*tracepb.ScopeSpans) {
	rs := &tracepb.ResourceSpans{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "service.name", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: t.service + "-plugin-" + plugin}}},
			{Key: "capgate.plugin", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: plugin}}},
		}},
		ScopeSpans: spans,
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return
	}
	select {
	case t.queue <- rs:
	default:
		n := t.dropped.Add(1)
		now := time.Now().UnixNano()
		if last := t.warned.Load(); now-last >= int64(time.Minute) && t.warned.CompareAndSwap(last, now) {
			t.log.Warn("tracing: plugin spans dropped, the collector does not keep up", "calls_dropped", n)
		}
	}
}

// sendPluginSpans sends the queued plugin spans until the queue closes:
// what queued while one batch was sent goes in the next.
func (t *tracing) sendPluginSpans() {
	defer close(t.done)
	for rs := range t.queue {
		batch := []*tracepb.ResourceSpans{rs}
	more:
		for len(batch) < pluginSpanBatch {
			select {
			case rs, ok := <-t.queue:
				if !ok {
					break more
				}
				batch = append(batch, rs)
			default:
				break more
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := t.client.UploadTraces(ctx, batch); err != nil {
			otel.Handle(err)
		}
		cancel()
	}
}

// shutdown sends what is left, the plugins' spans first, while the client
// is still open, then closes the exporter. Call it once the plugins have
// stopped.
func (t *tracing) shutdown() {
	if t == nil {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.queue)
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), tracingDrain)
	defer cancel()
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		t.log.Warn("tracing: the last spans could not be exported", "err", err)
	}
}

// tracedGate is the gate with each decision in a span of its own: the
// decision, the refusing step and how an admitted call ended, after the
// gate's own terms, which the metrics count too. The gate stays
// protocol-neutral and knows nothing of it.
type tracedGate struct {
	d      *dispatch.Dispatcher
	tracer trace.Tracer
}

type gateNoteKey struct{}

// gateNote is what the gate's span learns from inside the decision.
type gateNote struct{ approvalID string }

func (g tracedGate) Invoke(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
	spanName := "gate"
	attrs := []attribute.KeyValue{attribute.String("capgate.principal.role", p.Role), attribute.String("capgate.principal.scope", string(p.Scope))}
	// Only a registered name: a caller's made-up one is not kept.
	if e, ok := g.d.Registry().Lookup(name); ok {
		spanName += " " + e.Name
		attrs = append(attrs, attribute.String("capgate.capability", e.Name), attribute.String("capgate.pack", e.Pack),
			attribute.String("capgate.plugin", e.Plugin))
	}
	note := &gateNote{}
	ctx, span := g.tracer.Start(context.WithValue(ctx, gateNoteKey{}, note), spanName, trace.WithAttributes(attrs...))
	res, err := g.d.Invoke(ctx, p, name, args)
	decision, step, outcome := gateOutcome(err, note)
	span.SetAttributes(attribute.String("capgate.gate.decision", decision))
	if step != "" {
		span.SetAttributes(attribute.String("capgate.gate.step", step))
	}
	if outcome != "" {
		span.SetAttributes(attribute.String("capgate.gate.outcome", outcome))
	}
	if note.approvalID != "" {
		span.SetAttributes(attribute.String("capgate.approval_id", note.approvalID))
	}
	if outcome == string(dispatch.OutcomeInternalError) {
		span.SetAttributes(attribute.String("error.type", outcome))
		span.SetStatus(codes.Error, "")
	}
	span.End()
	return res, err
}

// gateOutcome is a call's decision, refusing step and outcome, as the
// gate's metrics name them.
func gateOutcome(err error, note *gateNote) (decision, step, outcome string) {
	var (
		r  *dispatch.Refusal
		te *dispatch.ToolError
		nc *dispatch.NeedsConfirmation
	)
	switch {
	case err == nil && note.approvalID != "":
		return "admitted", "", string(dispatch.OutcomeHeld)
	case err == nil:
		return "admitted", "", string(dispatch.OutcomeOK)
	case errors.As(err, &r):
		return "refused", string(r.Step), ""
	case errors.Is(err, dispatch.ErrUnknownCapability):
		return "refused", string(dispatch.StepUnknown), ""
	case errors.As(err, &nc):
		return "admitted", "", string(dispatch.OutcomeAsked)
	case errors.As(err, &te):
		return "admitted", "", string(dispatch.OutcomeToolError)
	}
	return "admitted", "", string(dispatch.OutcomeInternalError)
}

// heldApprover tells the gate's span that the call it decides was held,
// and under which approval.
type heldApprover struct{ dispatch.Approver }

func (a heldApprover) Hold(ctx context.Context, h dispatch.Held) (dispatch.Holding, error) {
	out, err := a.Approver.Hold(ctx, h)
	if note, ok := ctx.Value(gateNoteKey{}).(*gateNote); ok && err == nil {
		note.approvalID = out.ApprovalID
	}
	return out, err
}
