// Package eventstest holds the contract every events.Bus must meet, as one
// test suite run against the embedded store and an external NATS server;
// a helper that opens the embedded bus for a test; and one that finds or
// starts a NATS server.
package eventstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
)

// Harness builds the buses the contract runs against.
type Harness struct {
	// New returns a fresh, empty bus that retains bufferSize events. The
	// harness closes it at test cleanup if the test has not.
	New func(t *testing.T, bufferSize int) events.Bus
	// Reopen closes old and returns a new bus over the same storage, as a
	// restarted host would open it. Required: every bus is durable.
	Reopen func(t *testing.T, old events.Bus) events.Bus
	// Leftovers lists what a bus keeps for subscribers (a JetStream
	// stream's consumers); nil for a bus that keeps nothing.
	Leftovers func(t *testing.T, bus events.Bus) []string
}

const wait = 10 * time.Second

// RunContract runs the contract suite against the buses h builds.
func RunContract(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Reopen == nil {
		t.Fatal("eventstest: a Harness needs New and Reopen")
	}
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"PublishAssignsIncreasingCursors", testCursors},
		{"SubscribeDeliversInOrder", testOrder},
		{"SubscribeStartsAfterCursor", testStartAfter},
		{"SinceWindowsAndLimit", testSince},
		{"SinceCursorTooOld", testTooOld},
		{"RetentionKeepsLastN", testRetention},
		{"SubscribersAreIndependent", testIndependent},
		{"HandlerErrorRedelivers", testRedeliver},
		{"ConcurrentPublishers", testConcurrent},
		{"ValidationErrors", testValidation},
		{"DuplicateSubscriberRefused", testDuplicate},
		{"SubscriptionCloseStopsDelivery", testSubClose},
		{"CloseStopsDelivery", testClose},
		{"Resume", testResume},
		{"CursorsSurviveReopen", testCursorsSurviveReopen},
		{"State", testState},
		{"Follow", testFollow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// ev is a valid event to publish; n goes into its id and data.
func ev(n int) events.Event {
	return events.Event{
		Type:   "booking.created",
		Entity: "booking",
		ID:     fmt.Sprintf("bk_%d", n),
		UserID: "alice",
		Data:   json.RawMessage(fmt.Sprintf(`{"n": %d}`, n)),
	}
}

func publishN(t *testing.T, bus events.Bus, from, n int) []uint64 {
	t.Helper()
	var cursors []uint64
	for i := from; i < from+n; i++ {
		c, err := bus.Publish(ctx(t), ev(i))
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		cursors = append(cursors, c)
	}
	return cursors
}

// recorder is a handler that records what it was given.
type recorder struct {
	mu     sync.Mutex
	got    []events.Event
	times  []time.Time // when each of got arrived
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) handle(_ context.Context, e events.Event) error {
	r.mu.Lock()
	r.got = append(r.got, e)
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) events() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.Event(nil), r.got...)
}

// waitFor waits until the recorder holds n events and returns them.
func (r *recorder) waitFor(t *testing.T, n int) []events.Event {
	t.Helper()
	deadline := time.After(wait)
	for {
		if got := r.events(); len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("got %d events, want %d: %v; %s", len(r.events()), n, cursorsOf(r.events()), r.silences())
		}
	}
}

// silences describes when deliveries came, for a waitFor that timed out:
// a delivery that stalled shows as a long silence between two events, one
// that was merely slow as none.
func (r *recorder) silences() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.times) == 0 {
		return "nothing was delivered"
	}
	var gaps []string
	for i := 1; i < len(r.times); i++ {
		if d := r.times[i].Sub(r.times[i-1]); d > 200*time.Millisecond {
			gaps = append(gaps, fmt.Sprintf("%v before event %d", d.Round(time.Millisecond), i+1))
		}
	}
	return fmt.Sprintf("silences over 200ms: %v; the last event came %v ago", gaps, time.Since(r.times[len(r.times)-1]).Round(time.Millisecond))
}

