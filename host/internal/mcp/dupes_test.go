package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// modernMeta is the _meta a 2026-07-28 request carries, as raw JSON.
const modernMeta = `"_meta":{"` + metaProtocolVersion + `":"` + Version20260728 + `","` + metaClientCapabilities + `":{}}`

// TestDuplicateMembersRefusedEnvelope sends messages with a member named
// twice in the envelope or in params: each is refused as a whole, naming
// the member and where it is, before anything is served.
func TestDuplicateMembersRefusedEnvelope(t *testing.T) {
	f := promptsFixture(t)
	cases := []struct {
		name, body string
		code       int
		want       string
	}{
		{"two methods", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"` + mcptest.Cancel + `","arguments":{"id":"b-1"}}}`,
			codeInvalidRequest, `invalid request: duplicate member "method" at /method`},
		{"two ids", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}`,
			codeInvalidRequest, `invalid request: duplicate member "id" at /id`},
		{"two params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + mcptest.Search + `","arguments":{"query":"a"}},"params":{"name":"` + mcptest.Cancel + `","arguments":{"id":"b-1"}}}`,
			codeInvalidRequest, `invalid request: duplicate member "params" at /params`},
		{"an escaped second method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","\u006dethod":"tools/call"}`,
			codeInvalidRequest, `invalid request: duplicate member "method" at /method`},
		{"two names in params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + mcptest.Search + `","name":"` + mcptest.Cancel + `","arguments":{"id":"b-1"}}}`,
			codeInvalidParams, `invalid params: duplicate member "name" at /params/name`},
		{"two arguments members", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + mcptest.Cancel + `","arguments":{"id":"b-2"},"arguments":{"id":"b-1"}}}`,
			codeInvalidParams, `invalid params: duplicate member "arguments" at /params/arguments`},
		{"a name in params after a duplicate argument", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"id":"b-1","id":"b-2"},"name":"` + mcptest.Search + `","name":"` + mcptest.Cancel + `"}}`,
			codeInvalidParams, `invalid params: duplicate member "name" at /params/name`},
		{"in _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + mcptest.Search + `","arguments":{"query":"a"},"_meta":{"progressToken":1,"progressToken":2}}}`,
			codeInvalidParams, `invalid params: duplicate member "progressToken" at /params/_meta/progressToken`},
		{"in prompts/get arguments", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"` + mcptest.PromptGreet + `","arguments":{"who":"bob","who":"eve"}}}`,
			codeInvalidParams, `invalid params: duplicate member "who" at /params/arguments/who`},
		{"in resources/read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://a","uri":"test://b"}}`,
			codeInvalidParams, `invalid params: duplicate member "uri" at /params/uri`},
		{"in a response", `{"jsonrpc":"2.0","id":"s-1","result":{"action":"accept","action":"decline"}}`,
			codeInvalidRequest, `invalid request: duplicate member "action" at /result/action`},
	}
	for _, ver := range []string{"", Version20250618, Version20251125} {
		for _, tc := range cases {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				r := f.do(mcptest.Alice, http.MethodPost, rpc{}.headers(ver), []byte(tc.body))
				if r.status != http.StatusBadRequest {
					t.Errorf("status %d, want 400", r.status)
				}
				e := r.errorObj(t)
				if code := int(e["code"].(float64)); code != tc.code || e["message"] != tc.want {
					t.Fatalf("error %d %q, want %d %q", code, e["message"], tc.code, tc.want)
				}
				if tc.name == "two ids" && r.msg["id"] != nil {
					t.Errorf("answered with id %v: which of the two is not known", r.msg["id"])
				}
			})
		}
	}
	if f.platform.Cancelled("b-1") || f.platform.Cancelled("b-2") {
		t.Fatal("a refused message cancelled a booking")
	}
}

// TestDuplicateMembersRefusedToolsCall sends tools/call with an argument
// named twice: the gate refuses it as invalid input, an isError result
// naming the member, at every revision, and the tool does not run.
func TestDuplicateMembersRefusedToolsCall(t *testing.T) {
	f := newFixture(t, Options{})
	for _, ver := range allVersions {
		t.Run(ver, func(t *testing.T) {
			meta := ""
			if ver == Version20260728 {
				meta = "," + modernMeta
			}
			for args, where := range map[string]string{
				`{"id":"b-1","id":"b-2"}`:                     `/id`,
				`{"id":"b-1","note":{"by":"a","by":"b"}}`:     `/note/by`,
				`{"id":"b-1","tags":[{"k":1},{"k":1,"k":2}]}`: `/tags/1/k`,
			} {
				body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + mcptest.Cancel + `","arguments":` + args + meta + `}}`
				h := rpc{method: "tools/call", params: map[string]any{"name": mcptest.Cancel}}.headers(ver)
				r := f.do(mcptest.Alice, http.MethodPost, h, []byte(body))
				res := r.result(t)
				want := `invalid arguments for ` + mcptest.Cancel + `: duplicate member "` + where[strings.LastIndex(where, "/")+1:] + `" at ` + where
				if res["isError"] != true || toolText(t, res) != want {
					t.Fatalf("%s: got %s, want an isError result %q", args, r.raw, want)
				}
			}
			if f.platform.Cancelled("b-1") || f.platform.Cancelled("b-2") {
				t.Fatal("the refused call ran")
			}
		})
	}
}

// TestDuplicateMembersRefusedInBatch: in a batch, the message holding the
// duplicate is answered with its error and the others are served.
func TestDuplicateMembersRefusedInBatch(t *testing.T) {
	f := newFixture(t, Options{})
	body := `[{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	r := f.do(mcptest.Alice, http.MethodPost, rpc{}.headers(Version20250326), []byte(body))
	if r.status != http.StatusOK || !strings.Contains(string(r.raw), `"id":1,"error":{"code":-32600,"message":"invalid request: duplicate member \"method\" at /method"}`) ||
		!strings.Contains(string(r.raw), `"id":2,"result":{}`) {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestWithoutArguments(t *testing.T) {
	in := `{"jsonrpc":"2.0", "params" : {"name":"x","arguments":{"a":1,"a":2},"_meta":{"arguments":{"b":1}}},"arguments":{"c":1}}`
	want := `{"jsonrpc":"2.0","params":{"name":"x","arguments":{},"_meta":{"arguments":{"b":1}}},"arguments":{"c":1}}`
	if got := string(withoutArguments([]byte(in))); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
