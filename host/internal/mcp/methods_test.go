package mcp

import (
	"net/http"
	"slices"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// TestMethodsAcrossVersions sends every method at every protocol version
// and checks status, outcome and the per-version shape of the result.
func TestMethodsAcrossVersions(t *testing.T) {
	type want struct {
		status int
		code   int // JSON-RPC error code; 0 for a result
		check  func(t *testing.T, ver string, res map[string]any)
	}
	modern := func(ver string) bool { return ver == Version20260728 }
	tail := func(t *testing.T, ver string, res map[string]any, cacheable bool) {
		t.Helper()
		if !modern(ver) {
			for _, k := range []string{"resultType", "_meta", "ttlMs", "cacheScope"} {
				if _, ok := res[k]; ok {
					t.Errorf("%s result has %q, which only 2026-07-28 results carry", ver, k)
				}
			}
			return
		}
		if res["resultType"] != "complete" {
			t.Errorf("resultType = %v, want complete", res["resultType"])
		}
		info, _ := res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
		if info["name"] != "capgate" || info["version"] != "1.2.3-test" {
			t.Errorf("_meta serverInfo = %v", info)
		}
		_, hasTTL := res["ttlMs"]
		if hasTTL != cacheable || (cacheable && res["cacheScope"] != "private") {
			t.Errorf("cacheable=%v but ttlMs=%v cacheScope=%v", cacheable, res["ttlMs"], res["cacheScope"])
		}
	}
	cases := []struct {
		name string
		msg  rpc
		want func(ver string) want
	}{
		{
			name: "initialize",
			msg:  rpc{method: "initialize", id: 1, params: map[string]any{"protocolVersion": Version20250618, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "0"}}},
			want: func(ver string) want {
				// 2026-07-28 removed the handshake: a request declaring it
				// gets 404 and -32601 like any unknown method.
				if modern(ver) {
					return want{status: 404, code: codeMethodNotFound}
				}
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if res["protocolVersion"] != Version20250618 {
						t.Errorf("protocolVersion = %v", res["protocolVersion"])
					}
					info := res["serverInfo"].(map[string]any)
					if info["name"] != "capgate" || info["version"] != "1.2.3-test" {
						t.Errorf("serverInfo = %v", info)
					}
					caps := res["capabilities"].(map[string]any)
					if _, ok := caps["tools"]; !ok {
						t.Errorf("capabilities lack tools: %v", caps)
					}
				}}
			},
		},
		{
			name: "server/discover",
			msg:  rpc{method: "server/discover", id: 2},
			want: func(ver string) want {
				if !modern(ver) {
					return want{status: 200, code: codeMethodNotFound}
				}
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					got := []string{}
					for _, v := range res["supportedVersions"].([]any) {
						got = append(got, v.(string))
					}
					if !slices.Equal(got, SupportedVersions()) {
						t.Errorf("supportedVersions = %v", got)
					}
					if _, ok := res["capabilities"].(map[string]any)["tools"]; !ok {
						t.Errorf("capabilities lack tools: %v", res["capabilities"])
					}
					tail(t, ver, res, true)
				}}
			},
		},
		{
			name: "ping",
			msg:  rpc{method: "ping", id: "p-1"},
			want: func(ver string) want {
				if modern(ver) {
					return want{status: 404, code: codeMethodNotFound}
				}
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if len(res) != 0 {
						t.Errorf("ping result = %v, want {}", res)
					}
				}}
			},
		},
		{
			name: "tools/list",
			msg:  rpc{method: "tools/list", id: 3},
			want: func(string) want {
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if n := len(res["tools"].([]any)); n != 8 {
						t.Errorf("admin sees %d tools, want 8 (llm pack is off)", n)
					}
					tail(t, ver, res, true)
				}}
			},
		},
		{
			name: "tools/call",
			msg:  rpc{method: "tools/call", id: 4, params: map[string]any{"name": mcptest.Search, "arguments": map[string]any{"query": "dentist"}}},
			want: func(string) want {
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if res["isError"] != false {
						t.Errorf("isError = %v", res["isError"])
					}
					_, structured := res["structuredContent"]
					if structured != (ver != "" && ver != Version20250326) {
						t.Errorf("structuredContent present=%v at %q", structured, ver)
					}
					tail(t, ver, res, false)
				}}
			},
		},
		{
			name: "resources/list",
			msg:  rpc{method: "resources/list", id: 5},
			want: func(string) want {
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if l, ok := res["resources"].([]any); !ok || len(l) != 0 {
						t.Errorf("resources = %v, want []", res["resources"])
					}
					tail(t, ver, res, true)
				}}
			},
		},
		{
			name: "resources/templates/list",
			msg:  rpc{method: "resources/templates/list", id: 6},
			want: func(string) want {
				return want{status: 200, check: func(t *testing.T, ver string, res map[string]any) {
					if l, ok := res["resourceTemplates"].([]any); !ok || len(l) != 0 {
						t.Errorf("resourceTemplates = %v, want []", res["resourceTemplates"])
					}
					tail(t, ver, res, true)
				}}
			},
		},
		{
			name: "resources/read",
			msg:  rpc{method: "resources/read", id: 7, params: map[string]any{"uri": "capgate://nothing"}},
			want: func(ver string) want {
				if modern(ver) {
					return want{status: 200, code: codeInvalidParams}
				}
				return want{status: 200, code: codeResourceNotFound}
			},
		},
		{
			name: "unknown method",
			msg:  rpc{method: "widgets/list", id: 8},
			want: func(ver string) want {
				if modern(ver) {
					return want{status: 404, code: codeMethodNotFound}
				}
				return want{status: 200, code: codeMethodNotFound}
			},
		},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				w := tc.want(ver)
				rep := f.send(mcptest.Admin, ver, tc.msg)
				if rep.status != w.status {
					t.Fatalf("status = %d, want %d: %s", rep.status, w.status, rep.raw)
				}
				if rep.header.Get("Content-Type") != "application/json" {
					t.Errorf("Content-Type = %q", rep.header.Get("Content-Type"))
				}
				if rep.header.Get("Mcp-Session-Id") != "" {
					t.Errorf("a stateless server issued Mcp-Session-Id %q", rep.header.Get("Mcp-Session-Id"))
				}
				if rep.msg["jsonrpc"] != "2.0" {
					t.Errorf("jsonrpc = %v", rep.msg["jsonrpc"])
				}
				if w.code != 0 {
					if got := rep.errorCode(t); got != w.code {
						t.Fatalf("error code = %d, want %d: %s", got, w.code, rep.raw)
					}
					return
				}
				if _, isErr := rep.msg["error"]; isErr {
					t.Fatalf("unexpected error: %s", rep.raw)
				}
				w.check(t, ver, rep.result(t))
			})
		}
	}
}

