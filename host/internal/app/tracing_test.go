package app_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/host/internal/config"
)

// receiver is an OTLP trace receiver, over gRPC or HTTP, keeping what it
// is sent as a collector would get it.
type receiver struct {
	collectorpb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []span
	headers []string // the test header of each export
}

// span is one received span with the resource it came under.
type span struct {
	*tracepb.Span
	service string
}

func (r *receiver) keep(req *collectorpb.ExportTraceServiceRequest, header string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.headers = append(r.headers, header)
	for _, rs := range req.ResourceSpans {
		service := attrOf(rs.GetResource().GetAttributes(), "service.name")
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.spans = append(r.spans, span{Span: s, service: service})
			}
		}
	}
}

func (r *receiver) Export(ctx context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	r.keep(req, strings.Join(md.Get("x-capgate-test"), ","))
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	var msg collectorpb.ExportTraceServiceRequest
	if err != nil || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &msg) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
		return
	}
	r.keep(&msg, req.Header.Get("X-Capgate-Test"))
	b, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func (r *receiver) received() ([]span, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]span(nil), r.spans...), append([]string(nil), r.headers...)
}

// grpcReceiver serves a receiver over OTLP/gRPC on a port of its own.
func grpcReceiver(t *testing.T) (*receiver, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r, ln.Addr().String()
}

