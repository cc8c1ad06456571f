package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/idempotency"
	"github.com/capgate/capgate/internal/idempotency/idempotencytest"
)

// flaky is the desk, except that the calls named in fail end in an
// internal error after they ran, as a plugin dying after its commit would.
type flaky struct {
	*desk
	mu   sync.Mutex
	fail int
}

func (f *flaky) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	res, err := f.desk.Invoke(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("plugin call stream closed: EOF")
	}
	return res, err
}

const lease = 10 * time.Second

// idemGate is a gate over a fresh desk that honours idempotency keys, with
// a store on a real SQLite file and a clock the test moves.
func idemGate(t *testing.T) (*dispatch.Dispatcher, *flaky, *idempotencytest.Clock) {
	t.Helper()
	clock := &idempotencytest.Clock{}
	clock.Advance(idempotencytest.T0.Sub(time.Time{}))
	store, err := idempotency.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "idem.db"), idempotency.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	f := &flaky{desk: newDesk()}
	d, err := dispatch.New(deskRegistry(t), deskPolicy(), map[string]dispatch.Provider{"desk": f})
	if err != nil {
		t.Fatal(err)
	}
	d.UseIdempotency(dispatch.Idempotency{Store: store, Lease: lease, Retention: time.Hour})
	return d, f, clock
}

func withKey(key string) context.Context {
	return dispatch.WithIdempotencyKey(context.Background(), key)
}

func book(d *dispatch.Dispatcher, p dispatch.Principal, key, slot string) (json.RawMessage, error) {
	return d.Invoke(withKey(key), p, capBook, json.RawMessage(`{"slot":"`+slot+`"}`))
}

func invoked(dk *desk, capability string) int {
	dk.mu.Lock()
	defer dk.mu.Unlock()
	n := 0
	for _, c := range dk.invoked {
		if c == capability {
			n++
		}
	}
	return n
}

// The answer of an action was lost and the agent repeats it with the same
// key: it gets the first outcome, byte for byte, and nothing runs twice.
func TestIdempotentRepeatReplays(t *testing.T) {
	d, f, _ := idemGate(t)
	first, err := book(d, aliceAction, "k-1", "wed-11")
	if err != nil {
		t.Fatal(err)
	}
	again, err := book(d, aliceAction, "k-1", "wed-11")
	if err != nil || string(again) != string(first) {
		t.Fatalf("repeat = %s, %v; want %s", again, err, first)
	}
	if n := invoked(f.desk, capBook); n != 1 {
		t.Errorf("booking.book ran %d times, want 1", n)
	}
	// Without a key every call runs: the slot is taken now.
	_, err = d.Invoke(context.Background(), aliceAction, capBook, json.RawMessage(`{"slot":"wed-11"}`))
	toolError(t, err, dispatch.Conflict)
	// Keys are per user: bob's k-1 is his own.
	if _, err := book(d, dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: bob}, "k-1", "thu-12"); err != nil {
		t.Errorf("bob's k-1: %v", err)
	}
}

// A tool error is an outcome too: replayed, not run again.
func TestIdempotentToolErrorReplayed(t *testing.T) {
	d, f, _ := idemGate(t)
	_, err := book(d, aliceAction, "k-taken", "mon-09") // b-1 holds it
	first := toolError(t, err, dispatch.Conflict)
	_, err = book(d, aliceAction, "k-taken", "mon-09")
	if again := toolError(t, err, dispatch.Conflict); again.Message != first.Message {
		t.Errorf("replayed message %q, want %q", again.Message, first.Message)
	}
	if n := invoked(f.desk, capBook); n != 1 {
		t.Errorf("booking.book ran %d times, want 1", n)
	}
}

