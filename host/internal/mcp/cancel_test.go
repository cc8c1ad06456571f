package mcp

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/idempotency"
)

// sendAs posts m with the caller's Authorization header.
func (f *fixture) sendAs(p dispatch.Principal, auth, ver string, m rpc) reply {
	f.t.Helper()
	h := m.headers(ver)
	h.Set("Authorization", auth)
	return f.do(p, "POST", h, m.encode(ver))
}

// startSlow starts a platform.slow call with id as the caller auth and
// returns its reply channel once the call is in the provider.
func startSlow(t *testing.T, f *fixture, auth, ver string, id any) <-chan reply {
	t.Helper()
	got := make(chan reply, 1)
	go func() {
		got <- f.sendAs(mcptest.Alice, auth, ver, rpc{method: "tools/call", id: id, params: map[string]any{"name": mcptest.Slow}})
	}()
	select {
	case <-f.platform.SlowStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never reached the provider")
	}
	return got
}

// A notifications/cancelled from the caller of a running request cancels
// it in the provider, at every revision, whatever the id's type.
func TestCancelledNotificationCancelsTheCall(t *testing.T) {
	for _, ver := range allVersions {
		for _, id := range []any{7, "req-7"} {
			f := newFixture(t, Options{})
			f.platform.SlowStarted = make(chan struct{}, 1)
			f.platform.SlowRelease = make(chan struct{})
			got := startSlow(t, f, "Bearer alice-token", ver, id)
			if n := f.h.running.count(); n != 1 {
				t.Fatalf("%s: %d requests registered as running, want 1", ver, n)
			}
			// Another caller naming the same id cancels nothing.
			rep := f.sendAs(mcptest.Alice, "Bearer other-token", ver, rpc{method: "notifications/cancelled", params: map[string]any{"requestId": id, "reason": "x"}})
			if rep.status != 202 {
				t.Fatalf("%s: cancel from another caller = %d", ver, rep.status)
			}
			select {
			case r := <-got:
				t.Fatalf("%s: another caller's cancel ended the call: %s", ver, r.raw)
			case <-time.After(50 * time.Millisecond):
			}
			rep = f.sendAs(mcptest.Alice, "Bearer alice-token", ver, rpc{method: "notifications/cancelled", params: map[string]any{"requestId": id, "reason": "user pressed stop"}})
			if rep.status != 202 || len(rep.raw) != 0 {
				t.Fatalf("%s: cancel = %d %s, want 202 with no body", ver, rep.status, rep.raw)
			}
			select {
			case r := <-got:
				res := r.result(t)
				if res["isError"] != true || !contains(toolText(t, res), "was cancelled") {
					t.Errorf("%s id %v: cancelled call answered %s", ver, id, r.raw)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s id %v: the cancel did not end the call", ver, id)
			}
			if n := f.h.running.count(); n != 0 {
				t.Errorf("%s: %d requests still registered after the call ended", ver, n)
			}
		}
	}
}

// A cancel for nothing running, or malformed, is accepted and ignored.
func TestCancelledNotificationForNothing(t *testing.T) {
	f := newFixture(t, Options{})
	for _, params := range []map[string]any{
		{"requestId": 99}, {"requestId": nil}, {"requestId": []any{1}}, {},
	} {
		rep := f.sendAs(mcptest.Alice, "Bearer a", Version20251125, rpc{method: "notifications/cancelled", params: params})
		if rep.status != 202 {
			t.Errorf("cancel %v = %d %s", params, rep.status, rep.raw)
		}
	}
}

// In a batch, each message's context is its own: a finished call does not
// cancel the next one.
func TestBatchCallsDoNotShareCancellation(t *testing.T) {
	f := newFixture(t, Options{})
	body := `[` + string(rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.Search, "arguments": map[string]any{"query": "a"}}}.encode(Version20250326)) +
		`,` + string(rpc{method: "tools/call", id: 2, params: map[string]any{"name": mcptest.Search, "arguments": map[string]any{"query": "b"}}}.encode(Version20250326)) + `]`
	h := rpc{method: "tools/call"}.headers(Version20250326)
	h.Set("Authorization", "Bearer a")
	rep := f.do(mcptest.Alice, "POST", h, []byte(body))
	var msgs []map[string]any
	if err := json.Unmarshal(rep.raw, &msgs); err != nil || len(msgs) != 2 {
		t.Fatalf("batch answer %s: %v", rep.raw, err)
	}
	for _, m := range msgs {
		if res, _ := m["result"].(map[string]any); res == nil || res["isError"] != false {
			t.Errorf("batch message answered %v", m)
		}
	}
}

// The idempotency key in _meta reaches the gate: a repeated action is
// answered from the first call; a key that is not a string is refused.
func TestIdempotencyKeyInMeta(t *testing.T) {
	f := newFixture(t, Options{})
	store, err := idempotency.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	f.platform.Dispatcher.UseIdempotency(dispatch.Idempotency{Store: store, Lease: time.Minute, Retention: time.Hour})
	cancel := func(meta map[string]any) reply {
		return f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 1, params: map[string]any{
			"name": mcptest.Cancel, "arguments": map[string]any{"id": "b-1"}, "_meta": meta,
		}})
	}
	first := cancel(map[string]any{dispatch.MetaIdempotencyKey: "cancel-b1"})
	if res := first.result(t); res["isError"] != false {
		t.Fatalf("first cancel: %s", first.raw)
	}
	again := cancel(map[string]any{dispatch.MetaIdempotencyKey: "cancel-b1"})
	if string(again.raw) != string(first.raw) {
		t.Errorf("repeat with the key = %s, want the first answer %s", again.raw, first.raw)
	}
	// Without the key the booking is already cancelled.
	plain := cancel(nil)
	if res := plain.result(t); res["isError"] != true || !contains(toolText(t, res), "already cancelled") {
		t.Errorf("repeat without a key = %s", plain.raw)
	}
	for _, bad := range []any{7, true, map[string]any{}} {
		rep := cancel(map[string]any{dispatch.MetaIdempotencyKey: bad})
		if rep.errorCode(t) != codeInvalidParams || !contains(rep.errorObj(t)["message"].(string), dispatch.MetaIdempotencyKey+" must be a string") {
			t.Errorf("key %v: %s", bad, rep.raw)
		}
	}
}

// A body nested deeper than the scanner follows is told so, not merely
// that it is not JSON; one within the depth but malformed is not JSON.
func TestParseErrorNamesTheDepth(t *testing.T) {
	f := newFixture(t, Options{MaxBodyBytes: 1 << 20})
	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"v":` +
		strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + `}}}`
	h := rpc{method: "tools/call"}.headers(Version20251125)
	rep := f.do(mcptest.Alice, "POST", h, []byte(deep))
	if rep.status != 400 || rep.errorCode(t) != codeParseError || rep.errorObj(t)["message"] != "parse error: the body nests deeper than 10000 levels" {
		t.Errorf("deep body = %d %s", rep.status, rep.raw)
	}
	rep = f.do(mcptest.Alice, "POST", h, []byte(`{"jsonrpc":"2.0","id":1,"method":[[[}`))
	if rep.status != 400 || rep.errorObj(t)["message"] != "parse error: the body is not valid JSON" {
		t.Errorf("malformed body = %d %s", rep.status, rep.raw)
	}
}