func attrOf(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			if v, ok := kv.Value.GetValue().(*commonpb.AnyValue_IntValue); ok {
				return fmt.Sprint(v.IntValue)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// tracedConfig serves the relay and hello plugins with tracing as given
// (YAML under tracing:); "" leaves tracing off.
func tracedConfig(t *testing.T, tracing string) *config.Config {
	t.Helper()
	section := ""
	if tracing != "" {
		section = "tracing:\n" + tracing
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: test-both-1, role: both, scope: read}
  - {token: test-guest-1, role: guest, scope: read}
roles: {both: [relay.use, hello.greet], guest: []}
packs: {relay: true, hello: true}
plugins: [{name: relay, path: %s}, {name: hello, path: %s}]
%s`, t.TempDir(), relayBin, helloBin, section)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// traced sends a tools/call whose params._meta carries meta (a
// traceparent, or nothing) and whose HTTP request carries header, and
// returns the raw answer.
func traced(t *testing.T, addr, token, tool string, args any, meta, header string) string {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if meta != "" {
		params["_meta"] = map[string]any{"traceparent": meta, "tracestate": "vendor=1"}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if header != "" {
		req.Header.Set("traceparent", header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// W3C trace contexts of the callers, each its own trace.
const (
	metaTrace   = "0af7651916cd43dd8448eb211c80319c"
	metaSpan    = "b7ad6b7169203331"
	headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	headerSpan  = "00f067aa0ba902b7"
	aloneTrace  = "11111111111111111111111111111111"
	aloneSpan   = "2222222222222222"
	guestTrace  = "33333333333333333333333333333333"
)

func traceparent(trace, span string) string { return "00-" + trace + "-" + span + "-01" }

// tree indexes one trace's spans.
type tree struct {
	t      *testing.T
	spans  []span
	byID   map[string]span
	byName map[string][]span
}

func treeOf(t *testing.T, spans []span) tree {
	tr := tree{t: t, spans: spans, byID: map[string]span{}, byName: map[string][]span{}}
	for _, s := range spans {
		tr.byID[hex.EncodeToString(s.SpanId)] = s
		key := s.Name + "/" + s.Kind.String() + "/" + s.service
		tr.byName[key] = append(tr.byName[key], s)
	}
	return tr
}

// one is the only span named name, of kind and service.
func (tr tree) one(name string, kind tracepb.Span_SpanKind, service string) span {
	tr.t.Helper()
	got := tr.byName[name+"/"+kind.String()+"/"+service]
	if len(got) != 1 {
		var have []string
		for k := range tr.byName {
			have = append(have, k)
		}
		tr.t.Fatalf("%d spans %q (%s, %s); the trace has %v", len(got), name, kind, service, have)
	}
	return got[0]
}

// childOf checks that child's parent is parent.
func (tr tree) childOf(child, parent span) {
	tr.t.Helper()
	if !bytes.Equal(child.ParentSpanId, parent.SpanId) {
		tr.t.Errorf("%s (%s) hangs from %x; want %s (%s) %x", child.Name, child.service, child.ParentSpanId, parent.Name, parent.service, parent.SpanId)
	}
}

func wantAttrs(t *testing.T, s span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attrOf(s.Attributes, k); got != v {
			t.Errorf("%s (%s): %s = %q; want %q", s.Name, s.service, k, got, v)
		}
	}
}

// byTrace groups spans by trace id.
func byTrace(spans []span) map[string][]span {
	out := map[string][]span{}
	for _, s := range spans {
		id := hex.EncodeToString(s.TraceId)
		out[id] = append(out[id], s)
	}
	return out
}

// TestOneToolsCallIsOneTrace: a tools/call is one connected trace across
// the host and its plugins, received by a collector over OTLP/gRPC: the
// request's span under the caller's _meta trace context (the transport's
// linked), the gate's decision under it, the call to the plugin under
// that, and the plugin's own span under the call, again for the
// capability the plugin calls through the host; a request with the trace
// context in its headers alone continues that one; a refusal ends at the
// gate. The export headers reach the collector and never the log.
func TestOneToolsCallIsOneTrace(t *testing.T) {
	recv, addr := grpcReceiver(t)
	cfg := tracedConfig(t, fmt.Sprintf("  otlp_endpoint: http://%s\n  otlp_protocol: grpc\n  service_name: capgate-test\n  headers: {x-capgate-test: s3cret-value}\n", addr))
	sink := &logSink{}
	_, host, stop := serveApp(t, cfg, sink)

	relayed := traced(t, host, "test-both-1", "relay.call", map[string]any{"capability": "hello.greet", "args": map[string]any{"name": "trace"}},
		traceparent(metaTrace, metaSpan), traceparent(headerTrace, headerSpan))
	if !strings.Contains(relayed, `hello, trace`) {
		t.Fatalf("relay.call = %s", relayed)
	}
	if alone := traced(t, host, "test-both-1", "hello.greet", map[string]any{"name": "h"}, "", traceparent(aloneTrace, aloneSpan)); !strings.Contains(alone, "hello, h") {
		t.Fatalf("hello.greet = %s", alone)
	}
	if refused := traced(t, host, "test-guest-1", "hello.greet", map[string]any{"name": "g"}, traceparent(guestTrace, aloneSpan), ""); !strings.Contains(refused, `-32003`) {
		t.Fatalf("the guest's call = %s", refused)
	}
	stop() // sends every span still held

	spans, headers := recv.received()
	traces := byTrace(spans)
	if len(traces) != 3 || traces[metaTrace] == nil || traces[aloneTrace] == nil || traces[guestTrace] == nil {
		ids := []string{}
		for id := range traces {
			ids = append(ids, id)
		}
		t.Fatalf("spans in traces %v; want the callers' %s, %s and %s only", ids, metaTrace, aloneTrace, guestTrace)
	}
	for _, h := range headers {
		if h != "s3cret-value" {
			t.Errorf("an export carried x-capgate-test %q; want the configured header", h)
		}
	}
	if strings.Contains(sink.String(), "s3cret-value") {
		t.Error("the log holds an export header's value")
	}

	t.Run("meta", func(t *testing.T) {
		tr := treeOf(t, traces[metaTrace])
		if len(tr.spans) != 7 {
			t.Errorf("%d spans; want 7 (request, 2 gates, 2 plugin calls, 2 plugin spans)", len(tr.spans))
		}
		req := tr.one("tools/call relay.call", tracepb.Span_SPAN_KIND_SERVER, "capgate-test")
		if hex.EncodeToString(req.ParentSpanId) != metaSpan {
			t.Errorf("the request hangs from %x; want the _meta's %s", req.ParentSpanId, metaSpan)
		}
		if len(req.Links) != 1 || hex.EncodeToString(req.Links[0].TraceId) != headerTrace || hex.EncodeToString(req.Links[0].SpanId) != headerSpan {
			t.Errorf("the request's links %v; want the headers' trace context", req.Links)
		}
		if req.TraceState != "vendor=1" {
			t.Errorf("tracestate %q; want the _meta's", req.TraceState)
		}
		wantAttrs(t, req, map[string]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": "relay.call", "gen_ai.operation.name": "execute_tool",
			"mcp.protocol.version": "2025-11-25", "jsonrpc.request.id": "call-1", "network.transport": "tcp", "error.type": "",
		})
		gate := tr.one("gate relay.call", tracepb.Span_SPAN_KIND_INTERNAL, "capgate-test")
		tr.childOf(gate, req)
		wantAttrs(t, gate, map[string]string{"capgate.gate.decision": "admitted", "capgate.gate.outcome": "ok", "capgate.capability": "relay.call", "capgate.principal.role": "both"})
		client := tr.one("execute_tool relay.call", tracepb.Span_SPAN_KIND_CLIENT, "capgate-test")
		tr.childOf(client, gate)
		wantAttrs(t, client, map[string]string{"capgate.plugin": "relay", "gen_ai.tool.name": "relay.call"})
		server := tr.one("execute_tool relay.call", tracepb.Span_SPAN_KIND_SERVER, "capgate-test-plugin-relay")
		tr.childOf(server, client)
		wantAttrs(t, server, map[string]string{"capgate.call_id": attrOf(client.Attributes, "capgate.call_id")})
		// The nested call, from inside the plugin, through the gate again.
		nested := tr.one("gate hello.greet", tracepb.Span_SPAN_KIND_INTERNAL, "capgate-test")
		tr.childOf(nested, server)
		hello := tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_CLIENT, "capgate-test")
		tr.childOf(hello, nested)
		tr.childOf(tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_SERVER, "capgate-test-plugin-hello"), hello)
	})
	t.Run("header", func(t *testing.T) {
		tr := treeOf(t, traces[aloneTrace])
		req := tr.one("tools/call hello.greet", tracepb.Span_SPAN_KIND_SERVER, "capgate-test")
		if hex.EncodeToString(req.ParentSpanId) != aloneSpan || len(req.Links) != 0 {
			t.Errorf("the request hangs from %x with links %v; want the headers' %s and no link", req.ParentSpanId, req.Links, aloneSpan)
		}
		gate := tr.one("gate hello.greet", tracepb.Span_SPAN_KIND_INTERNAL, "capgate-test")
		tr.childOf(gate, req)
		client := tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_CLIENT, "capgate-test")
		tr.childOf(client, gate)
		tr.childOf(tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_SERVER, "capgate-test-plugin-hello"), client)
		if len(tr.spans) != 4 {
			t.Errorf("%d spans; want 4", len(tr.spans))
		}
	})
	t.Run("refused", func(t *testing.T) {
		tr := treeOf(t, traces[guestTrace])
		req := tr.one("tools/call hello.greet", tracepb.Span_SPAN_KIND_SERVER, "capgate-test")
		wantAttrs(t, req, map[string]string{"error.type": "-32003", "rpc.response.status_code": "-32003"})
		if req.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || !strings.Contains(req.Status.GetMessage(), "does not hold permission") {
			t.Errorf("status %v; want an error with the JSON-RPC error's message", req.Status)
		}
		gate := tr.one("gate hello.greet", tracepb.Span_SPAN_KIND_INTERNAL, "capgate-test")
		tr.childOf(gate, req)
		wantAttrs(t, gate, map[string]string{"capgate.gate.decision": "refused", "capgate.gate.step": "permission"})
		if len(tr.spans) != 2 {
			t.Errorf("%d spans; a refused call reaches no plugin", len(tr.spans))
		}
	})
}

// TestTracesOverOTLPHTTP: over http/protobuf, to a URL without a path, the
// spans of a call are posted to /v1/traces, the plugin's with the host's,
// with the configured headers.
func TestTracesOverOTLPHTTP(t *testing.T) {
	recv := &receiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	cfg := tracedConfig(t, fmt.Sprintf("  otlp_endpoint: %s\n  headers: {X-Capgate-Test: over-http}\n", srv.URL))
	_, host, stop := serveApp(t, cfg, nil)
	if out := traced(t, host, "test-both-1", "hello.greet", map[string]any{"name": "h"}, traceparent(aloneTrace, aloneSpan), ""); !strings.Contains(out, "hello, h") {
		t.Fatalf("hello.greet = %s", out)
	}
	stop()
	spans, headers := recv.received()
	tr := treeOf(t, byTrace(spans)[aloneTrace])
	tr.childOf(tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_SERVER, "capgate-plugin-hello"),
		tr.one("execute_tool hello.greet", tracepb.Span_SPAN_KIND_CLIENT, "capgate"))
	if len(headers) == 0 || headers[0] != "over-http" {
		t.Errorf("export headers %v; want the configured one", headers)
	}
}

// TestTracingOffExportsNothing: with tracing.otlp_endpoint unset the host
// traces nothing, whatever a caller sends and whatever OpenTelemetry's own
// environment variables say.
func TestTracingOffExportsNothing(t *testing.T) {
	recv, addr := grpcReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	_, host, stop := serveApp(t, tracedConfig(t, ""), nil)
	relayed := traced(t, host, "test-both-1", "relay.call", map[string]any{"capability": "hello.greet", "args": map[string]any{"name": "off"}},
		traceparent(metaTrace, metaSpan), traceparent(headerTrace, headerSpan))
	if !strings.Contains(relayed, "hello, off") {
		t.Fatalf("relay.call = %s", relayed)
	}
	stop()
	if spans, _ := recv.received(); len(spans) != 0 {
		t.Errorf("%d spans exported with tracing off", len(spans))
	}
}

// TestHeldCallSpan: a call held for a human is traced to the gate, whose
// span says it was held and under which approval, and no further: nothing
// ran in the plugin. A request without any trace context starts a trace.
func TestHeldCallSpan(t *testing.T) {
	recv, addr := grpcReceiver(t)
	cfg := approvalsConfig(t, t.TempDir(), "")
	cfg.Tracing = config.Tracing{OTLPEndpoint: "http://" + addr, OTLPProtocol: config.OTLPGRPC, SampleRatio: 1, ServiceName: "capgate"}
	_, host, stop := serveApp(t, cfg, nil)
	out, msg := mcpTool(t, host, "govern-token-1", "booking.cancel", aliceBooking(t, host, "govern-token-1"))
	if msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("booking.cancel: %v %q; want it held", out, msg)
	}
	stop()
	spans, _ := recv.received()
	var gates []span
	for _, s := range spans {
		switch {
		case s.Name == "gate booking.cancel":
			gates = append(gates, s)
		case s.Name == "execute_tool booking.cancel":
			t.Errorf("a held call reached the plugin: %s (%s)", s.Name, s.service)
		}
	}
	if len(gates) != 1 {
		t.Fatalf("%d gate spans for booking.cancel; want 1", len(gates))
	}
	wantAttrs(t, gates[0], map[string]string{"capgate.gate.decision": "admitted", "capgate.gate.outcome": "held", "capgate.approval_id": out["approval_id"].(string)})
	req := treeOf(t, byTrace(spans)[hex.EncodeToString(gates[0].TraceId)]).one("tools/call booking.cancel", tracepb.Span_SPAN_KIND_SERVER, "capgate")
	if len(req.ParentSpanId) != 0 {
		t.Errorf("the request hangs from %x; a request with no trace context starts one", req.ParentSpanId)
	}
}
