package mcp

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

var pingBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)

// noID reports an error response without an id member, as MCP wants for
// errors about a message that was never read.
func noID(t *testing.T, rep reply) {
	t.Helper()
	if _, ok := rep.msg["id"]; ok {
		t.Errorf("transport error carries an id: %s", rep.raw)
	}
	if rep.msg["jsonrpc"] != "2.0" || rep.msg["error"] == nil {
		t.Errorf("not a JSON-RPC error response: %s", rep.raw)
	}
}

func TestAcceptHeader(t *testing.T) {
	cases := []struct {
		name   string
		accept []string // nil: header absent
		status int
	}{
		{"absent means anything", nil, 200},
		{"both", []string{"application/json, text/event-stream"}, 200},
		{"both reversed with params", []string{"text/event-stream;q=0.9, application/json;charset=utf-8"}, 200},
		{"both in two header lines", []string{"application/json", "text/event-stream"}, 200},
		{"case-insensitive", []string{"Application/JSON, Text/Event-Stream"}, 200},
		{"wildcard", []string{"*/*"}, 200},
		{"type wildcards", []string{"application/*, text/*"}, 200},
		{"json only", []string{"application/json"}, 400},
		{"event stream only", []string{"text/event-stream"}, 406},
		{"html only", []string{"text/html"}, 406},
		{"json refused with q=0", []string{"application/json;q=0, text/event-stream"}, 406},
		{"json refused with q=0.000", []string{"application/json; q=0.000, text/event-stream"}, 406},
		{"json with low q is still acceptable", []string{"application/json;q=0.1, text/event-stream"}, 200},
		{"empty value means no preference", []string{""}, 200},
		{"blank value means no preference", []string{"  "}, 200},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := rpc{}.headers("")
			h.Del("Accept")
			for _, v := range tc.accept {
				h.Add("Accept", v)
			}
			rep := f.do(mcptest.Reader, http.MethodPost, h, pingBody)
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.status != 200 {
				noID(t, rep)
			}
		})
	}
}

func TestContentTypeHeader(t *testing.T) {
	cases := []struct {
		name   string
		ct     string
		status int
	}{
		{"json", "application/json", 200},
		{"json with charset", "application/json; charset=utf-8", 200},
		{"upper case", "APPLICATION/JSON", 200},
		{"absent", "", 415},
		{"text", "text/plain", 415},
		{"form", "application/x-www-form-urlencoded", 415},
		{"json suffix is not json", "application/problem+json", 415},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := rpc{}.headers("")
			h.Del("Content-Type")
			if tc.ct != "" {
				h.Set("Content-Type", tc.ct)
			}
			rep := f.do(mcptest.Reader, http.MethodPost, h, pingBody)
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d", rep.status, tc.status)
			}
			if tc.status != 200 {
				noID(t, rep)
			}
		})
	}
}

func TestProtocolVersionHeader(t *testing.T) {
	cases := []struct {
		name   string
		header string // "-" for absent
		body   string
		status int
		code   int
	}{
		{"absent is 2025-03-26", "-", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 200, 0},
		{"2025-06-18", Version20250618, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 200, 0},
		{"unknown", "2024-11-05", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, codeUnsupportedVersion},
		{"garbage", "latest", `{"jsonrpc":"2.0","id":"x","method":"ping"}`, 400, codeUnsupportedVersion},
		{"unsupported on a notification", "1999-01-01", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 400, codeUnsupportedVersion},
		{"unsupported on a batch", "1999-01-01", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400, codeUnsupportedVersion},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := rpc{}.headers("")
			if tc.header != "-" {
				h.Set("MCP-Protocol-Version", tc.header)
			}
			rep := f.do(mcptest.Reader, http.MethodPost, h, []byte(tc.body))
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.code == 0 {
				return
			}
			e := rep.errorObj(t)
			if int(e["code"].(float64)) != tc.code {
				t.Fatalf("code = %v", e["code"])
			}
			data := e["data"].(map[string]any)
			if data["requested"] != tc.header || len(data["supported"].([]any)) != 4 {
				t.Fatalf("data = %v", data)
			}
			if strings.Contains(tc.body, `"id"`) && !strings.HasPrefix(tc.body, "[") {
				if _, ok := rep.msg["id"]; !ok {
					t.Errorf("the request id was readable but not echoed: %s", rep.raw)
				}
			}
		})
	}
}