func TestIDsAreEchoed(t *testing.T) {
	f := newFixture(t, Options{})
	cases := []struct {
		name string
		body string
		want string
	}{
		{"integer", `{"jsonrpc":"2.0","id":42,"method":"ping"}`, `"id":42`},
		{"string", `{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`, `"id":"a\"b"`},
		{"negative float", `{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}`, `"id":-1.5e3`},
		{"zero", `{"jsonrpc":"2.0","id":0,"method":"ping"}`, `"id":0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.do(mcptest.Admin, http.MethodPost, rpc{}.headers(""), []byte(tc.body))
			if rep.status != 200 || !contains(string(rep.raw), tc.want) {
				t.Fatalf("got %d %s, want id %s", rep.status, rep.raw, tc.want)
			}
		})
	}
}

func TestInitializeNegotiation(t *testing.T) {
	cases := []struct {
		name      string
		params    map[string]any
		want      string
		wantError int
	}{
		{"2025-03-26 echoed", map[string]any{"protocolVersion": Version20250326}, Version20250326, 0},
		{"2025-06-18 echoed", map[string]any{"protocolVersion": Version20250618}, Version20250618, 0},
		{"2025-11-25 echoed", map[string]any{"protocolVersion": Version20251125}, Version20251125, 0},
		{"2026-07-28 has no handshake", map[string]any{"protocolVersion": Version20260728}, Version20251125, 0},
		{"unknown gets latest", map[string]any{"protocolVersion": "2024-11-05"}, Version20251125, 0},
		{"absent gets latest", map[string]any{}, Version20251125, 0},
		{"not a string", map[string]any{"protocolVersion": 20250618}, "", codeInvalidParams},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.send(mcptest.Reader, "", rpc{method: "initialize", id: 1, params: tc.params})
			if tc.wantError != 0 {
				if got := rep.errorCode(t); got != tc.wantError {
					t.Fatalf("code = %d, want %d", got, tc.wantError)
				}
				return
			}
			if got := rep.result(t)["protocolVersion"]; got != tc.want {
				t.Fatalf("protocolVersion = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestInstructions(t *testing.T) {
	cases := []struct {
		name         string
		instructions string
		ver          string
		msg          rpc
	}{
		{"initialize", "Use booking tools for bookings.", "", rpc{method: "initialize", id: 1}},
		{"discover", "Use booking tools for bookings.", Version20260728, rpc{method: "server/discover", id: 1}},
		{"initialize without", "", "", rpc{method: "initialize", id: 1}},
		{"discover without", "", Version20260728, rpc{method: "server/discover", id: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Instructions: tc.instructions})
			res := f.send(mcptest.Reader, tc.ver, tc.msg).result(t)
			got, ok := res["instructions"]
			if tc.instructions == "" {
				if ok {
					t.Fatalf("instructions = %v, want none", got)
				}
				return
			}
			if got != tc.instructions {
				t.Fatalf("instructions = %v", got)
			}
		})
	}
}

func TestResourcesRead(t *testing.T) {
	cases := []struct {
		name   string
		ver    string
		params map[string]any
		code   int
		uri    string
	}{
		{"legacy unknown uri", Version20251125, map[string]any{"uri": "file:///etc/passwd"}, codeResourceNotFound, "file:///etc/passwd"},
		{"2025-03-26 unknown uri", "", map[string]any{"uri": "x:y"}, codeResourceNotFound, "x:y"},
		{"modern unknown uri", Version20260728, map[string]any{"uri": "x:y"}, codeInvalidParams, "x:y"},
		{"missing uri", Version20251125, map[string]any{}, codeInvalidParams, ""},
		{"uri not a string", Version20250618, map[string]any{"uri": 7}, codeInvalidParams, ""},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.send(mcptest.Reader, tc.ver, rpc{method: "resources/read", id: 1, params: tc.params})
			e := rep.errorObj(t)
			if int(e["code"].(float64)) != tc.code {
				t.Fatalf("code = %v, want %d", e["code"], tc.code)
			}
			if tc.uri != "" {
				if data, _ := e["data"].(map[string]any); data["uri"] != tc.uri {
					t.Fatalf("data = %v, want uri %s", e["data"], tc.uri)
				}
			}
		})
	}
}

func TestListCursor(t *testing.T) {
	cases := []struct {
		name   string
		method string
		cursor any
		code   int
	}{
		{"tools empty cursor", "tools/list", "", 0},
		{"tools null cursor", "tools/list", nil, 0},
		{"tools unknown cursor", "tools/list", "page-2", codeInvalidParams},
		{"tools non-string cursor", "tools/list", 2, codeInvalidParams},
		{"resources unknown cursor", "resources/list", "page-2", codeInvalidParams},
		{"templates unknown cursor", "resources/templates/list", "x", codeInvalidParams},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.send(mcptest.Reader, Version20251125, rpc{method: tc.method, id: 1, params: map[string]any{"cursor": tc.cursor}})
			if tc.code == 0 {
				rep.result(t)
				return
			}
			if got := rep.errorCode(t); got != tc.code {
				t.Fatalf("code = %d, want %d", got, tc.code)
			}
		})
	}
}

// TestInitializeAtModernVersion: a request declaring 2026-07-28 has no
// handshake to run, and the answer says which revisions do.
func TestInitializeAtModernVersion(t *testing.T) {
	f := newFixture(t, Options{})
	rep := f.send(mcptest.Reader, Version20260728, rpc{method: "initialize", id: 7, params: map[string]any{"protocolVersion": Version20260728}})
	if rep.status != 404 || rep.errorCode(t) != codeMethodNotFound || rep.msg["id"] != 7.0 {
		t.Fatalf("got %d %s", rep.status, rep.raw)
	}
	msg := rep.errorObj(t)["message"].(string)
	for _, v := range []string{"server/discover", Version20251125, Version20250618, Version20250326} {
		if !contains(msg, v) {
			t.Errorf("message %q does not name %s", msg, v)
		}
	}
}