func cursorsOf(evs []events.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Cursor
	}
	return out
}

func subscribe(t *testing.T, bus events.Bus, name string, after uint64, h events.Handler) events.Subscription {
	t.Helper()
	sub, err := bus.Subscribe(ctx(t), name, after, h)
	if err != nil {
		t.Fatalf("subscribe %s: %v", name, err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func testCursors(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	cursors := publishN(t, bus, 0, 20)
	for i := 1; i < len(cursors); i++ {
		if cursors[i] <= cursors[i-1] {
			t.Fatalf("cursors not strictly increasing: %v", cursors)
		}
	}
	if cursors[0] == 0 {
		t.Fatal("cursor 0 assigned; 0 must mean \"before the first event\"")
	}
}

func testOrder(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	rec := newRecorder()
	subscribe(t, bus, "order", 0, rec.handle)
	before := time.Now().Add(-time.Second)
	want := publishN(t, bus, 0, 25)
	got := rec.waitFor(t, 25)
	if !slices.Equal(cursorsOf(got), want) {
		t.Fatalf("delivered %v, want %v", cursorsOf(got), want)
	}
	first := got[0]
	if first.Type != "booking.created" || first.Entity != "booking" || first.ID != "bk_0" || first.UserID != "alice" {
		t.Errorf("first event = %+v", first)
	}
	if string(first.Data) != `{"n":0}` {
		t.Errorf("data = %s, want compact {\"n\":0}", first.Data)
	}
	if first.At.Before(before) || first.At.After(time.Now().Add(time.Second)) || first.At.Location() != time.UTC {
		t.Errorf("at = %v, want the publish time in UTC", first.At)
	}
	// An explicit At is kept.
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := ev(99)
	e.At = at
	if _, err := bus.Publish(ctx(t), e); err != nil {
		t.Fatal(err)
	}
	if got := rec.waitFor(t, 26)[25]; !got.At.Equal(at) {
		t.Errorf("at = %v, want %v", got.At, at)
	}
}

func testStartAfter(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	cursors := publishN(t, bus, 0, 10)
	rec := newRecorder()
	subscribe(t, bus, "late", cursors[5], rec.handle)
	more := publishN(t, bus, 10, 2)
	want := append(append([]uint64(nil), cursors[6:]...), more...)
	got := rec.waitFor(t, len(want))
	if !slices.Equal(cursorsOf(got), want) {
		t.Fatalf("delivered %v, want %v", cursorsOf(got), want)
	}
}

func testSince(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	evs, oldest, err := bus.Since(ctx(t), 0, 10)
	if err != nil || len(evs) != 0 || oldest != 0 {
		t.Fatalf("empty bus: Since = %v, %d, %v; want nothing, 0, nil", evs, oldest, err)
	}
	cursors := publishN(t, bus, 0, 10)
	cases := []struct {
		name  string
		after uint64
		limit int
		want  []uint64
	}{
		{"all", 0, 100, cursors},
		{"limit", 0, 3, cursors[:3]},
		{"after", cursors[4], 100, cursors[5:]},
		{"after and limit", cursors[4], 2, cursors[5:7]},
		{"after the last", cursors[9], 10, nil},
		{"beyond the last", cursors[9] + 100, 10, nil},
		{"just before the first", cursors[0] - 1, 1, cursors[:1]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, oldest, err := bus.Since(ctx(t), tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if oldest != cursors[0] {
				t.Errorf("oldest = %d, want %d", oldest, cursors[0])
			}
			if !slices.Equal(cursorsOf(evs), tc.want) {
				t.Errorf("cursors = %v, want %v", cursorsOf(evs), tc.want)
			}
			for i, e := range evs {
				if want := ev(int(e.Cursor - cursors[0])); e.ID != want.ID {
					t.Errorf("event %d: id %q, want %q", i, e.ID, want.ID)
				}
			}
		})
	}
	for _, limit := range []int{0, -1} {
		if _, _, err := bus.Since(ctx(t), 0, limit); err == nil {
			t.Errorf("Since with limit %d: no error", limit)
		}
	}
}

func testTooOld(t *testing.T, h Harness) {
	bus := h.New(t, 5)
	cursors := publishN(t, bus, 0, 12)
	oldestWant := cursors[7]
	cases := []struct {
		name    string
		after   uint64
		tooOld  bool
		wantLen int
	}{
		{"from the start", 0, true, 0},
		{"two before the oldest", oldestWant - 2, true, 0},
		{"just before the oldest", oldestWant - 1, false, 5},
		{"at the oldest", oldestWant, false, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, oldest, err := bus.Since(ctx(t), tc.after, 100)
			if oldest != oldestWant {
				t.Errorf("oldest = %d, want %d", oldest, oldestWant)
			}
			if !tc.tooOld {
				if err != nil || len(evs) != tc.wantLen {
					t.Fatalf("Since(%d) = %d events, %v; want %d, nil", tc.after, len(evs), err, tc.wantLen)
				}
				return
			}
			if !errors.Is(err, events.ErrCursorTooOld) {
				t.Fatalf("err = %v, want ErrCursorTooOld", err)
			}
			var tooOld *events.CursorTooOldError
			if !errors.As(err, &tooOld) || tooOld.Oldest != oldestWant || tooOld.After != tc.after {
				t.Fatalf("err = %#v, want CursorTooOldError{After: %d, Oldest: %d}", err, tc.after, oldestWant)
			}
			if len(evs) != 0 {
				t.Errorf("got %d events with the error", len(evs))
			}
		})
	}
}

func testRetention(t *testing.T, h Harness) {
	const n, k = 8, 5
	bus := h.New(t, n)
	cursors := publishN(t, bus, 0, n+k)
	evs, oldest, err := bus.Since(ctx(t), cursors[k-1], 100)
	if err != nil {
		t.Fatal(err)
	}
	if oldest != cursors[k] || !slices.Equal(cursorsOf(evs), cursors[k:]) {
		t.Fatalf("retained %v (oldest %d), want the last %d: %v", cursorsOf(evs), oldest, n, cursors[k:])
	}
	// A new subscriber from the start gets what is retained, in order.
	rec := newRecorder()
	subscribe(t, bus, "from-start", 0, rec.handle)
	if got := rec.waitFor(t, n); !slices.Equal(cursorsOf(got), cursors[k:]) {
		t.Fatalf("delivered %v, want %v", cursorsOf(got), cursors[k:])
	}
}

func testIndependent(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	fast := newRecorder()
	var failing sync.Mutex
	failing.Lock() // the slow subscriber fails until unlocked
	slow := newRecorder()
	slowHandler := func(c context.Context, e events.Event) error {
		if !failing.TryLock() {
			return errors.New("not yet")
		}
		failing.Unlock()
		return slow.handle(c, e)
	}
	subscribe(t, bus, "fast", 0, fast.handle)
	subscribe(t, bus, "slow", 0, slowHandler)
	want := publishN(t, bus, 0, 5)
	if got := fast.waitFor(t, 5); !slices.Equal(cursorsOf(got), want) {
		t.Fatalf("fast got %v while slow was failing, want %v", cursorsOf(got), want)
	}
	if got := slow.events(); len(got) != 0 {
		t.Fatalf("slow got %v while failing", cursorsOf(got))
	}
	failing.Unlock()
	if got := slow.waitFor(t, 5); !slices.Equal(cursorsOf(got), want) {
		t.Fatalf("slow got %v, want %v", cursorsOf(got), want)
	}
}

func testRedeliver(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	var mu sync.Mutex
	var attempts []uint64 // every cursor the handler saw, failures included
	rec := newRecorder()
	failures := map[uint64]int{}
	handler := func(c context.Context, e events.Event) error {
		mu.Lock()
		attempts = append(attempts, e.Cursor)
		fail := e.ID == "bk_1" && failures[e.Cursor] < 3
		if fail {
			failures[e.Cursor]++
		}
		mu.Unlock()
		if fail {
			return fmt.Errorf("transient failure on %s", e.ID)
		}
		return rec.handle(c, e)
	}
	subscribe(t, bus, "flaky", 0, handler)
	cursors := publishN(t, bus, 0, 4)
	if got := rec.waitFor(t, 4); !slices.Equal(cursorsOf(got), cursors) {
		t.Fatalf("delivered %v, want %v", cursorsOf(got), cursors)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []uint64{cursors[0], cursors[1], cursors[1], cursors[1], cursors[1], cursors[2], cursors[3]}
	if !slices.Equal(attempts, want) {
		t.Fatalf("handler saw %v, want %v (the failed event again, nothing skipped or reordered)", attempts, want)
	}
}

func testConcurrent(t *testing.T, h Harness) {
	bus := h.New(t, 1000)
	rec := newRecorder()
	subscribe(t, bus, "all", 0, rec.handle)
	const publishers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, publishers*each)
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				if _, err := bus.Publish(context.Background(), ev(p*each+i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := rec.waitFor(t, publishers*each)
	seen := map[string]bool{}
	for i, e := range got {
		if i > 0 && e.Cursor <= got[i-1].Cursor {
			t.Fatalf("delivery out of order at %d: %d after %d", i, e.Cursor, got[i-1].Cursor)
		}
		seen[e.ID] = true
	}
	if len(seen) != publishers*each {
		t.Fatalf("delivered %d distinct events, want %d", len(seen), publishers*each)
	}
	evs, _, err := bus.Since(ctx(t), 0, 1000)
	if err != nil || len(evs) != publishers*each {
		t.Fatalf("Since: %d events, %v", len(evs), err)
	}
}

func testValidation(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	big := make([]byte, 0, events.MaxEventSize+100)
	big = append(big, `{"s":"`...)
	for len(big) < events.MaxEventSize {
		big = append(big, 'x')
	}
	big = append(big, `"}`...)
	mod := func(f func(*events.Event)) events.Event {
		e := ev(1)
		f(&e)
		return e
	}
	cases := []struct {
		name string
		ev   events.Event
		want string // part of the message
	}{
		{"empty type", mod(func(e *events.Event) { e.Type = "" }), "type is empty"},
		{"one-word type", mod(func(e *events.Event) { e.Type = "created" }), "type \"created\""},
		{"upper-case type", mod(func(e *events.Event) { e.Type = "Booking.Created" }), "type"},
		{"wildcard type", mod(func(e *events.Event) { e.Type = "booking.*" }), "type"},
		{"empty entity", mod(func(e *events.Event) { e.Entity = "" }), "entity is empty"},
		{"bad entity", mod(func(e *events.Event) { e.Entity = "Booking Resource" }), "entity"},
		{"empty id", mod(func(e *events.Event) { e.ID = "" }), "id is empty"},
		{"data not JSON", mod(func(e *events.Event) { e.Data = json.RawMessage(`{nope`) }), "not valid JSON"},
		{"data an array", mod(func(e *events.Event) { e.Data = json.RawMessage(`[1]`) }), "JSON object"},
		{"cursor set", mod(func(e *events.Event) { e.Cursor = 7 }), "assigned by the bus"},
		{"too big", mod(func(e *events.Event) { e.Data = big }), "more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bus.Publish(ctx(t), tc.ev)
			if !errors.Is(err, events.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if !contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to mention %q", err, tc.want)
			}
		})
	}
	evs, _, err := bus.Since(ctx(t), 0, 100)
	if err != nil || len(evs) != 0 {
		t.Fatalf("invalid events were stored: %v, %v", cursorsOf(evs), err)
	}
	// Valid variants are accepted.
	for _, e := range []events.Event{
		mod(func(e *events.Event) { e.Data = nil }),
		mod(func(e *events.Event) { e.UserID = ""; e.Type = "catalogue.upsert"; e.Entity = "booking.resource" }),
		mod(func(e *events.Event) { e.Data = json.RawMessage(" {\"a\": [1, 2]} ") }),
	} {
		if _, err := bus.Publish(ctx(t), e); err != nil {
			t.Errorf("publish %+v: %v", e, err)
		}
	}
	for _, name := range []string{"", "has space", "dot.ted", "star*"} {
		if _, err := bus.Subscribe(ctx(t), name, 0, newRecorder().handle); !errors.Is(err, events.ErrInvalidSubscriber) {
			t.Errorf("subscribe %q: err = %v, want ErrInvalidSubscriber", name, err)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func testDuplicate(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	sub := subscribe(t, bus, "only", 0, newRecorder().handle)
	if _, err := bus.Subscribe(ctx(t), "only", 0, newRecorder().handle); !errors.Is(err, events.ErrInvalidSubscriber) {
		t.Fatalf("second subscription of one name: err = %v, want ErrInvalidSubscriber", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	// Once closed, the name is free again.
	subscribe(t, bus, "only", 0, newRecorder().handle)
}

func testSubClose(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	rec := newRecorder()
	sub := subscribe(t, bus, "stopper", 0, rec.handle)
	publishN(t, bus, 0, 2)
	rec.waitFor(t, 2)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	publishN(t, bus, 2, 3)
	time.Sleep(200 * time.Millisecond)
	if got := rec.events(); len(got) != 2 {
		t.Fatalf("delivered %v after Close", cursorsOf(got))
	}
}

func testClose(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	rec := newRecorder()
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	handler := func(c context.Context, e events.Event) error {
		once.Do(func() { close(started) })
		select {
		case <-release:
		case <-c.Done():
		}
		return rec.handle(c, e)
	}
	subscribe(t, bus, "blocked", 0, handler)
	publishN(t, bus, 0, 3)
	<-started
	closed := make(chan error)
	go func() { closed <- bus.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(wait):
		close(release)
		t.Fatal("Close did not cancel the running handler's context")
	}
	n := len(rec.events())
	time.Sleep(100 * time.Millisecond)
	if got := rec.events(); len(got) != n || n > 1 {
		t.Fatalf("delivered %v after Close", cursorsOf(got))
	}
	if _, err := bus.Publish(ctx(t), ev(9)); !errors.Is(err, events.ErrClosed) {
		t.Errorf("publish after close: %v, want ErrClosed", err)
	}
	if _, err := bus.Subscribe(ctx(t), "late", 0, rec.handle); !errors.Is(err, events.ErrClosed) {
		t.Errorf("subscribe after close: %v, want ErrClosed", err)
	}
	if _, _, err := bus.Since(ctx(t), 0, 10); !errors.Is(err, events.ErrClosed) {
		t.Errorf("since after close: %v, want ErrClosed", err)
	}
	if err := bus.Close(); !errors.Is(err, events.ErrClosed) {
		t.Errorf("second close: %v, want ErrClosed", err)
	}
}

func testResume(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	first := newRecorder()
	sub := subscribe(t, bus, "indexer", 0, first.handle)
	cursors := publishN(t, bus, 0, 3)
	if got := first.waitFor(t, 3); !slices.Equal(cursorsOf(got), cursors) {
		t.Fatalf("delivered %v, want %v", cursorsOf(got), cursors)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}

	bus = h.Reopen(t, bus)
	more := publishN(t, bus, 3, 2)
	second := newRecorder()
	// after is ignored: the subscription resumes from its acknowledgements.
	subscribe(t, bus, "indexer", 0, second.handle)
	if got := second.waitFor(t, 2); !slices.Equal(cursorsOf(got), more) {
		t.Fatalf("resumed with %v, want exactly %v (before: %v)", cursorsOf(got), more, cursors)
	}
	time.Sleep(200 * time.Millisecond)
	if got := second.events(); len(got) != 2 {
		t.Fatalf("resumed with %v, want exactly %v: duplicates", cursorsOf(got), more)
	}
}

// testCursorsSurviveReopen is events.poll across a host restart: a cursor
// read before it goes on to exactly the events published after it, with
// no cursor reused.
func testCursorsSurviveReopen(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	before := publishN(t, bus, 0, 3)
	kept := before[len(before)-1]
	bus = h.Reopen(t, bus)
	evs, _, err := bus.Since(ctx(t), kept, 100)
	if err != nil || len(evs) != 0 {
		t.Fatalf("Since(%d) right after the reopen = %v, %v; want nothing new", kept, cursorsOf(evs), err)
	}
	after := publishN(t, bus, 3, 2)
	if after[0] <= kept {
		t.Fatalf("cursor %d assigned after the reopen, not above %d from before it", after[0], kept)
	}
	evs, oldest, err := bus.Since(ctx(t), kept, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cursorsOf(evs), after) || evs[0].ID != ev(3).ID || evs[1].ID != ev(4).ID {
		t.Fatalf("Since(%d) after the reopen = %v, want exactly the new %v", kept, cursorsOf(evs), after)
	}
	all, _, err := bus.Since(ctx(t), 0, 100)
	if err != nil || oldest != before[0] || !slices.Equal(cursorsOf(all), append(before, after...)) {
		t.Fatalf("Since(0) after the reopen = %v (oldest %d), %v; want %v then %v", cursorsOf(all), oldest, err, before, after)
	}
}

func testState(t *testing.T, h Harness) {
	bus := h.New(t, 3)
	st, err := bus.State(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.ID == "" || st.Oldest != 0 || st.Last != 0 {
		t.Fatalf("empty bus state = %+v, want an id and no cursors", st)
	}
	id := st.ID
	cursors := publishN(t, bus, 0, 5)
	st, err = bus.State(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := (events.State{ID: id, Oldest: cursors[2], Last: cursors[4]}); st != want {
		t.Fatalf("state after 5 events with 3 retained = %+v, want %+v", st, want)
	}
	if other := h.New(t, 3); other != nil {
		ost, err := other.State(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if ost.ID == id {
			t.Errorf("two separate buses share the id %q", id)
		}
	}
	bus = h.Reopen(t, bus)
	st, err = bus.State(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := (events.State{ID: id, Oldest: cursors[2], Last: cursors[4]}); st != want {
		t.Errorf("reopened state = %+v, want %+v: the id and the retained window kept", st, want)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.State(ctx(t)); !errors.Is(err, events.ErrClosed) {
		t.Errorf("state after close: %v, want ErrClosed", err)
	}
}

// testFollow: followers start exactly after their cursor, even after a
// restart of a durable bus, run side by side, and leave nothing behind.
func testFollow(t *testing.T, h Harness) {
	bus := h.New(t, 100)
	cursors := publishN(t, bus, 0, 4)
	first, second := newRecorder(), newRecorder()
	a, err := bus.Follow(ctx(t), cursors[1], first.handle)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.Follow(ctx(t), cursors[2], second.handle)
	if err != nil {
		t.Fatal(err)
	}
	if got := cursorsOf(first.waitFor(t, 2)); !slices.Equal(got, cursors[2:]) {
		t.Errorf("follower after %d got %v, want %v", cursors[1], got, cursors[2:])
	}
	if got := cursorsOf(second.waitFor(t, 1)); !slices.Equal(got, cursors[3:]) {
		t.Errorf("follower after %d got %v, want %v", cursors[2], got, cursors[3:])
	}
	if a.Name() == b.Name() {
		t.Errorf("two followers share the name %q", a.Name())
	}
	for _, s := range []events.Subscription{a, b} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if h.Leftovers != nil {
		if left := h.Leftovers(t, bus); len(left) != 0 {
			t.Errorf("closed followers left %v on the bus", left)
		}
	}
	// Following again from an older cursor replays from there.
	again := newRecorder()
	c, err := bus.Follow(ctx(t), cursors[0], again.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := cursorsOf(again.waitFor(t, 3)); !slices.Equal(got, cursors[1:]) {
		t.Errorf("a second follower after %d got %v, want %v", cursors[0], got, cursors[1:])
	}
}
