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
	// InitialBackoff is the wait before the first restart.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait.
	MaxBackoff time.Duration
	// Jitter spreads each wait by up to this fraction either way, 0 to 1.
	Jitter float64
	// MaxRestarts is how many restarts Window may hold; 0 means the
	// plugin is never restarted.
	MaxRestarts int
	// Window is the span MaxRestarts counts over.
	Window time.Duration
}

// DefaultRestartPolicy is what an operator would pick without thinking
// about it: back within a quarter second after a one-off crash, and a
// crash loop (5 restarts in 5 minutes) is reported as such within about
// eight seconds instead of being retried forever. The zero RestartPolicy
// stands for it.
var DefaultRestartPolicy = RestartPolicy{
	InitialBackoff: 250 * time.Millisecond,
	MaxBackoff:     30 * time.Second,
	Jitter:         0.2,
	MaxRestarts:    5,
	Window:         5 * time.Minute,
}

// Check reports what makes r unusable, naming the field as the config
// does; nil for the zero policy (the default) and every usable one.
func (r RestartPolicy) Check() error {
	switch {
	case r == RestartPolicy{}:
		return nil
	case r.MaxRestarts < 0:
		return fmt.Errorf("max_restarts must be 0 (never restart) or more, got %d", r.MaxRestarts)
	case r.MaxRestarts == 0:
		return nil // never restarted: the rest does not matter
	case r.InitialBackoff <= 0:
		return fmt.Errorf("initial_backoff must be more than 0, got %s", r.InitialBackoff)
	case r.MaxBackoff < r.InitialBackoff:
		return fmt.Errorf("max_backoff (%s) must be at least initial_backoff (%s)", r.MaxBackoff, r.InitialBackoff)
	case r.Jitter < 0 || r.Jitter > 1:
		return fmt.Errorf("jitter must be between 0 and 1, got %g", r.Jitter)
	case r.Window <= 0:
		return fmt.Errorf("window must be more than 0, got %s", r.Window)
	}
	return nil
}

// orDefault is r, or DefaultRestartPolicy for the zero policy.
func (r RestartPolicy) orDefault() RestartPolicy {
	if r == (RestartPolicy{}) {
		return DefaultRestartPolicy
	}
	return r
}

// String describes the policy for logs.
func (r RestartPolicy) String() string {
	if r.MaxRestarts <= 0 {
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
	if r.policy.MaxRestarts <= 0 {
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
