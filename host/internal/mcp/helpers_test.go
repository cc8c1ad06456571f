package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// allVersions is every served revision plus "" (no header, taken as
// 2025-03-26).
var allVersions = []string{"", Version20250326, Version20250618, Version20251125, Version20260728}

// fixture is a handler over the test platform, logging into a buffer.
type fixture struct {
	t        testing.TB
	platform *mcptest.Platform
	h        *Handler
	logs     *mcptest.LogBuffer
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	f := &fixture{t: t, platform: mcptest.New(), logs: &mcptest.LogBuffer{}}
	if opts.Version == "" {
		opts.Version = "1.2.3-test"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f.h = New(f.platform.Dispatcher, opts)
	return f
}

// rpc describes one JSON-RPC message for a test.
type rpc struct {
	method string
	params map[string]any
	// id is the request id; nil makes a notification.
	id any
}

// encode renders the message as a client of version ver would send it: a
// 2026-07-28 request carries the per-request _meta.
func (m rpc) encode(ver string) []byte {
	msg := map[string]any{"jsonrpc": "2.0", "method": m.method}
	if m.id != nil {
		msg["id"] = m.id
	}
	params := map[string]any{}
	for k, v := range m.params {
		params[k] = v
	}
	if ver == Version20260728 && m.id != nil {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[metaProtocolVersion] = ver
		if _, ok := meta[metaClientCapabilities]; !ok {
			meta[metaClientCapabilities] = map[string]any{}
		}
		meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "test", "version": "0"}
		params["_meta"] = meta
	}
	if len(params) > 0 || m.params != nil {
		msg["params"] = params
	}
	b, err := json.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return b
}

// headers are what a conforming client of version ver sends with m.
func (m rpc) headers(ver string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if ver != "" {
		h.Set("MCP-Protocol-Version", ver)
	}
	if ver == Version20260728 {
		h.Set("Mcp-Method", m.method)
		switch m.method {
		case "tools/call", "prompts/get":
			if n, ok := m.params["name"].(string); ok {
				h.Set("Mcp-Name", n)
			}
		case "resources/read":
			if u, ok := m.params["uri"].(string); ok {
				h.Set("Mcp-Name", u)
			}
		case "tasks/get", "tasks/update", "tasks/cancel":
			if id, ok := m.params["taskId"].(string); ok {
				h.Set("Mcp-Name", id)
			}
		}
	}
	return h
}

// reply is a response as the test sees it.
type reply struct {
	status int
	header http.Header
	raw    []byte
	msg    map[string]any
}

func (f *fixture) do(p dispatch.Principal, method string, header http.Header, body []byte) reply {
	f.t.Helper()
	r := httptest.NewRequest(method, "http://127.0.0.1:8080/api/v1/mcp", bytes.NewReader(body))
	r.Header = header
	w := httptest.NewRecorder()
	f.h.Serve(w, r, p)
	return decodeReply(f.t, w)
}

func decodeReply(t testing.TB, w *httptest.ResponseRecorder) reply {
	t.Helper()
	rep := reply{status: w.Code, header: w.Header(), raw: w.Body.Bytes()}
	if len(rep.raw) > 0 && rep.raw[0] == '{' {
		if err := json.Unmarshal(rep.raw, &rep.msg); err != nil {
			t.Fatalf("response is not JSON: %v\n%s", err, rep.raw)
		}
	}
	return rep
}

// sendWithCaps posts m as send does, with caps as the client capabilities
// of a 2026-07-28 request and extra params.
func (f *fixture) sendWithCaps(p dispatch.Principal, ver string, m rpc, caps any, extra map[string]any) reply {
	f.t.Helper()
	var msg map[string]any
	if err := json.Unmarshal(m.encode(ver), &msg); err != nil {
		f.t.Fatal(err)
	}
	params := msg["params"].(map[string]any)
	if meta, ok := params["_meta"].(map[string]any); ok && caps != nil {
		meta[metaClientCapabilities] = caps
	}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(msg)
	return f.do(p, http.MethodPost, m.headers(ver), body)
}

// send posts m as a client of version ver would.
func (f *fixture) send(p dispatch.Principal, ver string, m rpc) reply {
	f.t.Helper()
	return f.do(p, http.MethodPost, m.headers(ver), m.encode(ver))
}

func (r reply) result(t testing.TB) map[string]any {
	t.Helper()
	res, ok := r.msg["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result in %d response: %s", r.status, r.raw)
	}
	return res
}

func (r reply) errorCode(t testing.TB) int {
	t.Helper()
	e, ok := r.msg["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %d response: %s", r.status, r.raw)
	}
	return int(e["code"].(float64))
}

func (r reply) errorObj(t testing.TB) map[string]any {
	t.Helper()
	e, ok := r.msg["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %d response: %s", r.status, r.raw)
	}
	return e
}

// toolText returns the text of a tool result's first content block.
func toolText(t testing.TB, res map[string]any) string {
	t.Helper()
	content, ok := res["content"].([]any)
	if !ok || len(content) == 0 {
		t.Fatalf("result has no content: %v", res)
	}
	block := content[0].(map[string]any)
	if block["type"] != "text" {
		t.Fatalf("content block type = %v, want text", block["type"])
	}
	return block["text"].(string)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// keysOf is m's keys, sorted.
func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func itoa(i int) string { return strconv.Itoa(i) }

// testSealer is the host's sealer of questions and rounds, with states
// living ttl, over a real approvals store in the test's directory.
func testSealer(t testing.TB, ttl time.Duration) *confirm.Sealer {
	t.Helper()
	store, err := approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, err := confirm.New([]byte(strings.Repeat("k", 32)), ttl, store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