// A key belongs to its first call: other arguments or another capability
// are refused, and nothing runs.
func TestIdempotencyKeyMismatch(t *testing.T) {
	d, f, _ := idemGate(t)
	if _, err := book(d, aliceAction, "k-2", "fri-08"); err != nil {
		t.Fatal(err)
	}
	_, err := book(d, aliceAction, "k-2", "fri-09")
	if te := toolError(t, err, dispatch.InvalidInput); !strings.Contains(te.Message, "already used for other arguments") {
		t.Errorf("other arguments: %q", te.Message)
	}
	_, err = d.Invoke(withKey("k-2"), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if te := toolError(t, err, dispatch.InvalidInput); !strings.Contains(te.Message, "another capability (booking.book)") {
		t.Errorf("another capability: %q", te.Message)
	}
	if n := invoked(f.desk, capBook); n != 1 || f.desk.cancelled("b-1") {
		t.Errorf("booking.book ran %d times (want 1), b-1 cancelled %v (want false)", n, f.desk.cancelled("b-1"))
	}
}

// A replay passes the gate as a first call does: a read token cannot
// replay an action, and the refusal is not stored.
func TestIdempotentReplayStillGated(t *testing.T) {
	d, _, _ := idemGate(t)
	if _, err := book(d, aliceAction, "k-3", "sat-10"); err != nil {
		t.Fatal(err)
	}
	_, err := book(d, aliceRead, "k-3", "sat-10")
	refusalAt(t, err, dispatch.StepScope, capBook)
}

// A refusal at ownership ran nothing: the key is free again for the
// caller's next call.
func TestIdempotencyOwnershipRefusalFreesKey(t *testing.T) {
	d, f, _ := idemGate(t)
	bobAction := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: bob}
	_, err := d.Invoke(withKey("k-4"), bobAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	refusalAt(t, err, dispatch.StepOwnership, capCancel)
	if _, err := d.Invoke(withKey("k-4"), bobAction, capCancel, json.RawMessage(`{"id":"b-2"}`)); err != nil {
		t.Fatalf("bob's next call with the freed key: %v", err)
	}
	if !f.desk.cancelled("b-2") || f.desk.cancelled("b-1") {
		t.Error("wrong bookings cancelled")
	}
}

// A cancel whose outcome is replayed even though the target changed: the
// second try does not answer "already cancelled".
func TestIdempotentCancelReplayed(t *testing.T) {
	d, f, _ := idemGate(t)
	first, err := d.Invoke(withKey("k-5"), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := d.Invoke(withKey("k-5"), aliceAction, capCancel, json.RawMessage(`{"id":"b-1"}`))
	if err != nil || string(again) != string(first) {
		t.Fatalf("repeat = %s, %v; want %s", again, err, first)
	}
	if n := invoked(f.desk, capCancel); n != 1 {
		t.Errorf("booking.cancel ran %d times", n)
	}
}

// A call whose outcome is unknown (the plugin failed after it ran) keeps
// its key: a repeat within the lease is told to wait and runs nothing;
// after the lease it runs again.
func TestIdempotencyUnknownOutcomeWaitsForLease(t *testing.T) {
	d, f, clock := idemGate(t)
	f.fail = 1
	if _, err := book(d, aliceAction, "k-6", "sun-07"); err == nil {
		t.Fatal("the failing call succeeded")
	}
	_, err := book(d, aliceAction, "k-6", "sun-07")
	if te := toolError(t, err, dispatch.Unavailable); !strings.Contains(te.Message, "still running or its outcome is not known") {
		t.Errorf("repeat within the lease: %q", te.Message)
	}
	if n := invoked(f.desk, capBook); n != 1 {
		t.Errorf("booking.book ran %d times within the lease, want 1", n)
	}
	clock.Advance(lease + time.Second)
	// The first attempt did book the slot: the retry now meets that, as
	// every retry did before keys existed; what it must not do is run
	// while the first might still be running.
	_, err = book(d, aliceAction, "k-6", "sun-07")
	toolError(t, err, dispatch.Conflict)
	if n := invoked(f.desk, capBook); n != 2 {
		t.Errorf("booking.book ran %d times after the lease, want 2", n)
	}
}

// Reads ignore keys: they change nothing, so each call runs.
func TestIdempotencyKeyIgnoredOnReads(t *testing.T) {
	d, f, _ := idemGate(t)
	for range 2 {
		if _, err := d.Invoke(withKey("k-7"), aliceAction, capList, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := invoked(f.desk, capList); n != 2 {
		t.Errorf("booking.list ran %d times, want 2", n)
	}
}

func TestIdempotencyKeyInvalid(t *testing.T) {
	d, f, _ := idemGate(t)
	for _, key := range []string{"has space", strings.Repeat("k", 256), "tab\tkey", "é"} {
		_, err := book(d, aliceAction, key, "mon-12")
		te := toolError(t, err, dispatch.InvalidInput)
		if !strings.Contains(te.Message, dispatch.MetaIdempotencyKey) || !strings.Contains(te.Message, "nothing ran") || strings.Contains(te.Message, key) {
			t.Errorf("key %q: %q; want the field named, no echo of the key", key, te.Message)
		}
	}
	if n := invoked(f.desk, capBook); n != 0 {
		t.Errorf("booking.book ran %d times with invalid keys", n)
	}
}

// Concurrent repeats of one call: it runs once; each repeat gets its
// outcome or is told to wait.
func TestIdempotentConcurrentRepeats(t *testing.T) {
	d, f, _ := idemGate(t)
	var wg sync.WaitGroup
	results := make(chan string, 20)
	waits := make(chan struct{}, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := book(d, aliceAction, "k-8", "tue-15")
			var te *dispatch.ToolError
			switch {
			case err == nil:
				results <- string(res)
			case errors.As(err, &te) && te.Code == dispatch.Unavailable:
				waits <- struct{}{}
			default:
				t.Errorf("concurrent repeat: %v", err)
			}
		}()
	}
	wg.Wait()
	close(results)
	var first string
	n := 0
	for r := range results {
		if first == "" {
			first = r
		}
		if r != first {
			t.Errorf("two different outcomes: %s and %s", first, r)
		}
		n++
	}
	if n == 0 || n+len(waits) != 20 {
		t.Errorf("%d results and %d waits, want 20 with at least one result", n, len(waits))
	}
	if got := invoked(f.desk, capBook); got != 1 {
		t.Errorf("booking.book ran %d times, want 1", got)
	}
}
