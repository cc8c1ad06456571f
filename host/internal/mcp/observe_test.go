package mcp

import (
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// TestErrorType: the error type is read from the adapter's own answer,
// not fooled by what an id or a plugin's result holds.
func TestErrorType(t *testing.T) {
	for _, c := range []struct{ resp, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":true}}`, "tool_error"},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"forbidden"}}`, "-32003"},
		{`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}`, "-32700"},
		{`{"jsonrpc":"2.0","id":"\",\"error\":{\"code\":1","result":{"isError":false}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"error":{"code":7},"isError":true},"isError":false,"_meta":{}}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, ""},
	} {
		if got := errorType([]byte(c.resp)); got != c.want {
			t.Errorf("errorType(%s) = %q; want %q", c.resp, got, c.want)
		}
	}
}

// TestObserveEveryRequest: each request of a batch is one operation with
// its method, the registered tool only, and its error type.
func TestObserveEveryRequest(t *testing.T) {
	var ops []Operation
	f := newFixture(t, Options{Observe: func(op Operation) { ops = append(ops, op) }})
	f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.BookingGet, "arguments": map[string]any{"id": "b-1"}}})
	f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 2, params: map[string]any{"name": "made." + strings.Repeat("up", 20)}})
	f.send(mcptest.Bob, Version20251125, rpc{method: "tools/call", id: 3, params: map[string]any{"name": mcptest.BookingGet, "arguments": map[string]any{"id": "b-1"}}})
	f.send(mcptest.Alice, Version20260728, rpc{method: "tools/list", id: 4})
	f.send(mcptest.Alice, Version20251125, rpc{method: "no/such", id: 5})
	want := []Operation{
		{Method: "tools/call", Tool: mcptest.BookingGet, ProtocolVersion: Version20251125},
		{Method: "tools/call", ProtocolVersion: Version20251125, ErrorType: "-32602"},
		{Method: "tools/call", Tool: mcptest.BookingGet, ProtocolVersion: Version20251125, ErrorType: "-32003"},
		{Method: "tools/list", ProtocolVersion: Version20260728},
		{Method: "unknown", ProtocolVersion: Version20251125, ErrorType: "-32601"},
	}
	if len(ops) != len(want) {
		t.Fatalf("%d operations observed; want %d: %+v", len(ops), len(want), ops)
	}
	for i := range want {
		got := ops[i]
		if got.Duration <= 0 || got.Duration > time.Minute {
			t.Errorf("operation %d took %v", i, got.Duration)
		}
		got.Duration = 0
		if got != want[i] {
			t.Errorf("operation %d: %+v; want %+v", i, got, want[i])
		}
	}
}
