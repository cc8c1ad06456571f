package stdio

import (
	"strings"
	"testing"
)

// TestDuplicateMembersRefused sends messages naming a member twice through
// the bridge: the client reads capgate's own refusal, a JSON-RPC error
// under its request's id (or, for arguments, the tool error), never a
// call run with one of the two values.
func TestDuplicateMembersRefused(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})

	// Arguments: the gate's invalid input, a tool error the agent reads.
	args := legacyCall(1, capEcho, `{"q":"a","q":"b"}`)
	got := s.roundTrip(args)
	if want := c.post(t, userToken, "", args, nil); got != want {
		t.Fatalf("through the bridge:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, `invalid arguments for demo.echo: duplicate member \"q\" at /q`) {
		t.Fatalf("duplicate argument: %s", got)
	}

	for _, tc := range []struct {
		name, msg, id string
		code          int
		message       string
	}{
		{"two methods", `{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"demo.echo","arguments":{}}}`,
			"2", -32600, `invalid request: duplicate member "method" at /method`},
		{"two names", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo.echo","name":"demo.secret","arguments":{}}}`,
			"3", -32602, `invalid params: duplicate member "name" at /params/name`},
		{"two names at 2026-07-28", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"demo.echo","name":"demo.secret","arguments":{},` + modernMeta + `}}`,
			"4", -32602, `invalid params: duplicate member "name" at /params/name`},
		// capgate cannot tell which id to answer; the bridge gives its
		// error the one it read, so the client is not left waiting.
		{"two ids", `{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/list"}`,
			"6", -32600, `invalid request: duplicate member "id" at /id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := decodeError(t, s.roundTrip(tc.msg))
			if string(e.ID) != tc.id || e.Error.Code != tc.code || e.Error.Message != tc.message {
				t.Fatalf("got id %s, %d %q; want id %s, %d %q", e.ID, e.Error.Code, e.Error.Message, tc.id, tc.code, tc.message)
			}
		})
	}
	// The session goes on.
	if got := s.roundTrip(legacyCall(7, capEcho, `{"q":"a"}`)); !strings.Contains(got, `"isError":false`) {
		t.Fatalf("after the refusals: %s", got)
	}
}
