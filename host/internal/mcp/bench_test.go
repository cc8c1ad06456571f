package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
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
	call := rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.EchoName, "arguments": map[string]any{"query": "widget"}}}
	list := rpc{method: "tools/list", id: 1}
	cases := []struct {
		name string
		ver  string
		msg  rpc
	}{
		{"tools/call@2025-06-18", Version20250618, call},
		{"tools/call@2026-07-28", Version20260728, call},
		{"tools/list@2025-06-18", Version20250618, list},
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
				h.Serve(w, r, mcptest.Alice)
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