func TestOriginHeader(t *testing.T) {
	cases := []struct {
		name    string
		allowed []string
		host    string
		origin  string // "" for absent
		status  int
	}{
		{"absent", nil, "capgate.example.com", "", 200},
		{"localhost", nil, "capgate.example.com", "http://localhost:5173", 200},
		{"loopback v4", nil, "127.0.0.1:8080", "http://127.0.0.1:3000", 200},
		{"loopback v6", nil, "[::1]:8080", "http://[::1]:3000", 200},
		{"same host by IP literal", nil, "10.1.2.3:8080", "http://10.1.2.3:8080", 200},
		{"same IP literal, default port", nil, "10.1.2.3", "http://10.1.2.3", 200},
		{"same IP, other port", nil, "10.1.2.3:8080", "http://10.1.2.3:9090", 403},
		{"foreign", nil, "capgate.example.com", "https://evil.example", 403},
		{"rebinding: same name", nil, "evil.example:8080", "http://evil.example:8080", 403},
		{"null", nil, "capgate.example.com", "null", 403},
		{"not a URL", nil, "capgate.example.com", "localhost", 403},
		{"path in origin", nil, "capgate.example.com", "http://localhost/x", 403},
		{"other scheme", nil, "capgate.example.com", "file://localhost", 403},
		{"listed", []string{"https://app.example.com"}, "capgate.example.com", "https://app.example.com", 200},
		{"listed, case and slash differ", []string{"HTTPS://App.Example.com/"}, "capgate.example.com", "https://app.example.com", 200},
		{"listed, other port", []string{"https://app.example.com"}, "capgate.example.com", "https://app.example.com:8443", 403},
		{"wildcard", []string{"*"}, "capgate.example.com", "https://anything.example", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{AllowedOrigins: tc.allowed})
			r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/api/v1/mcp", bytes.NewReader(pingBody))
			r.Header = rpc{}.headers("")
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			w := httptest.NewRecorder()
			f.h.Serve(w, r, mcptest.Reader)
			rep := decodeReply(t, w)
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.status == 403 {
				noID(t, rep)
			}
		})
	}
}

func TestHTTPMethods(t *testing.T) {
	f := newFixture(t, Options{})
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodPatch, http.MethodHead, http.MethodOptions} {
		t.Run(m, func(t *testing.T) {
			h := rpc{}.headers(Version20251125)
			h.Set("Mcp-Session-Id", "from-an-old-session")
			rep := f.do(mcptest.Reader, m, h, nil)
			if rep.status != http.StatusMethodNotAllowed {
				t.Fatalf("status = %d", rep.status)
			}
			if got := rep.header.Get("Allow"); got != "POST" {
				t.Fatalf("Allow = %q", got)
			}
		})
	}
}

// TestSessionIDIgnored: a session id from an older client is ignored, never
// required and never issued.
func TestSessionIDIgnored(t *testing.T) {
	f := newFixture(t, Options{})
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			m := rpc{method: "tools/list", id: 1}
			h := m.headers(ver)
			h.Set("Mcp-Session-Id", "stale")
			h.Set("Last-Event-ID", "7")
			rep := f.do(mcptest.Reader, http.MethodPost, h, m.encode(ver))
			if rep.status != 200 || rep.header.Get("Mcp-Session-Id") != "" {
				t.Fatalf("status %d, session header %q", rep.status, rep.header.Get("Mcp-Session-Id"))
			}
		})
	}
}

