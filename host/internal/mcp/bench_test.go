package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// nopWriter is a ResponseWriter that keeps nothing, so the benchmarks
// measure the adapter and not a recorder.
type nopWriter struct {
	h      http.Header
	status int
}

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) WriteHeader(s int)           { w.status = s }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkServe measures the adapter alone on the hot methods, with a
// gate whose one capability echoes its arguments. BenchmarkInvoke below is
// the gate's own share, to subtract.
func BenchmarkServe(b *testing.B) {
	d := mcptest.NewEcho()
	h := New(d, Options{Logger: slogTo(io.Discard)})
	// As the host serves: with the relay that lets a call before
	// 2026-07-28 ask its client on its stream, which every such call is
	// told it may.
	relay, err := answers.New(answers.Options{})
	if err != nil {
		b.Fatal(err)
	}
	asking := New(d, Options{Logger: slogTo(io.Discard), Answers: relay})
	call := rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.EchoName, "arguments": map[string]any{"query": "widget"}}}
	list := rpc{method: "tools/list", id: 1}
	cases := []struct {
		name string
		h    *Handler
		ver  string
		msg  rpc
	}{
		{"tools/call@2025-06-18", h, Version20250618, call},
		{"tools/call@2025-06-18+answers", asking, Version20250618, call},
		{"tools/call@2026-07-28", h, Version20260728, call},
		{"tools/list@2025-06-18", h, Version20250618, list},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			body := tc.msg.encode(tc.ver)
			rd := bytes.NewReader(body)
			r := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", nil)
			r.Header = tc.msg.headers(tc.ver)
			r.Body = io.NopCloser(rd)
			r.ContentLength = int64(len(body))
			w := &nopWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				tc.h.Serve(w, r, mcptest.Alice)
			}
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		})
	}
}

// BenchmarkInvoke is the gate alone on the call BenchmarkServe makes.
func BenchmarkInvoke(b *testing.B) {
	d := mcptest.NewEcho()
	args := json.RawMessage(`{"query":"widget"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Invoke(ctx, mcptest.Alice, mcptest.EchoName, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeTraced is BenchmarkServe's tools/call with tracing on,
// every request recorded (the spans go nowhere): what tracing adds to a
// request, the gate's span included.
func BenchmarkServeTraced(b *testing.B) {
	d := mcptest.NewEcho()
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("bench")
	h := New(d, Options{Logger: slogTo(io.Discard), Tracing: &Tracing{
		Tracer: tracer,
		Invoke: func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
			ctx, span := tracer.Start(ctx, "gate "+name)
			defer span.End()
			return d.Invoke(ctx, p, name, args)
		},
	}})
	msg := rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.EchoName, "arguments": map[string]any{"query": "widget"},
		"_meta": map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}
	body := msg.encode(Version20250618)
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", nil)
	r.Header = msg.headers(Version20250618)
	r.Body = io.NopCloser(rd)
	r.ContentLength = int64(len(body))
	w := &nopWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		h.Serve(w, r, mcptest.Alice)
	}
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
}
