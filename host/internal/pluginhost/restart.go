package pluginhost

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// RestartPolicy is how the host brings back a plugin that died: after a
// backoff that doubles with each restart in Window (from InitialBackoff up
// to MaxBackoff, spread by Jitter so replicas do not restart in step), and
// not after MaxRestarts restarts within Window, when the plugin keeps dying
// and another restart would only hide that.
type RestartPolicy struct {
	// InitialBackoff is the wait before the first restart; 0 means
	// DefaultRestartPolicy's.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait; 0 means DefaultRestartPolicy's.
	MaxBackoff time.Duration
	// Jitter spreads each wait by up to this fraction either way, 0 to 1;
	// 0 means DefaultRestartPolicy's, negative means none.
	Jitter float64
	// MaxRestarts is how many restarts Window may hold; 0 means
	// DefaultRestartPolicy's, negative means the plugin is never restarted.
	MaxRestarts int
	// Window is the span MaxRestarts counts over; 0 means
	// DefaultRestartPolicy's.
	Window time.Duration
}

// DefaultRestartPolicy is what an operator would pick without thinking
// about it: back within a quarter second after a one-off crash, and a
// crash loop (5 restarts in 5 minutes) is reported as such within about
// eight seconds instead of being retried forever.
var DefaultRestartPolicy = RestartPolicy{
	InitialBackoff: 250 * time.Millisecond,
	MaxBackoff:     30 * time.Second,
	Jitter:         0.2,
	MaxRestarts:    5,
	Window:         5 * time.Minute,
}

// orDefault fills the zero fields from DefaultRestartPolicy.
func (r RestartPolicy) orDefault() RestartPolicy {
	d := DefaultRestartPolicy
	if r.InitialBackoff > 0 {
		d.InitialBackoff = r.InitialBackoff
	}
	if r.MaxBackoff > 0 {
		d.MaxBackoff = r.MaxBackoff
	}
	switch {
	case r.Jitter < 0:
		d.Jitter = 0
	case r.Jitter > 0:
		d.Jitter = min(r.Jitter, 1)
	}
	if r.MaxRestarts != 0 {
		d.MaxRestarts = r.MaxRestarts
	}
	if r.Window > 0 {
		d.Window = r.Window
	}
	d.MaxBackoff = max(d.MaxBackoff, d.InitialBackoff)
	return d
}

// String describes the policy for logs.
func (r RestartPolicy) String() string {
	if r.MaxRestarts < 0 {
		return "never restarted"
	}
	return fmt.Sprintf("at most %d restarts in %s, backoff %s to %s", r.MaxRestarts, r.Window, r.InitialBackoff, r.MaxBackoff)
}

// restarts counts a plugin's recent restarts against its policy.
type restarts struct {
	policy RestartPolicy
	times  []time.Time // restarts attempted within the window, oldest first
	rand   func() float64
}

func newRestarts(p RestartPolicy) *restarts {
	return &restarts{policy: p, rand: rand.Float64}
}

// next records one more restart at now and returns how long to wait before
// it, or false when the policy allows no more.
func (r *restarts) next(now time.Time) (time.Duration, bool) {
	if r.policy.MaxRestarts < 0 {
		return 0, false
	}
	cut := now.Add(-r.policy.Window)
	kept := r.times[:0]
	for _, t := range r.times {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	r.times = kept
	if len(r.times) >= r.policy.MaxRestarts {
		return 0, false
	}
	r.times = append(r.times, now)
	d := r.policy.InitialBackoff
	for range len(r.times) - 1 {
		d *= 2
		if d >= r.policy.MaxBackoff {
			d = r.policy.MaxBackoff
			break
		}
	}
	if j := r.policy.Jitter; j > 0 {
		d = time.Duration(float64(d) * (1 - j + 2*j*r.rand()))
	}
	return d, true
}

// inWindow is how many restarts the window holds now.
func (r *restarts) inWindow() int { return len(r.times) }
