package app_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit/audittest"
	"github.com/capgate/capgate/host/internal/config"
)

// governedConfig is a host with the booking plugin and one action token,
// plus extra settings.
func governedConfig(t *testing.T, dataDir, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: govern-token-1, role: r, scope: action, user_id: alice}]
roles: {r: [booking.read, booking.write, catalogue.read]}
packs: {booking: true}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
%s`, dataDir, bookingBin, extra)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// step is the refusal step of a tools/call answer, "" when admitted.
func step(t *testing.T, addr, tool string, args map[string]any) string {
	t.Helper()
	_, e := rpc(t, addr, "govern-token-1", "tools/call", map[string]any{"name": tool, "arguments": args})
	if e == nil {
		return ""
	}
	data, _ := e["data"].(map[string]any)
	s, _ := data["step"].(string)
	if s == "" {
		t.Fatalf("%s: error %v, not a refusal", tool, e)
	}
	return s
}

// cancel is an action that changes nothing when admitted: there is no
// such booking.
var cancel = map[string]any{"id": "bk_aaaaaaaaaaaa"}

// TestAuditUnavailable: while the trail's database refuses its records,
// actions are refused at step audit and reads carry on, until records can
// be written again; with on_unavailable: allow, actions carry on.
func TestAuditUnavailable(t *testing.T) {
	for _, mode := range []string{"refuse_actions", "allow"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			addr, _ := serveSearch(t, governedConfig(t, dir, "audit: {on_unavailable: "+mode+"}"), nil)
			if s := step(t, addr, "booking.cancel", cancel); s != "" {
				t.Fatalf("an action with the trail up: refused at %s", s)
			}
			repair := (&audittest.Env{T: t, Dir: dir}).FailWrites("")
			// The writer learns at its next flush that records do not go in.
			if mode == "refuse_actions" {
				for deadline := time.Now().Add(10 * time.Second); step(t, addr, "booking.cancel", cancel) != "audit"; time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("actions still admitted 10 s after the trail stopped taking records")
					}
				}
			} else {
				time.Sleep(time.Second) // several flushes have failed by now
				if s := step(t, addr, "booking.cancel", cancel); s != "" {
					t.Fatalf("with on_unavailable: allow, an action was refused at %s", s)
				}
			}
			if s := step(t, addr, "booking.list", map[string]any{}); s != "" {
				t.Errorf("a read with the trail down: refused at %s", s)
			}
			repair()
			for deadline := time.Now().Add(20 * time.Second); step(t, addr, "booking.cancel", cancel) != ""; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("actions still refused 20 s after the trail took records again")
				}
			}
		})
	}
}

// TestRedisUnreachable: rate limits counted in a Redis that cannot be
// reached refuse the calls they apply to (on_redis_error: refuse, the
// default) or let them through uncounted (allow); calls no limit applies
// to carry on either way, and the host starts regardless.
func TestRedisUnreachable(t *testing.T) {
	for _, mode := range []string{"refuse", "allow"} {
		t.Run(mode, func(t *testing.T) {
			addr, _ := serveSearch(t, governedConfig(t, t.TempDir(), fmt.Sprintf(
				"limits: {redis_url: \"redis://127.0.0.1:1/0\", on_redis_error: %s, capabilities: {booking.list: {rate: 100/s}}}", mode)), nil)
			want := map[string]string{"refuse": "rate_limit", "allow": ""}[mode]
			if s := step(t, addr, "booking.list", map[string]any{}); s != want {
				t.Errorf("a limited call with Redis unreachable: step %q, want %q", s, want)
			}
			if s := step(t, addr, "booking.resources", map[string]any{}); s != "" {
				t.Errorf("an unlimited call: refused at %s", s)
			}
		})
	}
}
