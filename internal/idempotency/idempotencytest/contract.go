// Package idempotencytest is the behaviour the idempotency store must show
// on every engine, written once: an engine's test calls RunContract with a
// function giving each test a fresh, empty database.
package idempotencytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/idempotency"
)

// Where returns the location of a fresh, empty database for one test, as
// idempotency.Open takes it: a PostgreSQL DSN (dataDir unused), or an empty
// dsn and the data directory holding the SQLite file.
type Where func(t *testing.T) (dsn, dataDir string)

// RunContract runs the contract, its tests in parallel, each on its own
// database opened with idempotency.Open at where(t). Several handles on one
// database stand for several hosts (replicas) sharing it.
func RunContract(t *testing.T, where Where) {
	tests := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"ClaimThenReplay", testClaimThenReplay},
		{"ReplayToolError", testReplayToolError},
		{"InProgress", testInProgress},
		{"MismatchCapability", testMismatchCapability},
		{"MismatchArguments", testMismatchArguments},
		{"KeysPerUser", testKeysPerUser},
		{"Expiry", testExpiry},
		{"LeaseTakeover", testLeaseTakeover},
		{"StaleClaimOfOtherRequest", testStaleClaimOfOtherRequest},
		{"LateCompleteWithoutTakeover", testLateComplete},
		{"ReleaseThenClaim", testReleaseThenClaim},
		{"TicketUsedOnce", testTicketUsedOnce},
		{"Purge", testPurge},
		{"LargeOutcomeRefused", testLargeOutcome},
		{"InvalidInput", testInvalidInput},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ReplicasRace", testReplicasRace},
		{"ConcurrentTakeover", testConcurrentTakeover},
		{"ConcurrentPurges", testConcurrentPurges},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dsn, dir := where(t)
			e := &env{t: t, dsn: dsn, dir: dir, clock: &Clock{now: T0}}
			tc.run(t, e)
		})
	}
}

// T0 is where every test's clock starts: a whole second far from any real
// clock.
var T0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// Clock is a time source tests move by hand.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const (
	lease     = 30 * time.Second
	retention = 24 * time.Hour
)

// env is one test's database and clock.
type env struct {
	t        *testing.T
	dsn, dir string
	clock    *Clock
}

// open opens another handle on the test's database, closed at cleanup
// unless the test closes it first.
func (e *env) open() *idempotency.Store {
	e.t.Helper()
	s, err := idempotency.Open(context.Background(), e.dsn, e.dir, idempotency.WithClock(e.clock.Now))
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	var once sync.Once
	e.t.Cleanup(func() { once.Do(func() { _ = s.Close() }) })
	return s
}

func ctx() context.Context { return context.Background() }

// req is alice's (or user's) request of capability with args.
func req(t *testing.T, user, key, capability, args string) idempotency.Request {
	t.Helper()
	fp, err := idempotency.FingerprintOf(capability, json.RawMessage(args))
	if err != nil {
		t.Fatalf("FingerprintOf(%s, %s): %v", capability, args, err)
	}
	return idempotency.Request{UserID: user, Key: key, Capability: capability, Fingerprint: fp}
}

func create(t *testing.T, key string) idempotency.Request {
	return req(t, "alice", key, "booking.create", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z"}`)
}

func result(s string) idempotency.Outcome {
	return idempotency.Outcome{Kind: idempotency.OutcomeResult, Result: json.RawMessage(s)}
}

func claim(t *testing.T, s *idempotency.Store, r idempotency.Request) idempotency.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctx(), r, lease, retention)
	if err != nil {
		t.Fatalf("Claim(%s %s): %v", r.UserID, r.Key, err)
	}
	return res
}

func mustClaim(t *testing.T, s *idempotency.Store, r idempotency.Request, attempt int) idempotency.Ticket {
	t.Helper()
	res := claim(t, s, r)
	if res.Status != idempotency.Claimed || res.Attempt != attempt {
		t.Fatalf("Claim(%s %s) = %s attempt %d (%+v); want claimed, attempt %d", r.UserID, r.Key, res.Status, res.Attempt, res, attempt)
	}
	if res.Ticket.UserID != r.UserID || res.Ticket.Key != r.Key || res.Ticket.Token == "" {
		t.Fatalf("Claim ticket = %+v; want one for %s %s with a token", res.Ticket, r.UserID, r.Key)
	}
	return res.Ticket
}