// TestModernRequestValidation covers what 2026-07-28 requires of each
// request beyond the body: mirrored headers and the _meta fields.
func TestModernRequestValidation(t *testing.T) {
	call := rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.Search, "arguments": map[string]any{"query": "x"}}}
	read := rpc{method: "resources/read", id: 1, params: map[string]any{"uri": "capgate://x"}}
	type edit func(h http.Header, body map[string]any)
	meta := func(body map[string]any) map[string]any {
		return body["params"].(map[string]any)["_meta"].(map[string]any)
	}
	cases := []struct {
		name   string
		msg    rpc
		edit   edit
		status int
		code   int
	}{
		{"conforming call", call, func(http.Header, map[string]any) {}, 200, 0},
		{"conforming read", read, func(http.Header, map[string]any) {}, 200, codeInvalidParams},
		{"missing Mcp-Method", call, func(h http.Header, _ map[string]any) { h.Del("Mcp-Method") }, 400, codeHeaderMismatch},
		{"wrong Mcp-Method", call, func(h http.Header, _ map[string]any) { h.Set("Mcp-Method", "tools/list") }, 400, codeHeaderMismatch},
		{"Mcp-Method differs in case", call, func(h http.Header, _ map[string]any) { h.Set("Mcp-Method", "Tools/Call") }, 400, codeHeaderMismatch},
		{"missing Mcp-Name", call, func(h http.Header, _ map[string]any) { h.Del("Mcp-Name") }, 400, codeHeaderMismatch},
		{"wrong Mcp-Name", call, func(h http.Header, _ map[string]any) { h.Set("Mcp-Name", mcptest.Cancel) }, 400, codeHeaderMismatch},
		{"base64 Mcp-Name", call, func(h http.Header, _ map[string]any) { h.Set("Mcp-Name", "=?base64?"+b64(mcptest.Search)+"?=") }, 200, 0},
		{"broken base64 Mcp-Name", call, func(h http.Header, _ map[string]any) { h.Set("Mcp-Name", "=?base64?!!!?=") }, 400, codeHeaderMismatch},
		{"Mcp-Name for read must be the uri", read, func(h http.Header, _ map[string]any) { h.Set("Mcp-Name", "capgate://y") }, 400, codeHeaderMismatch},
		{"missing _meta", call, func(_ http.Header, b map[string]any) { delete(b["params"].(map[string]any), "_meta") }, 400, codeInvalidParams},
		{"_meta not an object", call, func(_ http.Header, b map[string]any) { b["params"].(map[string]any)["_meta"] = "x" }, 400, codeInvalidParams},
		{"missing protocolVersion", call, func(_ http.Header, b map[string]any) { delete(meta(b), metaProtocolVersion) }, 400, codeInvalidParams},
		{"protocolVersion not a string", call, func(_ http.Header, b map[string]any) { meta(b)[metaProtocolVersion] = 2026 }, 400, codeInvalidParams},
		{"missing clientCapabilities", call, func(_ http.Header, b map[string]any) { delete(meta(b), metaClientCapabilities) }, 400, codeInvalidParams},
		{"clientCapabilities not an object", call, func(_ http.Header, b map[string]any) { meta(b)[metaClientCapabilities] = []any{} }, 400, codeInvalidParams},
		{"_meta version differs from header", call, func(_ http.Header, b map[string]any) { meta(b)[metaProtocolVersion] = Version20251125 }, 400, codeHeaderMismatch},
		{"missing params entirely", rpc{method: "tools/list", id: 1}, func(_ http.Header, b map[string]any) { delete(b, "params") }, 400, codeInvalidParams},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.msg.headers(Version20260728)
			var body map[string]any
			if err := jsonUnmarshal(tc.msg.encode(Version20260728), &body); err != nil {
				t.Fatal(err)
			}
			tc.edit(h, body)
			rep := f.do(mcptest.Reader, http.MethodPost, h, []byte(mustMarshal(body)))
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.code == 0 {
				rep.result(t)
				return
			}
			if got := rep.errorCode(t); got != tc.code {
				t.Fatalf("code = %d, want %d: %s", got, tc.code, rep.raw)
			}
			if rep.msg["id"] != 1.0 {
				t.Errorf("id not echoed: %s", rep.raw)
			}
		})
	}
}

