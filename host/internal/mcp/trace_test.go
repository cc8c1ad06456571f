package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

const (
	tMetaTrace   = "0af7651916cd43dd8448eb211c80319c"
	tMetaSpan    = "b7ad6b7169203331"
	tHeaderTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	tHeaderSpan  = "00f067aa0ba902b7"
)

// tracedFixture is a handler tracing into a recorder, with the real
// OpenTelemetry SDK; gates records the span each gate call ran under.
func tracedFixture(t *testing.T) (*fixture, *tracetest.SpanRecorder, *[]trace.SpanContext) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var gates []trace.SpanContext
	f := newFixture(t, Options{})
	f.h = New(f.platform.Dispatcher, Options{Version: "1.2.3-test", Logger: slogTo(f.logs), Tracing: &Tracing{
		Tracer: tp.Tracer("test"),
		Invoke: func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
			gates = append(gates, trace.SpanContextFromContext(ctx))
			return f.platform.Dispatcher.Invoke(ctx, p, name, args)
		},
	}})
	return f, rec, &gates
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.Emit()
	}
	return out
}

// sendTraced posts m with a traceparent header when header is set.
func (f *fixture) sendTraced(p dispatch.Principal, ver string, m rpc, header string) reply {
	f.t.Helper()
	h := m.headers(ver)
	if header != "" {
		h.Set("traceparent", header)
	}
	return f.do(p, http.MethodPost, h, m.encode(ver))
}

func getBooking(id any, meta map[string]any) rpc {
	params := map[string]any{"name": mcptest.BookingGet, "arguments": map[string]any{"id": "b-1"}}
	if meta != nil {
		params["_meta"] = meta
	}
	return rpc{method: "tools/call", id: id, params: params}
}

// TestRequestSpanParent: the request's span continues the trace context of
// its _meta, with the headers' linked, at every protocol version; without
// one in _meta (or with one that is malformed or too long to be one) it
// continues the headers'; with neither it starts a trace. The gate runs
// under the request's span.
func TestRequestSpanParent(t *testing.T) {
	header := "00-" + tHeaderTrace + "-" + tHeaderSpan + "-01"
	metaTP := map[string]any{"traceparent": "00-" + tMetaTrace + "-" + tMetaSpan + "-01", "tracestate": "k=v"}
	for _, tc := range []struct {
		name        string
		ver         string
		meta        map[string]any
		header      string
		trace, span string // the parent; "" for none
		link        bool
	}{
		{"meta", Version20251125, metaTP, header, tMetaTrace, tMetaSpan, true},
		{"meta at 2026-07-28", Version20260728, metaTP, "", tMetaTrace, tMetaSpan, false},
		{"meta alone", Version20250326, metaTP, "", tMetaTrace, tMetaSpan, false},
		{"header", Version20251125, nil, header, tHeaderTrace, tHeaderSpan, false},
		{"malformed meta", Version20251125, map[string]any{"traceparent": "00-xyz-abc-01"}, header, tHeaderTrace, tHeaderSpan, false},
		{"meta not a string", Version20251125, map[string]any{"traceparent": 7}, header, tHeaderTrace, tHeaderSpan, false},
		{"oversized meta", Version20251125, map[string]any{"traceparent": "00-" + tMetaTrace + "-" + tMetaSpan + "-01" + strings.Repeat(" ", maxTraceparent)}, header, tHeaderTrace, tHeaderSpan, false},
		{"none", Version20251125, nil, "", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, rec, gates := tracedFixture(t)
			r := f.sendTraced(mcptest.Alice, tc.ver, getBooking(7, tc.meta), tc.header)
			if r.status != http.StatusOK || r.msg["error"] != nil {
				t.Fatalf("call answered %d %s", r.status, r.raw)
			}
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans; want 1", len(spans))
			}
			s := spans[0]
			parent := s.Parent()
			switch {
			case tc.trace == "" && parent.IsValid():
				t.Errorf("parent %v; want none", parent)
			case tc.trace != "" && (parent.TraceID().String() != tc.trace || parent.SpanID().String() != tc.span || !parent.IsRemote()):
				t.Errorf("parent %s/%s; want remote %s/%s", parent.TraceID(), parent.SpanID(), tc.trace, tc.span)
			}
			if tc.trace != "" && s.SpanContext().TraceID().String() != tc.trace {
				t.Errorf("trace %s; want %s", s.SpanContext().TraceID(), tc.trace)
			}
			if links := s.Links(); tc.link != (len(links) == 1) || (tc.link && links[0].SpanContext.SpanID().String() != tHeaderSpan) {
				t.Errorf("links %v; want the headers' only when _meta is the parent", links)
			}
			if tc.meta != nil && tc.trace == tMetaTrace && s.SpanContext().TraceState().Get("k") != "v" {
				t.Errorf("tracestate %q; want the _meta's", s.SpanContext().TraceState())
			}
			if len(*gates) != 1 || (*gates)[0].SpanID() != s.SpanContext().SpanID() {
				t.Errorf("the gate ran under %v; want the request's span %s", *gates, s.SpanContext().SpanID())
			}
		})
	}
}

