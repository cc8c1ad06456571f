package server

import (
	"bytes"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// discardWriter is the cheapest ResponseWriter, so a benchmark measures the
// host and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

const benchToken = "bench-token-0123456789"

func benchServer(b *testing.B) *Server {
	b.Helper()
	store := auth.New([]config.Token{{SHA256: sha256.Sum256([]byte(benchToken)), Role: "customer", Scope: "action", UserID: "u-1"}})
	return New(Options{
		Enabled:    true,
		Version:    "bench",
		Dispatcher: mcptest.NewEcho(),
		Auth:       store,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// benchCall is one tools/call as a client of version ver sends it.
func benchCall(ver string) (http.Header, []byte) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Authorization", "Bearer "+benchToken)
	h.Set("MCP-Protocol-Version", ver)
	params := `"name":"` + mcptest.EchoName + `","arguments":{"query":"widget"}`
	if ver == mcp.Version20260728 {
		h.Set("Mcp-Method", "tools/call")
		h.Set("Mcp-Name", mcptest.EchoName)
		params += `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}`
	}
	return h, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `}}`)
}

// BenchmarkToolsCall measures one tools/call through the host: echo
// routing, authentication, the request deadline, the MCP adapter, the gate
// (including argument validation) and a provider that returns its input.
// Run with -benchmem: B/op is the host-side allocation per call.
func BenchmarkToolsCall(b *testing.B) {
	for _, ver := range []string{mcp.Version20250618, mcp.Version20251125, mcp.Version20260728} {
		b.Run(ver, func(b *testing.B) {
			s := benchServer(b)
			h, body := benchCall(ver)
			rd := bytes.NewReader(body)
			req := httptest.NewRequest(http.MethodPost, MCPPath, nil)
			req.Header = h
			req.Body = io.NopCloser(rd)
			req.ContentLength = int64(len(body))
			w := &discardWriter{h: http.Header{}}
			handler := s.Handler()

			// One call outside the loop checks the answer is a success.
			handler.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rd.Reset(body)
				clear(w.h)
				handler.ServeHTTP(w, req)
			}
			b.StopTimer()
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		})
	}
}

// BenchmarkToolsCallParallel is BenchmarkToolsCall on every core, for a
// throughput figure without a network in the way.
func BenchmarkToolsCallParallel(b *testing.B) {
	s := benchServer(b)
	h, body := benchCall(mcp.Version20250618)
	handler := s.Handler()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rd := bytes.NewReader(body)
		req := httptest.NewRequest(http.MethodPost, MCPPath, nil)
		req.Header = h.Clone()
		req.Body = io.NopCloser(rd)
		req.ContentLength = int64(len(body))
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			rd.Reset(body)
			clear(w.h)
			handler.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
}

// TestBenchmarkRequestIsValid keeps the benchmark honest: the request it
// replays must succeed and return the echoed arguments.
func TestBenchmarkRequestIsValid(t *testing.T) {
	for _, ver := range []string{mcp.Version20250618, mcp.Version20260728} {
		t.Run(ver, func(t *testing.T) {
			s := benchServer(&testing.B{})
			h, body := benchCall(ver)
			req := httptest.NewRequest(http.MethodPost, MCPPath, bytes.NewReader(body))
			req.Header = h
			w := httptest.NewRecorder()
			s.Handler().ServeHTTP(w, req)
			if w.Code != 200 || !strings.Contains(w.Body.String(), `"structuredContent":{"query":"widget"}`) {
				t.Fatalf("got %d %s", w.Code, w.Body.String())
			}
		})
	}
}
