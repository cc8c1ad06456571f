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
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// echoArgs is a provider returning its arguments.
type echoArgs struct{}

func (echoArgs) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	return r.Args, nil
}

// TestParamHeaders covers x-mcp-header: at 2026-07-28 each annotated
// argument must agree with its Mcp-Param-* header.
func TestParamHeaders(t *testing.T) {
	reg := registry.New([]string{"db"})
	if err := reg.Add(registry.Capability{
		Name: "db.query", Description: "Run a query.", Kind: registry.Read, Pack: "db", Plugin: "db",
		InputSchema: json.RawMessage(`{"type":"object","properties":{
			"region":{"type":"string","x-mcp-header":"Region"},
			"opts":{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"},"dry":{"type":"boolean","x-mcp-header":"Dry"}}},
			"bad":{"type":"string"},
			"sql":{"type":"string"}}}`),
	}); err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"db": true}}, map[string]dispatch.Provider{"db": echoArgs{}})
	if err != nil {
		t.Fatal(err)
	}
	h := New(d, Options{Logger: slogTo(io.Discard)})
	if n := len(h.paramHeaders["db.query"]); n != 3 {
		t.Fatalf("%d bindings, want 3", n)
	}
	cases := []struct {
		name    string
		ver     string
		args    map[string]any
		headers map[string]string
		ok      bool
	}{
		{"matching", Version20260728, map[string]any{"region": "eu-1", "sql": "x"}, map[string]string{"Mcp-Param-Region": "eu-1"}, true},
		{"header name case-insensitive", Version20260728, map[string]any{"region": "eu-1"}, map[string]string{"MCP-PARAM-REGION": "eu-1"}, true},
		{"missing header", Version20260728, map[string]any{"region": "eu-1"}, nil, false},
		{"different value", Version20260728, map[string]any{"region": "eu-1"}, map[string]string{"Mcp-Param-Region": "us-1"}, false},
		{"base64 value", Version20260728, map[string]any{"region": "zürich"}, map[string]string{"Mcp-Param-Region": "=?base64?" + b64("zürich") + "?="}, true},
		{"absent argument, no header", Version20260728, map[string]any{"sql": "x"}, nil, true},
		{"absent argument, header sent", Version20260728, map[string]any{"sql": "x"}, map[string]string{"Mcp-Param-Region": "eu-1"}, false},
		{"null argument, no header", Version20260728, map[string]any{"region": nil}, nil, true},
		{"nested integer", Version20260728, map[string]any{"opts": map[string]any{"limit": 42}}, map[string]string{"Mcp-Param-Limit": "42"}, true},
		{"integer compared as a number", Version20260728, map[string]any{"opts": map[string]any{"limit": 42}}, map[string]string{"Mcp-Param-Limit": "42.0"}, true},
		{"integer differs", Version20260728, map[string]any{"opts": map[string]any{"limit": 42}}, map[string]string{"Mcp-Param-Limit": "43"}, false},
		{"integer header not a number", Version20260728, map[string]any{"opts": map[string]any{"limit": 42}}, map[string]string{"Mcp-Param-Limit": "NaN"}, false},
		{"boolean", Version20260728, map[string]any{"opts": map[string]any{"dry": true}}, map[string]string{"Mcp-Param-Dry": "true"}, true},
		{"boolean differs", Version20260728, map[string]any{"opts": map[string]any{"dry": true}}, map[string]string{"Mcp-Param-Dry": "false"}, false},
		{"object value is left to the gate", Version20260728, map[string]any{"region": map[string]any{}}, nil, true},
		{"parent not an object", Version20260728, map[string]any{"opts": 1}, nil, true},
		{"unannotated header ignored", Version20260728, map[string]any{"sql": "x"}, map[string]string{"Mcp-Param-Bad": "7"}, true},
		{"older versions mirror nothing", Version20251125, map[string]any{"region": "eu-1"}, map[string]string{"Mcp-Param-Region": "us-1"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := rpc{method: "tools/call", id: 1, params: map[string]any{"name": "db.query", "arguments": tc.args}}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(m.encode(tc.ver)))
			r.Header = m.headers(tc.ver)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.Serve(w, r, mcptest.Admin)
			rep := decodeReply(t, w)
			if tc.ok {
				if rep.status != 200 || rep.msg["error"] != nil {
					t.Fatalf("got %d %s", rep.status, rep.raw)
				}
				return
			}
			if rep.status != 400 || rep.errorCode(t) != codeHeaderMismatch {
				t.Fatalf("got %d %s, want 400 header mismatch", rep.status, rep.raw)
			}
		})
	}
}
