package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// TestCallSpans: with a tracer, each call is one server span named after
// its route, continuing the trace of the request's traceparent, with the
// tool's name only when it is registered, the status, and error.type the
// step or code of a problem; the gate runs under it. 5xx answers mark the
// span as an error, 4xx ones do not.
func TestCallSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var gates []trace.SpanContext
	f := newFixture(t, Options{}, nil)
	f.h = New(f.d, Options{Tracer: tp.Tracer("test"), Logger: f.h.log,
		Invoke: func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
			gates = append(gates, trace.SpanContextFromContext(ctx))
			return f.d.Invoke(ctx, p, name, args)
		}})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct {
		p                 dispatch.Principal
		name, body, etype string
		status            int
	}{
		{mcptest.Alice, mcptest.Search, `{"query":"x"}`, "", 200},
		{mcptest.Guest, mcptest.Search, `{"query":"x"}`, "permission", 403},
		{mcptest.Alice, mcptest.BookingGet, `{"id":"b-404"}`, "not_found", 422},
		{mcptest.Alice, mcptest.Broken, `{}`, "500", 500},
		{mcptest.Alice, "made.up", `{}`, "404", 404},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+CapabilitiesPath+"/"+c.name, strings.NewReader(c.body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("traceparent", "00-"+traceID+"-"+parent+"-01")
		if rep := f.do(c.p, r); rep.status != c.status {
			t.Fatalf("%s: %d", c.name, rep.status)
		}
	}
	spans := rec.Ended()
	if len(spans) != 5 || len(gates) != 5 {
		t.Fatalf("%d spans, %d gate calls", len(spans), len(gates))
	}
	for i, s := range spans {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if s.Name() != "POST /api/v1/capabilities/{name}" || s.SpanKind() != trace.SpanKindServer ||
			s.Parent().TraceID().String() != traceID || s.Parent().SpanID().String() != parent || gates[i].SpanID() != s.SpanContext().SpanID() {
			t.Errorf("span %d: %s %v parent %v", i, s.Name(), s.SpanKind(), s.Parent())
		}
		if tool, want := attrs["gen_ai.tool.name"], []string{mcptest.Search, mcptest.Search, mcptest.BookingGet, mcptest.Broken, ""}[i]; tool != want {
			t.Errorf("span %d: tool %q, want %q", i, tool, want)
		}
		want := []string{"200", "403", "422", "500", "404"}[i]
		if attrs["http.response.status_code"] != want || attrs["error.type"] != []string{"", "permission", "not_found", "500", "404"}[i] {
			t.Errorf("span %d: %v", i, attrs)
		}
		if (s.Status().Code == codes.Error) != (i == 3) {
			t.Errorf("span %d: status %v", i, s.Status())
		}
	}
}