func mustComplete(t *testing.T, s *idempotency.Store, tk idempotency.Ticket, o idempotency.Outcome) {
	t.Helper()
	if err := s.Complete(ctx(), tk, o); err != nil {
		t.Fatalf("Complete(%s): %v", tk.Key, err)
	}
}

func wantStatus(t *testing.T, s *idempotency.Store, r idempotency.Request, want idempotency.ClaimStatus) idempotency.ClaimResult {
	t.Helper()
	res := claim(t, s, r)
	if res.Status != want {
		t.Fatalf("Claim(%s %s) = %s (%+v); want %s", r.UserID, r.Key, res.Status, res, want)
	}
	return res
}

func wantReplay(t *testing.T, s *idempotency.Store, r idempotency.Request, want idempotency.Outcome) {
	t.Helper()
	got := wantStatus(t, s, r, idempotency.Replay).Outcome
	if got.Kind != want.Kind || string(got.Result) != string(want.Result) || got.Code != want.Code || got.Message != want.Message {
		t.Fatalf("replayed outcome = %s %q code %d message %q; want %s %q code %d message %q",
			got.Kind, truncate(got.Result), got.Code, truncate([]byte(got.Message)),
			want.Kind, truncate(want.Result), want.Code, truncate([]byte(want.Message)))
	}
	if want.Kind == idempotency.OutcomeResult && got.Result == nil {
		t.Fatalf("replayed result is nil; want %q", truncate(want.Result))
	}
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + fmt.Sprintf("…(%d bytes)", len(b))
	}
	return string(b)
}

func wantErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error = %v; want %v", what, err, want)
	}
}

func testClaimThenReplay(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	tk := mustClaim(t, s, r, 1)
	// Whitespace and member order in the result are kept as written.
	out := result(`{"booking": {"id":"bk_1",  "resource_id":"room-a"}, "note":"é \u00e9"}`)
	mustComplete(t, s, tk, out)
	for range 3 {
		wantReplay(t, s, r, out)
	}
	// The same arguments written differently are the same request.
	same := req(t, "alice", "key-1", "booking.create", `{ "start":"2030-01-07T10:00:00Z",
		"resource_id":"room-a" }`)
	wantReplay(t, s, same, out)
	e.clock.Advance(retention - time.Second)
	wantReplay(t, s, r, out)
}

func testReplayToolError(t *testing.T, e *env) {
	s := e.open()
	for i, o := range []idempotency.Outcome{
		{Kind: idempotency.OutcomeToolError, Code: 3, Message: "slot already booked"},
		// Messages round-trip as bytes: NUL, invalid UTF-8 and all.
		{Kind: idempotency.OutcomeToolError, Code: 255, Message: "nul\x00 and \xff\xfe bytes"},
		{Kind: idempotency.OutcomeToolError, Code: 1, Message: ""},
		result(`null`),
		result(`"a string"`),
	} {
		r := create(t, fmt.Sprintf("key-%d", i))
		mustComplete(t, s, mustClaim(t, s, r, 1), o)
		wantReplay(t, s, r, o)
	}
}

func testInProgress(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	mustClaim(t, s, r, 1)
	res := wantStatus(t, s, r, idempotency.InProgress)
	if want := T0.Add(lease); !res.LeaseUntil.Equal(want) {
		t.Fatalf("InProgress lease until %v; want %v", res.LeaseUntil, want)
	}
	e.clock.Advance(lease - time.Second)
	wantStatus(t, s, r, idempotency.InProgress)
}

func testMismatchCapability(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	other := req(t, "alice", "key-1", "booking.cancel", `{"id":"bk_1"}`)
	sameArgs := req(t, "alice", "key-1", "booking.cancel", `{"resource_id":"room-a","start":"2030-01-07T10:00:00Z"}`)
	tk := mustClaim(t, s, r, 1)
	check := func(when string) {
		t.Helper()
		for _, o := range []idempotency.Request{other, sameArgs} {
			res := wantStatus(t, s, o, idempotency.Mismatch)
			if res.Differs != idempotency.DiffersCapability || res.Capability != "booking.create" {
				t.Fatalf("%s: mismatch = %s, first capability %q; want capability, booking.create", when, res.Differs, res.Capability)
			}
		}
	}
	check("pending")
	mustComplete(t, s, tk, result(`{"id":"bk_1"}`))
	check("done")
	wantReplay(t, s, r, result(`{"id":"bk_1"}`))
}

