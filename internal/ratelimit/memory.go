package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
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
	// buckets maps a dispatch.LimitKey to its *bucket. Every call reads
	// it and few add to it, so a sync.Map spares the calls a lock of their
	// own; each bucket's limiter has its own.
	buckets sync.Map
	keys    atomic.Int64 // entries in buckets
	// forgetting admits one sweep of the full buckets at a time.
	forgetting sync.Mutex
	now        func() time.Time
}

type bucket struct {
	rate dispatch.Rate
	lim  *rate.Limiter
}

var _ dispatch.Limiter = (*Memory)(nil)

// NewMemory returns an empty in-process counter.
func NewMemory() *Memory { return &Memory{now: time.Now} }

// Allow implements dispatch.Limiter.
func (m *Memory) Allow(_ context.Context, key dispatch.LimitKey, r dispatch.Rate) (bool, time.Duration, error) {
	if r.Count <= 0 || r.Per <= 0 {
		return true, 0, nil // no rate: nothing to count (the gate passes none)
	}
	now := m.now()
	b := m.bucket(key, r, now)
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

// bucket returns key's bucket for r, a fresh one when key has none or
// one for another rate (the rate changed with the configuration).
func (m *Memory) bucket(key dispatch.LimitKey, r dispatch.Rate, now time.Time) *bucket {
	v, ok := m.buckets.Load(key)
	for {
		if ok && v.(*bucket).rate == r {
			return v.(*bucket)
		}
		fresh := &bucket{rate: r, lim: rate.NewLimiter(rate.Every(r.Interval()), r.BurstOrCount())}
		if !ok {
			if m.keys.Load() >= maxIdleKeys {
				m.forgetFull(now)
			}
			if v, ok = m.buckets.LoadOrStore(key, fresh); !ok {
				m.keys.Add(1)
				return fresh
			}
			continue // another call added it first: use theirs
		}
		if m.buckets.CompareAndSwap(key, v, fresh) {
			return fresh
		}
		v, ok = m.buckets.Load(key)
	}
}

// forgetFull drops the buckets that have refilled to their burst. A call
// holding one as it goes counts against the dropped bucket, so at most
// one call each is not counted; the next starts a full bucket, as the
// dropped one was.
func (m *Memory) forgetFull(now time.Time) {
	if !m.forgetting.TryLock() {
		return // another call is sweeping
	}
	defer m.forgetting.Unlock()
	m.buckets.Range(func(k, v any) bool {
		b := v.(*bucket)
		if b.lim.TokensAt(now) >= float64(b.rate.BurstOrCount()) && m.buckets.CompareAndDelete(k, v) {
			m.keys.Add(-1)
		}
		return true
	})
}
