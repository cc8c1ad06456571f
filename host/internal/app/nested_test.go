package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// serveRelay serves a host with the relay plugin (which calls capabilities
// as its caller) and hello, and returns its address.
func serveRelay(t *testing.T, packs string) string {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: test-both-1, role: both, scope: read}
  - {token: test-relay-1, role: relayer, scope: read}
roles: {both: [relay.use, hello.greet], relayer: [relay.use]}
packs: {%s}
plugins: [{name: relay, path: %s}, {name: hello, path: %s}]
`, t.TempDir(), packs, relayBin, helloBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// relayArgs is relay.call's arguments for calling capability with args,
// nested depth times (relay calling relay calling … capability).
func relayArgs(depth int, capability string, args any) map[string]any {
	a := map[string]any{"capability": capability, "args": args}
	for range depth {
		a = map[string]any{"capability": "relay.call", "args": a}
	}
	return a
}

// TestNestedCallsPassTheGate: a capability a plugin calls for its caller is
// decided by the gate exactly as the caller's own call would be.
func TestNestedCallsPassTheGate(t *testing.T) {
	addr := serveRelay(t, "relay: true, hello: true")
	greet := map[string]any{"name": "nest"}
	for _, tc := range []struct {
		name, token string
		args        map[string]any
		want        string // a substring of relay.call's result or error
	}{
		{"admitted", "test-both-1", relayArgs(0, "hello.greet", greet), `"result":{"greeting":"hello, nest"}`},
		{"permission refused as for the caller", "test-relay-1", relayArgs(0, "hello.greet", greet), `"refused":"permission"`},
		{"arguments validated", "test-both-1", relayArgs(0, "hello.greet", map[string]any{"name": 7}), "invalid arguments"},
		{"unknown capability", "test-both-1", relayArgs(0, "nope.nothing", map[string]any{}), `no such capability`},
		{"nesting within the bound", "test-both-1", relayArgs(3, "hello.greet", greet), `hello, nest`},
		{"nesting beyond the bound", "test-both-1", relayArgs(5, "hello.greet", greet), "nest deeper than 4"},
		{"a forged call id acts for no one", "test-both-1",
			map[string]any{"capability": "hello.greet", "args": greet, "call_id": "zz9"}, "is not a call plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, msg := mcpTool(t, addr, tc.token, "relay.call", tc.args)
			got := msg
			if msg == "" {
				b, _ := json.Marshal(out)
				got = string(b)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("relay.call = %s, want %q in it", got, tc.want)
			}
		})
	}
}

// TestNestedCallRefusedWhenPackOff: with hello's pack off, the relay may
// not reach it either: to the relay, as to any caller, it does not exist.
func TestNestedCallRefusedWhenPackOff(t *testing.T) {
	addr := serveRelay(t, "relay: true, hello: false")
	out, msg := mcpTool(t, addr, "test-both-1", "relay.call", relayArgs(0, "hello.greet", map[string]any{"name": "x"}))
	if msg != "" || out["error"] != "invoke hello.greet: no such capability" {
		t.Errorf("relay.call to a pack that is off = %v %q, want no such capability", out, msg)
	}
}
