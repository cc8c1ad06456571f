package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/capgate/capgate/internal/dispatch"
)

// maxIdleKeys is how many buckets Memory keeps before it forgets the full
// ones: a full bucket is the same as a fresh one, so forgetting it changes
// no decision, and the map cannot grow with every token ever seen.
const maxIdleKeys = 100_000

// Memory counts calls in this process, a token bucket per key
// (golang.org/x/time/rate). Replicas each count their own: use a shared
// counter to hold one limit across them.
type Memory struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	rate dispatch.Rate
	lim  *rate.Limiter
}

var _ dispatch.Limiter = (*Memory)(nil)

// NewMemory returns an empty in-process counter.
func NewMemory() *Memory { return &Memory{buckets: map[string]*bucket{}, now: time.Now} }

// Allow implements dispatch.Limiter.
func (m *Memory) Allow(_ context.Context, key string, r dispatch.Rate) (bool, time.Duration, error) {
	if r.Count <= 0 || r.Per <= 0 {
		return true, 0, nil // no rate: nothing to count (the gate passes none)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[key]
	if b == nil || b.rate != r {
		if len(m.buckets) >= maxIdleKeys {
			m.forgetFull(now)
		}
		b = &bucket{rate: r, lim: rate.NewLimiter(rate.Every(r.Interval()), r.BurstOrCount())}
		m.buckets[key] = b
	}
	if b.lim.AllowN(now, 1) {
		return true, 0, nil // without the allocation of a reservation
	}
	res := b.lim.ReserveN(now, 1)
	if !res.OK() {
		return false, r.Per, nil
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return false, wait, nil
	}
	return true, 0, nil
}

// forgetFull drops the buckets that have refilled to their burst.
func (m *Memory) forgetFull(now time.Time) {
	for k, b := range m.buckets {
		if b.lim.TokensAt(now) >= float64(b.rate.BurstOrCount()) {
			delete(m.buckets, k)
		}
	}
}