func TestNotificationsAndResponses(t *testing.T) {
	cases := []struct {
		name   string
		ver    string
		body   string
		status int
	}{
		{"initialized", "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202},
		{"cancelled", Version20251125, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, 202},
		{"unknown notification", Version20250618, `{"jsonrpc":"2.0","method":"notifications/whatever"}`, 202},
		{"notification at 2026-07-28", Version20260728, `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, 202},
		{"client response", Version20251125, `{"jsonrpc":"2.0","id":5,"result":{}}`, 202},
		{"client error response", "", `{"jsonrpc":"2.0","id":"s-1","error":{"code":-1,"message":"no"}}`, 202},
		{"client response at 2026-07-28", Version20260728, `{"jsonrpc":"2.0","id":5,"result":{}}`, 400},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.do(mcptest.Reader, http.MethodPost, rpc{}.headers(tc.ver), []byte(tc.body))
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.status == 202 && (len(rep.raw) != 0 || rep.header.Get("Content-Type") != "") {
				t.Fatalf("202 with a body or content type: %q %q", rep.raw, rep.header.Get("Content-Type"))
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		status int
		code   int
		withID bool
	}{
		{"empty", ``, 400, codeParseError, false},
		{"whitespace", " \n", 400, codeParseError, false},
		{"garbage", `not json`, 400, codeParseError, false},
		{"truncated", `{"jsonrpc":"2.0","id":1,`, 400, codeParseError, false},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, 400, codeParseError, false},
		{"two objects", `{"jsonrpc":"2.0","id":1,"method":"ping"}{}`, 400, codeParseError, false},
		{"bad escape", `{"jsonrpc":"2.0","id":1,"method":"p\qing"}`, 400, codeParseError, false},
		{"control char in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\x01ng\"}", 400, codeParseError, false},
		{"number", `42`, 400, codeInvalidRequest, false},
		{"string", `"ping"`, 400, codeInvalidRequest, false},
		{"null", `null`, 400, codeInvalidRequest, false},
		{"missing jsonrpc", `{"id":1,"method":"ping"}`, 400, codeInvalidRequest, true},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, 400, codeInvalidRequest, true},
		{"jsonrpc as number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, 400, codeInvalidRequest, true},
		{"missing method", `{"jsonrpc":"2.0","id":1}`, 400, codeInvalidRequest, true},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7}`, 400, codeInvalidRequest, true},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, 400, codeInvalidRequest, false},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, 400, codeInvalidRequest, false},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, 400, codeInvalidRequest, false},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}`, 200, codeInvalidParams, true},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}`, 200, codeInvalidParams, true},
		{"params null is no params", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, 200, 0, true},
		{"escaped keys and method", `{"json\u0072pc":"2.0","\u0069d":1,"method":"tools\/list"}`, 200, 0, true},
		{"escaped tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"platform.\u0073earch","arguments":{"query":"x"}}}`, 200, 0, true},
		{"keys are case-sensitive", `{"jsonrpc":"2.0","id":1,"METHOD":"ping"}`, 400, codeInvalidRequest, true},
		{"duplicate key", `{"jsonrpc":"2.0","id":1,"method":"nope","method":"ping"}`, 400, codeInvalidRequest, true},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.do(mcptest.Alice, http.MethodPost, rpc{}.headers(""), []byte(tc.body))
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if _, has := rep.msg["id"]; has != tc.withID {
				t.Errorf("id present = %v, want %v: %s", has, tc.withID, rep.raw)
			}
			if tc.code == 0 {
				if _, isErr := rep.msg["error"]; isErr {
					t.Fatalf("unexpected error: %s", rep.raw)
				}
				if res := rep.result(t); res["isError"] == true {
					t.Fatalf("unexpected tool error: %s", rep.raw)
				}
				return
			}
			if got := rep.errorCode(t); got != tc.code {
				t.Fatalf("code = %d, want %d: %s", got, tc.code, rep.raw)
			}
		})
	}
}

