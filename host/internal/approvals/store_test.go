package approvals_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/pgtest"
)

// clock is a time the tests move instead of sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// opener opens a store on the engine under test; every store one opener
// returns shares one database, as replicas do.
type opener func(t *testing.T, c *clock) *approvals.Store

func TestStoreSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) opener {
		path := filepath.Join(t.TempDir(), approvals.FileName)
		return func(t *testing.T, c *clock) *approvals.Store {
			s, err := approvals.OpenSQLite(context.Background(), path, nil, approvals.WithClock(c.now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func TestStorePostgres(t *testing.T) {
	runContract(t, func(t *testing.T) opener {
		dsn := pgtest.SchemaDSN(t)
		return func(t *testing.T, c *clock) *approvals.Store {
			s, err := approvals.OpenPostgres(context.Background(), dsn, nil, approvals.WithClock(c.now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func request() approvals.Request {
	return approvals.Request{TokenLabel: "tokens-0", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "subscription.cancel", Args: []byte(`{ "id" : "s-1" }`), Risk: registry.RiskDangerous, TTL: time.Hour}
}

// requestFor is request() for another subscription, so that it is not
// the same call as request()'s.
func requestFor(id string) approvals.Request {
	r := request()
	r.Args = []byte(`{"id":"` + id + `"}`)
	return r
}

func runContract(t *testing.T, fresh func(t *testing.T) opener) {
	ctx := context.Background()
	setup := func(t *testing.T) (*approvals.Store, opener, *clock) {
		open := fresh(t)
		c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
		return open(t, c), open, c
	}

	t.Run("RoundTrip", func(t *testing.T) {
		s, _, c := setup(t)
		a, err := s.Create(ctx, request())
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		r := request()
		if !strings.HasPrefix(got.ID, "ap_") || got.TokenLabel != r.TokenLabel || got.Role != r.Role || got.Scope != r.Scope ||
			got.UserID != r.UserID || got.Capability != r.Capability || got.Risk != r.Risk || got.Status != approvals.Pending {
			t.Fatalf("stored %+v", got)
		}
		if string(got.Args) != string(r.Args) || got.ArgsSHA256 != sha256.Sum256(r.Args) {
			t.Errorf("arguments %q digest %x; want them exactly as sent", got.Args, got.ArgsSHA256)
		}
		if !got.CreatedAt.Equal(c.now()) || !got.ExpiresAt.Equal(c.now().Add(time.Hour)) {
			t.Errorf("created %v expires %v", got.CreatedAt, got.ExpiresAt)
		}
		if _, err := s.Get(ctx, "ap_none"); !errors.Is(err, approvals.ErrNotFound) {
			t.Errorf("Get of an unknown id: %v; want ErrNotFound", err)
		}
	})

	t.Run("CreateRefusesBadRequests", func(t *testing.T) {
		s, _, _ := setup(t)
		for name, mutate := range map[string]func(*approvals.Request){
			"no capability": func(r *approvals.Request) { r.Capability = "" },
			"no user":       func(r *approvals.Request) { r.UserID = "" },
			"safe":          func(r *approvals.Request) { r.Risk = registry.RiskSafe },
			"blocked":       func(r *approvals.Request) { r.Risk = registry.RiskBlocked },
			"huge args":     func(r *approvals.Request) { r.Args = make([]byte, approvals.MaxArgs+1) },
			"no wait":       func(r *approvals.Request) { r.TTL = 0 },
			"long role":     func(r *approvals.Request) { r.Role = strings.Repeat("r", approvals.MaxField+1) },
			"not UTF-8":     func(r *approvals.Request) { r.UserID = "\xff" },
		} {
			r := request()
			mutate(&r)
			if _, err := s.Create(ctx, r); !errors.Is(err, approvals.ErrInvalid) {
				t.Errorf("%s: %v; want ErrInvalid", name, err)
			}
		}
		if all, err := s.List(ctx, approvals.Filter{}); err != nil || len(all) != 0 {
			t.Errorf("after refusals: %d stored, %v", len(all), err)
		}
	})

	t.Run("DecideOnce", func(t *testing.T) {
		s, _, c := setup(t)
		a, _ := s.Create(ctx, request())
		got, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-5", ByUser: "ops", Reason: "refund agreed"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != approvals.Approved || got.DecidedBy != "tokens-5" || got.Reason != "refund agreed" || !got.DecidedAt.Equal(c.now()) {
			t.Fatalf("decided %+v", got)
		}
		for _, approve := range []bool{true, false} {
			if _, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: approve, By: "tokens-6", ByUser: "ops2"}); !errors.Is(err, approvals.ErrDecided) || !strings.Contains(err.Error(), "approved") {
				t.Errorf("a second decision (approve %v): %v; want ErrDecided naming the state", approve, err)
			}
		}
		b, _ := s.Create(ctx, request())
		if got, err := s.Decide(ctx, b.ID, approvals.Decision{By: "tokens-5", ByUser: "ops", Reason: "no"}); err != nil || got.Status != approvals.Rejected {
			t.Fatalf("reject: %+v %v", got, err)
		}
		if _, ok, err := s.Start(ctx, b.ID); ok || err != nil {
			t.Errorf("a rejected request was taken to run: %v %v", ok, err)
		}
		if _, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, Reason: strings.Repeat("x", approvals.MaxReason+1)}); !errors.Is(err, approvals.ErrInvalid) {
			t.Errorf("an oversized reason: %v; want ErrInvalid", err)
		}
	})

	t.Run("FourEyes", func(t *testing.T) {
		s, _, _ := setup(t)
		a, _ := s.Create(ctx, request())
		if _, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-0", ByUser: "alice"}); !errors.Is(err, approvals.ErrSelfApproval) {
			t.Fatalf("self-approval: %v; want ErrSelfApproval", err)
		}
		if got, _ := s.Get(ctx, a.ID); got.Status != approvals.Pending {
			t.Fatalf("a refused self-approval changed the request: %s", got.Status)
		}
		if got, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-0", ByUser: "alice", AllowSelf: true}); err != nil || got.Status != approvals.Approved {
			t.Fatalf("self-approval allowed: %+v %v", got, err)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		s, _, c := setup(t)
		a, _ := s.Create(ctx, request())
		c.advance(time.Hour)
		if got, _ := s.Get(ctx, a.ID); got.Status != approvals.Expired {
			t.Fatalf("at its expiry the request reads %s", got.Status)
		}
		if _, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); !errors.Is(err, approvals.ErrDecided) || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("deciding an expired request: %v", err)
		}
		if l, err := s.List(ctx, approvals.Filter{Status: approvals.Expired}); err != nil || len(l) != 1 {
			t.Fatalf("expired list: %d %v", len(l), err)
		}
		if l, _ := s.List(ctx, approvals.Filter{Status: approvals.Pending}); len(l) != 0 {
			t.Fatalf("an expired request is listed pending")
		}
		if sw, err := s.Sweep(ctx); err != nil || sw.Expired != 1 || sw.Lost != 0 {
			t.Fatalf("sweep %+v %v", sw, err)
		}
		if sw, _ := s.Sweep(ctx); sw.Expired != 0 {
			t.Fatalf("a second sweep expired %d again", sw.Expired)
		}
	})

	// Replicas: every store below shares one database.
	t.Run("ConcurrentDecisionsAcrossReplicas", func(t *testing.T) {
		first, open, c := setup(t)
		second := open(t, c)
		a, _ := first.Create(ctx, request())
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := []*approvals.Store{first, second}[i%2]
				_, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: i%3 != 0, By: "ops", ByUser: "ops"})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, approvals.ErrDecided):
					t.Errorf("decider %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d of 20 racing decisions took effect; want 1", wins.Load())
		}
	})

	t.Run("RunsOnceAcrossReplicas", func(t *testing.T) {
		first, open, c := setup(t)
		second := open(t, c)
		a, _ := first.Create(ctx, request())
		if _, err := first.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		if ids, err := second.ApprovedIDs(ctx); err != nil || len(ids) != 1 || ids[0] != a.ID {
			t.Fatalf("approved, not run: %v %v", ids, err)
		}
		var taken atomic.Int32
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := []*approvals.Store{first, second}[i%2]
				got, ok, err := s.Start(ctx, a.ID)
				if err != nil {
					t.Errorf("start %d: %v", i, err)
				}
				if ok {
					taken.Add(1)
					if got.Status != approvals.Running {
						t.Errorf("taken, status %s", got.Status)
					}
				}
			}()
		}
		wg.Wait()
		if taken.Load() != 1 {
			t.Fatalf("%d of 20 racing starts took the request; want 1", taken.Load())
		}
		if ids, _ := first.ApprovedIDs(ctx); len(ids) != 0 {
			t.Errorf("still listed to run after it was taken: %v", ids)
		}
		got, err := second.Finish(ctx, a.ID, approvals.Outcome{Kind: approvals.OutcomeResult, Result: []byte(`{"status":"cancelled"}`)})
		if err != nil || got.Status != approvals.Done || string(got.Outcome.Result) != `{"status":"cancelled"}` || got.Outcome.Kind != approvals.OutcomeResult {
			t.Fatalf("finished %+v %v", got, err)
		}
		if _, err := first.Finish(ctx, a.ID, approvals.Outcome{Kind: approvals.OutcomeFailed}); !errors.Is(err, approvals.ErrDecided) {
			t.Errorf("a second Finish: %v; want ErrDecided", err)
		}
		if _, ok, _ := first.Start(ctx, a.ID); ok {
			t.Error("a finished request was taken to run again")
		}
	})

	t.Run("LostRunIsNeverRunAgain", func(t *testing.T) {
		s, _, c := setup(t)
		a, _ := s.Create(ctx, request())
		s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"})
		if _, ok, _ := s.Start(ctx, a.ID); !ok {
			t.Fatal("not taken")
		}
		c.advance(approvals.Lease - time.Second)
		if sw, _ := s.Sweep(ctx); sw.Lost != 0 {
			t.Fatal("a run within its lease counted lost")
		}
		c.advance(time.Second)
		if sw, err := s.Sweep(ctx); err != nil || sw.Lost != 1 {
			t.Fatalf("sweep %+v %v", sw, err)
		}
		got, _ := s.Get(ctx, a.ID)
		if got.Status != approvals.Done || got.Outcome.Kind != approvals.OutcomeFailed || got.Outcome.Message != approvals.LostMessage {
			t.Fatalf("lost run: %+v", got)
		}
		if _, ok, _ := s.Start(ctx, a.ID); ok {
			t.Error("a lost run was taken to run again")
		}
	})

	t.Run("ConfirmationAnsweredOnceAcrossReplicas", func(t *testing.T) {
		s, open, c := setup(t)
		other := open(t, c)
		expires := c.now().Add(time.Minute)
		firsts := race(20, s, other, func(st *approvals.Store) bool {
			first, err := st.Use(ctx, "cf_one", expires)
			if err != nil {
				t.Error(err)
			}
			return first
		})
		if n := firsts; n != 1 {
			t.Fatalf("%d of 20 racing answers were first; want 1", n)
		}
		if first, err := other.Use(ctx, "cf_two", expires); err != nil || !first {
			t.Fatalf("another question: %v %v; want it first", first, err)
		}
		for _, bad := range []string{"", strings.Repeat("x", 65), "\xff"} {
			if _, err := s.Use(ctx, bad, expires); !errors.Is(err, approvals.ErrInvalid) {
				t.Errorf("Use(%q): %v; want ErrInvalid", bad, err)
			}
		}
		// Past their expiry, answered questions are forgotten: the seal
		// refuses them by then.
		c.advance(time.Minute)
		if sw, err := s.Sweep(ctx); err != nil || sw.Confirmations != 2 {
			t.Fatalf("sweep %+v %v; want both answers forgotten", sw, err)
		}
	})

	t.Run("DecisionAnnouncedOnceAcrossReplicas", func(t *testing.T) {
		s, open, c := setup(t)
		other := open(t, c)
		a, _ := s.Create(ctx, request())
		pending, _ := s.Create(ctx, requestFor("s-2"))
		if ids, err := s.Unannounced(ctx, 10); err != nil || len(ids) != 0 {
			t.Fatalf("undecided requests listed to announce: %v %v", ids, err)
		}
		if _, _, err := s.Announce(ctx, pending.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, a.ID, approvals.Decision{By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		ids, err := other.Unannounced(ctx, 10)
		if err != nil || len(ids) != 1 || ids[0] != a.ID {
			t.Fatalf("to announce: %v %v; want only the decided %s", ids, err, a.ID)
		}
		taken := race(10, s, other, func(st *approvals.Store) bool {
			got, ok, err := st.Announce(ctx, a.ID)
			if err != nil {
				t.Error(err)
			}
			if ok && got.Status != approvals.Rejected {
				t.Errorf("announced %+v; want the rejection", got)
			}
			return ok
		})
		if n := taken; n != 1 {
			t.Fatalf("%d of 10 racing announcers took the decision; want 1", n)
		}
		if ids, _ := s.Unannounced(ctx, 10); len(ids) != 0 {
			t.Fatalf("still to announce: %v", ids)
		}
	})

	t.Run("ConfirmKeySharedByReplicas", func(t *testing.T) {
		s, open, c := setup(t)
		k1, err := s.ConfirmKey(ctx)
		if err != nil || len(k1) < 32 {
			t.Fatalf("key %d bytes, %v", len(k1), err)
		}
		k2, err := open(t, c).ConfirmKey(ctx)
		if err != nil || string(k1) != string(k2) {
			t.Fatalf("another store's key differs (%v): replicas would refuse each other's states", err)
		}
	})

	t.Run("SessionKeySharedByReplicasAndItsOwn", func(t *testing.T) {
		s, open, c := setup(t)
		k1, err := s.SessionKey(ctx)
		if err != nil || len(k1) < 32 {
			t.Fatalf("key %d bytes, %v", len(k1), err)
		}
		k2, err := open(t, c).SessionKey(ctx)
		if err != nil || string(k1) != string(k2) {
			t.Fatalf("another store's session key differs (%v): replicas would refuse each other's sessions", err)
		}
		confirm, err := s.ConfirmKey(ctx)
		if err != nil || string(confirm) == string(k1) {
			t.Fatalf("the session key is the confirmation key (%v): one signature could stand for the other", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		s, _, c := setup(t)
		var ids []string
		for i, user := range []string{"alice", "bob", "alice"} {
			r := requestFor(fmt.Sprint("s-", i))
			r.UserID = user
			a, _ := s.Create(ctx, r)
			ids = append(ids, a.ID)
			c.advance(time.Second)
		}
		s.Decide(ctx, ids[2], approvals.Decision{By: "ops", ByUser: "ops"})
		mine, err := s.List(ctx, approvals.Filter{UserID: "alice"})
		if err != nil || len(mine) != 2 || mine[0].ID != ids[2] || mine[1].ID != ids[0] {
			t.Fatalf("alice's, newest first: %v %v", mine, err)
		}
		if p, _ := s.List(ctx, approvals.Filter{UserID: "alice", Status: approvals.Pending}); len(p) != 1 || p[0].ID != ids[0] {
			t.Fatalf("alice's pending: %v", p)
		}
		if l, _ := s.List(ctx, approvals.Filter{Limit: 1}); len(l) != 1 {
			t.Fatalf("limit 1: %d", len(l))
		}
		for _, f := range []approvals.Filter{{Status: "waiting"}, {Limit: -1}, {Limit: approvals.MaxLimit + 1}} {
			if _, err := s.List(ctx, f); !errors.Is(err, approvals.ErrInvalid) {
				t.Errorf("filter %+v: %v; want ErrInvalid", f, err)
			}
		}
	})

	runHeld(t, setup)
}

// race runs do n times at once, alternately on two stores sharing one
// database, as replicas would, and counts the runs that returned true.
func race(n int, a, b *approvals.Store, do func(*approvals.Store) bool) int {
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		st := []*approvals.Store{a, b}[i%2]
		wg.Go(func() {
			if do(st) {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	return int(won.Load())
}