// TestRequestSpanAttributes: a span is named and described after the MCP
// conventions; a failure names its JSON-RPC code and message; a tool a
// caller made up is never named.
func TestRequestSpanAttributes(t *testing.T) {
	f, rec, _ := tracedFixture(t)
	f.send(mcptest.Alice, Version20251125, getBooking("req-1", nil))
	f.send(mcptest.Bob, Version20251125, getBooking(2, nil))
	f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 3, params: map[string]any{"name": "made." + strings.Repeat("up", 20)}})
	f.send(mcptest.Alice, Version20251125, rpc{method: "tools/list", id: 4})
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans; want 4", len(spans))
	}
	for i, want := range []struct {
		name   string
		attrs  map[string]string
		status codes.Code
		msg    string
	}{
		{"tools/call " + mcptest.BookingGet, map[string]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": mcptest.BookingGet, "gen_ai.operation.name": "execute_tool",
			"jsonrpc.request.id": "req-1", "mcp.protocol.version": Version20251125, "network.transport": "tcp",
			"network.protocol.name": "http", "network.protocol.version": "1.1", "client.address": "192.0.2.1", "client.port": "1234",
		}, codes.Unset, ""},
		{"tools/call " + mcptest.BookingGet, map[string]string{"jsonrpc.request.id": "2", "error.type": "-32003", "rpc.response.status_code": "-32003"}, codes.Error, "forbidden: "},
		{"tools/call", map[string]string{"gen_ai.tool.name": "", "error.type": "-32602"}, codes.Error, "invalid params: unknown tool"},
		{"tools/list", map[string]string{"mcp.method.name": "tools/list", "gen_ai.operation.name": "", "error.type": ""}, codes.Unset, ""},
	} {
		s := spans[i]
		if s.Name() != want.name || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %q (%s); want %q (server)", i, s.Name(), s.SpanKind(), want.name)
		}
		got := attrs(s)
		for k, v := range want.attrs {
			if got[k] != v {
				t.Errorf("span %d %s = %q; want %q", i, k, got[k], v)
			}
		}
		if s.Status().Code != want.status || !strings.HasPrefix(s.Status().Description, want.msg) {
			t.Errorf("span %d status %v %q; want %v %q…", i, s.Status().Code, s.Status().Description, want.status, want.msg)
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "madeup") {
				t.Errorf("span %d keeps the made-up name in %s", i, kv.Key)
			}
		}
	}
}

// TestBatchSpans: each request of a batch is a span of its own, under the
// headers' trace context; a notification is none.
func TestBatchSpans(t *testing.T) {
	f, rec, _ := tracedFixture(t)
	body := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`
	h := rpc{}.headers(Version20250326)
	h.Set("traceparent", "00-"+tHeaderTrace+"-"+tHeaderSpan+"-01")
	if r := f.do(mcptest.Alice, http.MethodPost, h, []byte(body)); r.status != http.StatusOK {
		t.Fatalf("batch answered %d %s", r.status, r.raw)
	}
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "ping" || spans[1].Name() != "tools/list" {
		t.Fatalf("spans %v; want ping and tools/list", spans)
	}
	for _, s := range spans {
		if s.Parent().SpanID().String() != tHeaderSpan {
			t.Errorf("%s hangs from %s; want the headers' %s", s.Name(), s.Parent().SpanID(), tHeaderSpan)
		}
	}
}

// TestNoTracerNoSpans: Tracing without a tracer traces nothing, and the
// gate is called directly.
func TestNoTracerNoSpans(t *testing.T) {
	called := false
	f := newFixture(t, Options{Tracing: &Tracing{Invoke: func(context.Context, dispatch.Principal, string, json.RawMessage) (json.RawMessage, error) {
		called = true
		return nil, nil
	}}})
	if r := f.send(mcptest.Alice, Version20251125, getBooking(1, nil)); r.msg["error"] != nil {
		t.Fatalf("call: %s", r.raw)
	}
	if called || f.h.tracing != nil {
		t.Error("a Tracing without a tracer was used")
	}
}