func TestBatches(t *testing.T) {
	ping := func(id int) string { return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"ping"}` }
	note := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	many := make([]string, maxBatch+1)
	for i := range many {
		many[i] = ping(i)
	}
	cases := []struct {
		name    string
		ver     string
		body    string
		status  int
		wantIDs []any // ids of the responses in order (nil entries for errors without id)
		code    int   // error code of a single (non-array) error response
	}{
		{"requests and a notification", "", "[" + ping(1) + "," + note + "," + ping(2) + "]", 200, []any{1.0, 2.0}, 0},
		{"explicit 2025-03-26", Version20250326, "[" + ping(3) + "]", 200, []any{3.0}, 0},
		{"whitespace around", Version20250326, " [ " + ping(4) + " ] ", 200, []any{4.0}, 0},
		{"only notifications", "", "[" + note + "," + note + "]", 202, nil, 0},
		{"only responses", "", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, 202, nil, 0},
		{"invalid element", "", "[1," + ping(5) + "]", 200, []any{nil, 5.0}, 0},
		{"initialize is not batchable", "", `[{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}]`, 200, []any{9.0}, 0},
		{"tool call in a batch", "", `[{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"platform.search","arguments":{"query":"x"}}}]`, 200, []any{"c"}, 0},
		{"empty", "", "[]", 400, nil, codeInvalidRequest},
		{"too many", "", "[" + strings.Join(many, ",") + "]", 400, nil, codeInvalidRequest},
		{"not JSON", "", "[" + ping(1), 400, nil, codeParseError},
		{"2025-06-18 has no batches", Version20250618, "[" + ping(1) + "]", 400, nil, codeInvalidRequest},
		{"2025-11-25 has no batches", Version20251125, "[" + ping(1) + "]", 400, nil, codeInvalidRequest},
		{"2026-07-28 has no batches", Version20260728, "[" + ping(1) + "]", 400, nil, codeInvalidRequest},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.do(mcptest.Alice, http.MethodPost, rpc{}.headers(tc.ver), []byte(tc.body))
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			switch {
			case tc.status == 202:
				if len(rep.raw) != 0 {
					t.Fatalf("202 with body %s", rep.raw)
				}
			case tc.code != 0:
				if got := rep.errorCode(t); got != tc.code {
					t.Fatalf("code = %d, want %d", got, tc.code)
				}
			default:
				var arr []map[string]any
				if err := jsonUnmarshal(rep.raw, &arr); err != nil {
					t.Fatalf("not an array: %s", rep.raw)
				}
				if len(arr) != len(tc.wantIDs) {
					t.Fatalf("%d responses, want %d: %s", len(arr), len(tc.wantIDs), rep.raw)
				}
				for i, r := range arr {
					if r["id"] != tc.wantIDs[i] {
						t.Errorf("response %d id = %v, want %v", i, r["id"], tc.wantIDs[i])
					}
				}
			}
		})
	}
}

// failingBody is a request body whose reads fail with err.
type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRequestBody(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 200) + `"}}`
	cases := []struct {
		name   string
		max    int64
		body   func() io.Reader
		length int64 // Content-Length; -1 for unknown
		status int
	}{
		{"within the limit", 1024, func() io.Reader { return strings.NewReader(big) }, int64(len(big)), 200},
		{"declared too large", 64, func() io.Reader { return strings.NewReader(big) }, int64(len(big)), 413},
		{"chunked too large", 64, func() io.Reader { return strings.NewReader(big) }, -1, 413},
		{"exactly at the limit", int64(len(big)), func() io.Reader { return strings.NewReader(big) }, -1, 200},
		{"larger than a pooled buffer", 1 << 20, func() io.Reader {
			return strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("y", 100<<10) + `"}}`)
		}, -1, 200},
		{"max bytes reader", 1 << 20, func() io.Reader {
			return http.MaxBytesReader(nil, io.NopCloser(strings.NewReader(big)), 10)
		}, -1, 413},
		{"slow client", 1024, func() io.Reader { return failingBody{timeoutErr{}} }, -1, 408},
		{"deadline from the server", 1024, func() io.Reader { return failingBody{os.ErrDeadlineExceeded} }, -1, 408},
		{"broken connection", 1024, func() io.Reader { return failingBody{errors.New("connection reset")} }, -1, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{MaxBodyBytes: tc.max})
			r := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", tc.body())
			r.ContentLength = tc.length
			r.Header = rpc{}.headers("")
			w := httptest.NewRecorder()
			f.h.Serve(w, r, mcptest.Reader)
			rep := decodeReply(t, w)
			if rep.status != tc.status {
				t.Fatalf("status = %d, want %d: %s", rep.status, tc.status, rep.raw)
			}
			if tc.status != 200 {
				noID(t, rep)
			}
		})
	}
}

func TestDefaultBodyLimit(t *testing.T) {
	f := newFixture(t, Options{})
	if f.h.maxBody != DefaultMaxBodyBytes {
		t.Fatalf("default limit = %d", f.h.maxBody)
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", nil)
	r.Header = rpc{}.headers("")
	r.Body = nil
	w := httptest.NewRecorder()
	f.h.Serve(w, r, mcptest.Reader)
	if w.Code != 400 {
		t.Fatalf("nil body: status %d", w.Code)
	}
}
