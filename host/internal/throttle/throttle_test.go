package throttle

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestPerClient: a client is refused after its own failures, others are
// not, and the window passing lets it try again.
func TestPerClient(t *testing.T) {
	f := New(Limits{PerClient: 3, Global: 100, Window: time.Minute})
	for range 3 {
		if s, _ := f.Allow("a", t0); s != None {
			t.Fatalf("a before its third failure: refused by %s", s)
		}
		f.Fail("a", t0)
	}
	if s, left := f.Allow("a", t0.Add(10*time.Second)); s != Client || left != 50*time.Second {
		t.Fatalf("a after 3 failures: %q, %v; want refused by client for 50s", s, left)
	}
	if s, _ := f.Allow("b", t0); s != None {
		t.Fatalf("b, which never failed: refused by %s", s)
	}
	if s, _ := f.Allow("a", t0.Add(time.Minute)); s != None {
		t.Fatalf("a a window later: refused by %s", s)
	}
}

// TestGlobalBudgetStopsRotation: a guesser taking a new address for each
// try is refused once the failures of all together pass the budget,
// and so is a newcomer; a client that authenticated lately is not.
func TestGlobalBudgetStopsRotation(t *testing.T) {
	f := New(Limits{PerClient: 10, Global: 20, Window: time.Minute})
	f.Succeed("operator", t0)
	refused := 0
	for i := range 200 {
		addr := fmt.Sprintf("198.51.100.%d", i)
		if s, _ := f.Allow(addr, t0); s != None {
			refused++
			continue
		}
		f.Fail(addr, t0)
	}
	if refused != 180 {
		t.Fatalf("%d of 200 rotating tries refused; want 180 past a budget of 20", refused)
	}
	if s, _ := f.Allow("203.0.113.9", t0.Add(time.Second)); s != All {
		t.Fatalf("a newcomer during the flood: %q; want refused by the global budget", s)
	}
	if s, _ := f.Allow("operator", t0.Add(time.Second)); s != None {
		t.Fatalf("an operator who signed in lately: refused by %s", s)
	}
	if s, _ := f.Allow("203.0.113.9", t0.Add(time.Minute)); s != None {
		t.Fatalf("a newcomer after the window: refused by %s", s)
	}
}

// TestTrustLapses: the exemption from the global budget ends TrustFor
// after the last success, and never covers a client's own failures.
func TestTrustLapses(t *testing.T) {
	f := New(Limits{PerClient: 2, Global: 2, Window: time.Hour, TrustFor: 2 * time.Hour})
	f.Succeed("op", t0)
	at := t0.Add(3 * time.Hour)
	f.Fail("x", at)
	f.Fail("y", at)
	if s, _ := f.Allow("op", at); s != All {
		t.Fatalf("op three hours after its success: %q; want refused by the global budget", s)
	}
	f.Succeed("op", at)
	if s, _ := f.Allow("op", at); s != None {
		t.Fatalf("op just after a success: refused by %s", s)
	}
	f.Fail("op", at)
	f.Fail("op", at)
	if s, _ := f.Allow("op", at); s != Client {
		t.Fatalf("op after its own failures: %q; want refused by client", s)
	}
}

// TestBounded: counting a flood of clients keeps at most maxClients.
func TestBounded(t *testing.T) {
	f := New(Limits{})
	for i := range maxClients * 2 {
		c := fmt.Sprint(i)
		f.Fail(c, t0)
		f.Succeed("s"+c, t0)
	}
	if len(f.by) > maxClients || len(f.order) > maxClients || len(f.good) > maxClients || len(f.gorder) > maxClients {
		t.Fatalf("counted %d/%d, trusted %d/%d; want at most %d", len(f.by), len(f.order), len(f.good), len(f.gorder), maxClients)
	}
}

func TestRetryAfter(t *testing.T) {
	for left, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, time.Minute: 60} {
		if got := RetryAfter(left); got != want {
			t.Errorf("RetryAfter(%v) = %d; want %d", left, got, want)
		}
	}
}