func testMismatchArguments(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	other := req(t, "alice", "key-1", "booking.create", `{"resource_id":"room-a","start":"2030-01-07T11:00:00Z"}`)
	tk := mustClaim(t, s, r, 1)
	check := func(when string) {
		t.Helper()
		res := wantStatus(t, s, other, idempotency.Mismatch)
		if res.Differs != idempotency.DiffersArguments || res.Capability != "booking.create" {
			t.Fatalf("%s: mismatch = %s, first capability %q; want arguments, booking.create", when, res.Differs, res.Capability)
		}
	}
	check("pending")
	mustComplete(t, s, tk, result(`{"id":"bk_1"}`))
	check("done")
}

func testKeysPerUser(t *testing.T, e *env) {
	s := e.open()
	mustClaim(t, s, create(t, "key-1"), 1)
	// Another user's key of the same name, and another key of alice's, are
	// separate records.
	bob := req(t, "bob", "key-1", "booking.cancel", `{"id":"bk_2"}`)
	mustClaim(t, s, bob, 1)
	mustClaim(t, s, create(t, "key-2"), 1)
	wantStatus(t, s, bob, idempotency.InProgress)
	wantStatus(t, s, create(t, "key-1"), idempotency.InProgress)
}

func testExpiry(t *testing.T, e *env) {
	s := e.open()
	done, pending := create(t, "done"), create(t, "pending")
	mustComplete(t, s, mustClaim(t, s, done, 1), result(`{"id":"bk_1"}`))
	mustClaim(t, s, pending, 1)
	e.clock.Advance(retention - time.Second)
	wantReplay(t, s, done, result(`{"id":"bk_1"}`))
	e.clock.Advance(time.Second)
	// At expires_at the record counts as absent: even another request may
	// claim the key, and it is a first attempt.
	mustClaim(t, s, req(t, "alice", "done", "booking.cancel", `{"id":"bk_1"}`), 1)
	mustClaim(t, s, pending, 1)
	wantStatus(t, s, pending, idempotency.InProgress)
}

func testLeaseTakeover(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	stale := mustClaim(t, s, r, 1)
	// The first claimer's host died; at lease_until its claim is stale.
	e.clock.Advance(lease)
	fresh := mustClaim(t, s, r, 2)
	if fresh.Token == stale.Token {
		t.Fatalf("takeover kept the stale token %q", stale.Token)
	}
	wantStatus(t, s, r, idempotency.InProgress)
	wantErr(t, s.Complete(ctx(), stale, result(`{"id":"stale"}`)), idempotency.ErrNotHeld, "stale claimer's Complete")
	wantErr(t, s.Release(ctx(), stale), idempotency.ErrNotHeld, "stale claimer's Release")
	wantStatus(t, s, r, idempotency.InProgress)
	mustComplete(t, s, fresh, result(`{"id":"fresh"}`))
	wantErr(t, s.Complete(ctx(), stale, result(`{"id":"stale"}`)), idempotency.ErrNotHeld, "stale claimer's Complete after the new one's")
	wantReplay(t, s, r, result(`{"id":"fresh"}`))
	// The takeover started a new retention window.
	e.clock.Advance(retention - time.Second)
	wantReplay(t, s, r, result(`{"id":"fresh"}`))
	e.clock.Advance(time.Second)
	mustClaim(t, s, r, 1)
}

func testStaleClaimOfOtherRequest(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	mustClaim(t, s, r, 1)
	e.clock.Advance(lease * 2)
	// A stale claim still binds the key to its request.
	res := wantStatus(t, s, req(t, "alice", "key-1", "booking.create", `{"resource_id":"room-b","start":"2030-01-07T10:00:00Z"}`), idempotency.Mismatch)
	if res.Differs != idempotency.DiffersArguments {
		t.Fatalf("mismatch = %s; want arguments", res.Differs)
	}
	wantStatus(t, s, req(t, "alice", "key-1", "booking.cancel", `{}`), idempotency.Mismatch)
	mustClaim(t, s, r, 2)
}

func testLateComplete(t *testing.T, e *env) {
	s := e.open()
	done, released := create(t, "done"), create(t, "released")
	tkDone, tkReleased := mustClaim(t, s, done, 1), mustClaim(t, s, released, 1)
	// The calls outlived their leases, but nobody took over: their tickets
	// still hold the claims.
	e.clock.Advance(lease * 3)
	mustComplete(t, s, tkDone, result(`{"late":true}`))
	wantReplay(t, s, done, result(`{"late":true}`))
	if err := s.Release(ctx(), tkReleased); err != nil {
		t.Fatalf("late Release: %v", err)
	}
	mustClaim(t, s, released, 1)
}

