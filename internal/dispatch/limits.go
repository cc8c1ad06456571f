package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
)

// Rate is a sustained rate and a burst: Count calls per Per on average,
// at most Burst of them at once. The zero Rate limits nothing.
type Rate struct {
	Count int
	Per   time.Duration
	// Burst is how many calls may come at once; 0 means Count.
	Burst int
}

// IsZero reports whether r limits nothing.
func (r Rate) IsZero() bool { return r.Count == 0 }

// Interval is the time one call's share of the rate takes to come back.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.Count) }

// BurstOrCount is the burst in effect: Burst, or Count when unset.
func (r Rate) BurstOrCount() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.Count
}

func (r Rate) String() string {
	if r.IsZero() {
		return "unlimited"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	if unit == "" {
		unit = r.Per.String()
	}
	return fmt.Sprintf("%d/%s (burst %d)", r.Count, unit, r.BurstOrCount())
}

// ParseRate reads a rate as written in the configuration: "10/s", "5/m"
// or "100/h".
func ParseRate(s string) (Rate, error) {
	n, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want <count>/<s|m|h>, as in 10/s", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || count < 1 || count > 1_000_000 {
		return Rate{}, fmt.Errorf("rate %q: the count must be a whole number from 1 to 1000000", s)
	}
	per, ok := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[strings.TrimSpace(unit)]
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: the unit must be s, m or h", s)
	}
	return Rate{Count: count, Per: per}, nil
}

func (r Rate) validate(where string) error {
	switch {
	case r.IsZero() && r.Burst == 0:
		return nil
	case r.Count < 0 || r.Per <= 0 || r.Burst < 0 || (r.Count == 0 && r.Burst > 0):
		return fmt.Errorf("%s: %+v is not a rate (count and period must be positive, burst not negative)", where, r)
	case r.Per/time.Duration(r.Count) <= 0:
		return fmt.Errorf("%s: %d calls per %s is faster than the clock can count", where, r.Count, r.Per)
	case r.BurstOrCount() > math.MaxInt32:
		return fmt.Errorf("%s: burst %d is too large", where, r.BurstOrCount())
	}
	return nil
}

// Limits are the rate limits the gate applies, after the permission step
// and before the arguments are read. Each token is counted on its own.
type Limits struct {
	// PerToken bounds a token's calls to all capabilities together.
	PerToken Rate
	// Default bounds a token's calls to each capability, where neither
	// Capabilities nor Roles says otherwise.
	Default Rate
	// Roles replace Default for tokens of a role.
	Roles map[string]Rate
	// Capabilities replace Default and Roles for one capability.
	Capabilities map[string]Rate
}

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool {
	return l.PerToken.IsZero() && l.Default.IsZero() && len(l.Roles) == 0 && len(l.Capabilities) == 0
}

func (l Limits) clone() Limits {
	l.Roles, l.Capabilities = maps.Clone(l.Roles), maps.Clone(l.Capabilities)
	return l
}

func (l Limits) validate() error {
	errs := []error{l.PerToken.validate("limits.per_token"), l.Default.validate("limits.default")}
	for role, r := range l.Roles {
		errs = append(errs, r.validate("limits.roles."+role))
	}
	for c, r := range l.Capabilities {
		errs = append(errs, r.validate("limits.capabilities."+c))
	}
	return errors.Join(errs...)
}

// forCall is the per-capability rate for p calling capability.
func (l Limits) forCall(p Principal, capability string) Rate {
	if r, ok := l.Capabilities[capability]; ok {
		return r
	}
	if r, ok := l.Roles[p.Role]; ok {
		return r
	}
	return l.Default
}

// Limiter counts calls against rates. Implementations keep one bucket per
// key, and start it afresh when the rate asked for changes.
type Limiter interface {
	// Allow takes one call from key's bucket under r. When the bucket is
	// empty it takes nothing and reports how long until it could. An
	// error means the count could not be kept; the gate then refuses.
	Allow(ctx context.Context, key LimitKey, r Rate) (ok bool, retryAfter time.Duration, err error)
}

// Counter is a Limiter that can name where it keeps its counts ("Redis"),
// for the refusal a caller gets while it is unreachable; never an
// address.
type Counter interface {
	Limiter
	Where() string
}

// counterName is " (kept in <where>)" for a Counter, empty otherwise.
func counterName(l Limiter) string {
	if c, ok := l.(Counter); ok && c.Where() != "" {
		return " (kept in " + c.Where() + ")"
	}
	return ""
}

// LimitKey names a bucket: a token's calls to one capability, or, with
// Capability empty, all of that token's calls. A struct rather than one
// string, so that the step, which runs on every call, builds nothing:
// an in-process counter can key its map by it as it is.
type LimitKey struct {
	Token, Capability string
}

// String is the key as text, the same in every replica and version: a
// shared counter names its buckets by it.
func (k LimitKey) String() string {
	if k.Capability == "" {
		return "token\x00" + k.Token
	}
	return "call\x00" + k.Token + "\x00" + k.Capability
}

// limit is the rate-limit step: the call's own capability first, then the
// token's overall rate, so a call the first refuses costs the second
// nothing.
func (d *Dispatcher) limit(ctx context.Context, pol *compiledPolicy, p Principal, capability string) (*Refusal, error) {
	if d.limiter == nil || pol.limits.IsZero() {
		return nil, nil
	}
	for _, c := range [...]counted{perCall, perToken} {
		rate := c.rate(pol.limits, p, capability)
		if rate.IsZero() {
			continue
		}
		if r, err := d.take(ctx, c.key(p, capability), rate, capability, c); r != nil || err != nil {
			return r, err
		}
	}
	return nil, nil
}

// take takes one call from key's bucket under rate: nil when there was
// one, the refusal (naming what c counts) when not or when the count is
// unavailable.
func (d *Dispatcher) take(ctx context.Context, key LimitKey, rate Rate, capability string, c counted) (*Refusal, error) {
	ok, wait, err := d.limiter.Allow(ctx, key, rate)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return &Refusal{Step: StepRateLimit, Capability: capability,
			Reason: "the rate-limit count" + counterName(d.limiter) + " is unavailable, so calls are refused until it is back"}, nil
	}
	if !ok {
		wait = max(wait, time.Millisecond)
		return &Refusal{Step: StepRateLimit, Capability: capability, RetryAfter: wait,
			Reason: fmt.Sprintf("%s are limited to %s; retry in %s", c.what(capability), rate, readable(wait))}, nil
	}
	return nil, nil
}

// counted is what a limit counts. Its message is built only when needed:
// the step runs on every call.
type counted int

const (
	perCall   counted = iota // a token's calls to one capability
	perToken                 // a token's calls to all of them
	perUnseen                // a token's calls to names it cannot see
)

func (c counted) rate(l Limits, p Principal, capability string) Rate {
	if c == perCall {
		return l.forCall(p, capability)
	}
	return l.PerToken
}

func (c counted) key(p Principal, capability string) LimitKey {
	if c == perCall {
		return LimitKey{Token: p.Token, Capability: capability}
	}
	return LimitKey{Token: p.Token}
}

func (c counted) what(capability string) string {
	switch c {
	case perCall:
		return "this token's calls to " + capability
	case perUnseen:
		return "this token's calls to capabilities it cannot see"
	}
	return "this token's calls"
}

// readable renders a wait for a person: whole seconds from a second up,
// milliseconds (rounded up) below.
func readable(d time.Duration) string {
	if d >= time.Second {
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%d ms", (d + time.Millisecond - 1).Milliseconds())
}
