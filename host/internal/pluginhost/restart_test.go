package pluginhost

import (
	"strings"
	"testing"
	"time"
)

// The waits double from InitialBackoff up to MaxBackoff, spread by Jitter,
// and the window holds at most MaxRestarts; old restarts leave it.
func TestRestartBackoff(t *testing.T) {
	p := RestartPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Jitter: 0.2, MaxRestarts: 5, Window: time.Minute}
	for _, tc := range []struct {
		name string
		rand float64
		want []time.Duration
	}{
		{"no spread", 0.5, []time.Duration{100, 200, 400, 500, 500}},
		{"lowest", 0, []time.Duration{80, 160, 320, 400, 400}},
		{"highest", 1, []time.Duration{120, 240, 480, 600, 600}},
	} {
		r := newRestarts(p)
		r.rand = func() float64 { return tc.rand }
		now := time.Unix(1000, 0)
		for i, want := range tc.want {
			d, ok := r.next(now.Add(time.Duration(i) * time.Second))
			if !ok || d != want*time.Millisecond {
				t.Errorf("%s: restart %d waits %v (ok %v), want %v", tc.name, i+1, d, ok, want*time.Millisecond)
			}
		}
		if _, ok := r.next(now.Add(10 * time.Second)); ok {
			t.Errorf("%s: a sixth restart within the window was allowed", tc.name)
		}
		// A minute after the first restart it has left the window.
		if d, ok := r.next(now.Add(time.Minute + time.Second)); !ok || d != tc.want[4]*time.Millisecond {
			t.Errorf("%s: restart after the first left the window = %v, %v", tc.name, d, ok)
		}
	}
	if _, ok := newRestarts(RestartPolicy{InitialBackoff: time.Second}).next(time.Now()); ok {
		t.Error("MaxRestarts 0 allowed a restart")
	}
}

func TestRestartPolicyCheck(t *testing.T) {
	good := RestartPolicy{InitialBackoff: time.Second, MaxBackoff: time.Second, MaxRestarts: 1, Window: time.Second}
	for _, tc := range []struct {
		p    RestartPolicy
		want string
	}{
		{RestartPolicy{}, ""},
		{good, ""},
		{RestartPolicy{MaxRestarts: 0, InitialBackoff: -1}, ""},
		{RestartPolicy{MaxRestarts: -1}, "max_restarts must be 0"},
		{RestartPolicy{MaxRestarts: 1, Window: time.Second}, "initial_backoff must be more than 0"},
		{RestartPolicy{MaxRestarts: 1, InitialBackoff: time.Second, MaxBackoff: time.Millisecond, Window: time.Second}, "max_backoff"},
		{RestartPolicy{MaxRestarts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second, Jitter: 1.5, Window: time.Second}, "jitter must be between 0 and 1"},
		{RestartPolicy{MaxRestarts: 1, InitialBackoff: time.Second, MaxBackoff: time.Second}, "window must be more than 0"},
	} {
		err := tc.p.Check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Check = %v, want %q", tc.p, err, tc.want)
		}
	}
	if DefaultRestartPolicy.Check() != nil || (RestartPolicy{}).orDefault() != DefaultRestartPolicy {
		t.Error("the default policy is not what the zero policy stands for")
	}
}
