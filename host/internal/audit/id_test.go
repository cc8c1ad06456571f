package audit_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
)

func TestNewID(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	a := audit.NewID(t0)
	if len(a) != audit.IDLen || strings.Trim(a, "0123456789ABCDEFGHJKMNPQRSTVWXYZ") != "" {
		t.Fatalf("NewID = %q; want %d Crockford base32 characters", a, audit.IDLen)
	}
	// The first ten characters are the milliseconds: the same for one
	// instant, larger for a later one.
	later := audit.NewID(t0.Add(time.Millisecond))
	if later <= a || later[:10] == a[:10] {
		t.Fatalf("NewID a millisecond later = %s; want it after %s with another time part", later, a)
	}
	// Same millisecond and a clock stepping back: still increasing.
	prev := later
	for _, at := range []time.Time{t0.Add(time.Millisecond), t0.Add(time.Millisecond), t0, t0.Add(-time.Hour)} {
		id := audit.NewID(at)
		if id <= prev {
			t.Fatalf("NewID(%v) = %s after %s; want increasing", at, id, prev)
		}
		prev = id
	}
	// A later real time sorts after all of those.
	if id := audit.NewID(time.Now()); id <= prev {
		t.Fatalf("NewID(now) = %s; want it after %s", id, prev)
	}
}

func TestNewIDConcurrent(t *testing.T) {
	const goroutines, each = 8, 1000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	now := time.Now()
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], audit.NewID(now))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		for i, id := range list {
			if seen[id] {
				t.Fatalf("NewID returned %s twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("one goroutine's IDs %s then %s; want increasing", list[i-1], id)
			}
		}
	}
}