func testReleaseThenClaim(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	tk := mustClaim(t, s, r, 1)
	if err := s.Release(ctx(), tk); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantErr(t, s.Release(ctx(), tk), idempotency.ErrNotHeld, "second Release")
	wantErr(t, s.Complete(ctx(), tk, result(`{}`)), idempotency.ErrNotHeld, "Complete after Release")
	// The key is free, for any request: nothing of the first is kept.
	mustClaim(t, s, req(t, "alice", "key-1", "booking.cancel", `{"id":"bk_1"}`), 1)
}

func testTicketUsedOnce(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	tk := mustClaim(t, s, r, 1)
	mustComplete(t, s, tk, result(`{"id":"first"}`))
	wantErr(t, s.Complete(ctx(), tk, result(`{"id":"second"}`)), idempotency.ErrNotHeld, "second Complete")
	wantErr(t, s.Release(ctx(), tk), idempotency.ErrNotHeld, "Release after Complete")
	wantReplay(t, s, r, result(`{"id":"first"}`))
	// A well-formed token that was never issued holds nothing either.
	forged := tk
	forged.Token = strings.Repeat("A", len(tk.Token))
	mustClaim(t, s, create(t, "key-2"), 1)
	forged.Key = "key-2"
	wantErr(t, s.Complete(ctx(), forged, result(`{}`)), idempotency.ErrNotHeld, "Complete with a forged token")
	wantErr(t, s.Release(ctx(), forged), idempotency.ErrNotHeld, "Release with a forged token")
	wantStatus(t, s, create(t, "key-2"), idempotency.InProgress)
}

func testPurge(t *testing.T, e *env) {
	s := e.open()
	if n, err := s.Purge(ctx(), e.clock.Now()); err != nil || n != 0 {
		t.Fatalf("Purge of an empty store = %d, %v; want 0", n, err)
	}
	// Early records: two done, one pending, one released.
	mustComplete(t, s, mustClaim(t, s, create(t, "old-done-1"), 1), result(`1`))
	mustComplete(t, s, mustClaim(t, s, create(t, "old-done-2"), 1), result(`2`))
	mustClaim(t, s, create(t, "old-pending"), 1)
	if err := s.Release(ctx(), mustClaim(t, s, create(t, "released"), 1)); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	mustComplete(t, s, mustClaim(t, s, create(t, "new-done"), 1), result(`3`))
	mustClaim(t, s, create(t, "new-pending"), 1)
	e.clock.Advance(retention - time.Hour)
	// Now the early ones are at their expiry, the later ones an hour short.
	if n, err := s.Purge(ctx(), e.clock.Now()); err != nil || n != 3 {
		t.Fatalf("Purge = %d, %v; want the 3 expired records", n, err)
	}
	if n, err := s.Purge(ctx(), e.clock.Now()); err != nil || n != 0 {
		t.Fatalf("second Purge = %d, %v; want 0", n, err)
	}
	wantReplay(t, s, create(t, "new-done"), result(`3`))
	wantStatus(t, s, create(t, "new-pending"), idempotency.Claimed) // its lease ran out long ago
	mustClaim(t, s, create(t, "old-done-1"), 1)
	if _, err := s.Purge(ctx(), time.Time{}); !errors.Is(err, idempotency.ErrInvalid) {
		t.Fatalf("Purge(zero time) error = %v; want ErrInvalid", err)
	}
}

func testLargeOutcome(t *testing.T, e *env) {
	s := e.open()
	r := create(t, "key-1")
	tk := mustClaim(t, s, r, 1)
	big := `"` + strings.Repeat("x", idempotency.MaxOutcomeSize-1) + `"`
	wantErr(t, s.Complete(ctx(), tk, result(big)), idempotency.ErrOutcomeTooLarge, "Complete with a result one byte too large")
	wantErr(t, s.Complete(ctx(), tk, idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: 1,
		Message: strings.Repeat("m", idempotency.MaxOutcomeSize+1)}), idempotency.ErrOutcomeTooLarge, "Complete with a message one byte too large")
	// Nothing was stored and the claim is still held.
	wantStatus(t, s, r, idempotency.InProgress)
	fits := result(big[1:])
	fits.Result[0] = '"'
	if len(fits.Result) != idempotency.MaxOutcomeSize {
		t.Fatalf("test result is %d bytes; want %d", len(fits.Result), idempotency.MaxOutcomeSize)
	}
	mustComplete(t, s, tk, fits)
	wantReplay(t, s, r, fits)
}

