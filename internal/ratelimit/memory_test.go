package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
)

// clock is a settable time for the counter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newAt(c *clock) *Memory {
	m := NewMemory()
	m.now = c.now
	return m
}

func allow(t *testing.T, m *Memory, key dispatch.LimitKey, r dispatch.Rate) (bool, time.Duration) {
	t.Helper()
	ok, wait, err := m.Allow(context.Background(), key, r)
	if err != nil {
		t.Fatal(err)
	}
	return ok, wait
}

// TestMemoryRate: a burst is admitted at once, the next call is told how
// long until the rate has room, and room comes back at the rate.
func TestMemoryRate(t *testing.T) {
	c := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := newAt(c)
	r := dispatch.Rate{Count: 5, Per: time.Second}
	for i := range 5 {
		if ok, _ := allow(t, m, dispatch.LimitKey{Token: "k"}, r); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := allow(t, m, dispatch.LimitKey{Token: "k"}, r)
	if ok || wait != 200*time.Millisecond {
		t.Fatalf("sixth call: ok=%v wait=%v, want refused with 200ms", ok, wait)
	}
	// A refused call takes nothing: asking again at once gets the same wait.
	if ok, again := allow(t, m, dispatch.LimitKey{Token: "k"}, r); ok || again != wait {
		t.Fatalf("asked again: ok=%v wait=%v", ok, again)
	}
	c.advance(199 * time.Millisecond)
	if ok, _ := allow(t, m, dispatch.LimitKey{Token: "k"}, r); ok {
		t.Fatal("admitted before the interval passed")
	}
	c.advance(time.Millisecond)
	if ok, _ := allow(t, m, dispatch.LimitKey{Token: "k"}, r); !ok {
		t.Fatal("refused after the interval")
	}
	// Keys are counted apart.
	if ok, _ := allow(t, m, dispatch.LimitKey{Token: "other"}, r); !ok {
		t.Fatal("another key shares the bucket")
	}
}

// TestMemoryBurstAndChange: a burst other than the count is honoured, and
// a changed rate (a reloaded config) starts the key's bucket afresh.
func TestMemoryBurstAndChange(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	m := newAt(c)
	slow := dispatch.Rate{Count: 1, Per: time.Minute, Burst: 2}
	for range 2 {
		if ok, _ := allow(t, m, dispatch.LimitKey{Token: "k"}, slow); !ok {
			t.Fatal("burst of 2 refused")
		}
	}
	if ok, wait := allow(t, m, dispatch.LimitKey{Token: "k"}, slow); ok || wait != time.Minute {
		t.Fatalf("third call: ok=%v wait=%v, want refused for the minute the next share takes", ok, wait)
	}
	fast := dispatch.Rate{Count: 10, Per: time.Second}
	if ok, _ := allow(t, m, dispatch.LimitKey{Token: "k"}, fast); !ok {
		t.Fatal("a new rate kept the old, empty bucket")
	}
}

// TestMemoryForgetsOnlyFullBuckets: past its size the counter drops buckets
// that have refilled, which changes no decision, and keeps the others.
func TestMemoryForgetsOnlyFullBuckets(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	m := newAt(c)
	r := dispatch.Rate{Count: 1, Per: time.Hour}
	for i := range maxIdleKeys - 1 {
		allow(t, m, dispatch.LimitKey{Token: fmt.Sprint("idle", i)}, r)
	}
	c.advance(2 * time.Hour)                         // every idle bucket is full again
	allow(t, m, dispatch.LimitKey{Token: "busy"}, r) // empty for an hour
	allow(t, m, dispatch.LimitKey{Token: "new"}, r)  // over the size: the full ones go
	if n := m.keys.Load(); n != 2 {
		t.Errorf("%d buckets kept, want busy and new", n)
	}
	if ok, _ := allow(t, m, dispatch.LimitKey{Token: "busy"}, r); ok {
		t.Error("forgetting the full buckets refilled an empty one")
	}
}

// TestMemoryConcurrent: concurrent callers of one key are admitted exactly
// the burst between them.
func TestMemoryConcurrent(t *testing.T) {
	m := NewMemory()
	r := dispatch.Rate{Count: 100, Per: time.Hour}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if ok, _, _ := m.Allow(context.Background(), dispatch.LimitKey{Token: "k"}, r); ok {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if admitted != 100 {
		t.Errorf("admitted %d of 400 calls, want the burst of 100", admitted)
	}
}

// TestMemoryNoRate: a rate that limits nothing admits every call and
// never divides by its zero count.
func TestMemoryNoRate(t *testing.T) {
	m := NewMemory()
	for _, r := range []dispatch.Rate{{}, {Count: 0, Per: time.Second}, {Count: 3, Per: 0}} {
		if ok, wait := allow(t, m, dispatch.LimitKey{Token: "k"}, r); !ok || wait != 0 {
			t.Errorf("rate %+v: ok=%v wait=%v", r, ok, wait)
		}
	}
	if n := m.keys.Load(); n != 0 {
		t.Errorf("%d buckets kept for rates that limit nothing", n)
	}
}