func testInvalidInput(t *testing.T, e *env) {
	s := e.open()
	good := create(t, "key-1")
	requests := []struct {
		name   string
		mutate func(r *idempotency.Request)
	}{
		{"empty key", func(r *idempotency.Request) { r.Key = "" }},
		{"key too long", func(r *idempotency.Request) { r.Key = strings.Repeat("k", idempotency.MaxKeyLen+1) }},
		{"key with space", func(r *idempotency.Request) { r.Key = "my key" }},
		{"key with newline", func(r *idempotency.Request) { r.Key = "key\n" }},
		{"key with NUL", func(r *idempotency.Request) { r.Key = "key\x00" }},
		{"key not ASCII", func(r *idempotency.Request) { r.Key = "clé" }},
		{"key with DEL", func(r *idempotency.Request) { r.Key = "key\x7f" }},
		{"empty user", func(r *idempotency.Request) { r.UserID = "" }},
		{"user too long", func(r *idempotency.Request) { r.UserID = strings.Repeat("u", idempotency.MaxIDLen+1) }},
		{"user with NUL", func(r *idempotency.Request) { r.UserID = "al\x00ice" }},
		{"user not UTF-8", func(r *idempotency.Request) { r.UserID = "al\xffice" }},
		{"empty capability", func(r *idempotency.Request) { r.Capability = "" }},
		{"capability too long", func(r *idempotency.Request) { r.Capability = strings.Repeat("c", idempotency.MaxIDLen+1) }},
		{"no fingerprint", func(r *idempotency.Request) { r.Fingerprint = idempotency.Fingerprint{} }},
	}
	for _, tc := range requests {
		t.Run("request/"+tc.name, func(t *testing.T) {
			r := good
			tc.mutate(&r)
			_, err := s.Claim(ctx(), r, lease, retention)
			wantErr(t, err, idempotency.ErrInvalid, "Claim")
			if r.Key != "" && strings.Contains(err.Error(), r.Key) && len(r.Key) > 20 {
				t.Fatalf("Claim error echoes the long key: %v", err)
			}
		})
	}
	windows := []struct {
		name             string
		lease, retention time.Duration
	}{
		{"zero lease", 0, retention},
		{"negative lease", -time.Second, retention},
		{"sub-second lease", 500 * time.Millisecond, retention},
		{"retention below lease", time.Minute, 59 * time.Second},
		{"negative retention", lease, -time.Hour},
	}
	for _, tc := range windows {
		t.Run("window/"+tc.name, func(t *testing.T) {
			_, err := s.Claim(ctx(), good, tc.lease, tc.retention)
			wantErr(t, err, idempotency.ErrInvalid, "Claim")
		})
	}
	// None of those stored anything.
	tk := mustClaim(t, s, good, 1)
	outcomes := []struct {
		name string
		o    idempotency.Outcome
	}{
		{"no kind", idempotency.Outcome{Result: json.RawMessage(`{}`)}},
		{"unknown kind", idempotency.Outcome{Kind: "maybe", Result: json.RawMessage(`{}`)}},
		{"result not JSON", result(`{"id":`)},
		{"empty result", result(``)},
		{"result with a code", idempotency.Outcome{Kind: idempotency.OutcomeResult, Result: json.RawMessage(`{}`), Code: 3}},
		{"result with a message", idempotency.Outcome{Kind: idempotency.OutcomeResult, Result: json.RawMessage(`{}`), Message: "no"}},
		{"tool error without code", idempotency.Outcome{Kind: idempotency.OutcomeToolError, Message: "no"}},
		{"tool error with a result", idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: 1, Result: json.RawMessage(`{}`)}},
	}
	for _, tc := range outcomes {
		t.Run("outcome/"+tc.name, func(t *testing.T) {
			wantErr(t, s.Complete(ctx(), tk, tc.o), idempotency.ErrInvalid, "Complete")
		})
	}
	tickets := []struct {
		name   string
		mutate func(tk *idempotency.Ticket)
	}{
		{"empty token", func(tk *idempotency.Ticket) { tk.Token = "" }},
		{"token too long", func(tk *idempotency.Ticket) { tk.Token = strings.Repeat("T", 65) }},
		{"bad key", func(tk *idempotency.Ticket) { tk.Key = "my key" }},
		{"empty user", func(tk *idempotency.Ticket) { tk.UserID = "" }},
	}
	for _, tc := range tickets {
		t.Run("ticket/"+tc.name, func(t *testing.T) {
			bad := tk
			tc.mutate(&bad)
			wantErr(t, s.Complete(ctx(), bad, result(`{}`)), idempotency.ErrInvalid, "Complete")
			wantErr(t, s.Release(ctx(), bad), idempotency.ErrInvalid, "Release")
		})
	}
	// The claim survived every refusal, untouched.
	wantStatus(t, s, good, idempotency.InProgress)
	mustComplete(t, s, tk, result(`{"ok":true}`))
	wantReplay(t, s, good, result(`{"ok":true}`))
}

// race runs n claims of r at once, the i-th on stores[i%len(stores)], and
// returns how many got each status.
func race(t *testing.T, stores []*idempotency.Store, r idempotency.Request, n int) (map[idempotency.ClaimStatus]int, []int) {
	t.Helper()
	results := make([]idempotency.ClaimResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = stores[i%len(stores)].Claim(ctx(), r, lease, retention)
		})
	}
	close(start)
	wg.Wait()
	counts := map[idempotency.ClaimStatus]int{}
	var attempts []int
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		counts[res.Status]++
		if res.Status == idempotency.Claimed {
			attempts = append(attempts, res.Attempt)
		}
	}
	return counts, attempts
}

const racers = 20

func wantOneClaimed(t *testing.T, counts map[idempotency.ClaimStatus]int, attempts []int, attempt int) {
	t.Helper()
	if counts[idempotency.Claimed] != 1 || counts[idempotency.InProgress] != racers-1 || len(attempts) != 1 || attempts[0] != attempt {
		t.Fatalf("%d racing claims: %v, claimed attempts %v; want exactly 1 claimed (attempt %d) and %d in progress",
			racers, counts, attempts, attempt, racers-1)
	}
}

func testConcurrentClaims(t *testing.T, e *env) {
	s := e.open()
	counts, attempts := race(t, []*idempotency.Store{s}, create(t, "key-1"), racers)
	wantOneClaimed(t, counts, attempts, 1)
}

func testReplicasRace(t *testing.T, e *env) {
	// Two handles, each with its own connection pool: two hosts.
	replicas := []*idempotency.Store{e.open(), e.open()}
	counts, attempts := race(t, replicas, create(t, "key-1"), racers)
	wantOneClaimed(t, counts, attempts, 1)
}

func testConcurrentTakeover(t *testing.T, e *env) {
	replicas := []*idempotency.Store{e.open(), e.open()}
	r := create(t, "key-1")
	stale := mustClaim(t, replicas[0], r, 1)
	e.clock.Advance(lease)
	counts, attempts := race(t, replicas, r, racers)
	wantOneClaimed(t, counts, attempts, 2)
	wantErr(t, replicas[1].Complete(ctx(), stale, result(`{}`)), idempotency.ErrNotHeld, "stale claimer's Complete")
}

func testConcurrentPurges(t *testing.T, e *env) {
	replicas := []*idempotency.Store{e.open(), e.open(), e.open()}
	const expired = 60
	for i := range expired {
		r := create(t, fmt.Sprintf("old-%d", i))
		tk := mustClaim(t, replicas[i%len(replicas)], r, 1)
		if i%2 == 0 {
			mustComplete(t, replicas[0], tk, result(`{}`))
		}
	}
	e.clock.Advance(time.Hour)
	live := create(t, "live")
	mustComplete(t, replicas[0], mustClaim(t, replicas[0], live, 1), result(`{"live":true}`))
	e.clock.Advance(retention - time.Hour)
	counts := make([]int64, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, s := range replicas {
		wg.Go(func() { counts[i], errs[i] = s.Purge(ctx(), e.clock.Now()) })
	}
	wg.Wait()
	var total int64
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("Purge on replica %d: %v", i, errs[i])
		}
		total += counts[i]
	}
	if total != expired {
		t.Fatalf("purges from %d replicas deleted %v, %d in all; want %d", len(replicas), counts, total, expired)
	}
	wantReplay(t, replicas[1], live, result(`{"live":true}`))
}

func testReopen(t *testing.T, e *env) {
	s := e.open()
	done, pending := create(t, "done"), create(t, "pending")
	mustComplete(t, s, mustClaim(t, s, done, 1), idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: 3, Message: "slot already booked"})
	mustClaim(t, s, pending, 1)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	again := e.open()
	wantReplay(t, again, done, idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: 3, Message: "slot already booked"})
	wantStatus(t, again, pending, idempotency.InProgress)
}
