package approvals_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
)

// secretRequest is a held call with a sensitive field, sent under a case
// variant of its name as the decoder accepts it.
func secretRequest() approvals.Request {
	r := request()
	r.Capability = "account.reset"
	r.Args = []byte(`{"id":"s-1","Password":"hunter2"}`)
	r.Sensitive = [][]string{{"password"}}
	return r
}

// runHeld is the part of the contract about what a held call keeps and
// how many a user may have: on both engines, across replicas.
func runHeld(t *testing.T, setup func(t *testing.T) (*approvals.Store, opener, *clock)) {
	ctx := context.Background()

	t.Run("SensitiveShownRedactedAndRawClearedOnceSettled", func(t *testing.T) {
		s, _, c := setup(t)
		ran, _ := s.Create(ctx, secretRequest())
		rejected, _ := s.Create(ctx, func() approvals.Request {
			r := secretRequest()
			r.Args = []byte(`{"id":"s-2","password":"hunter2"}`)
			return r
		}())
		lapsed, _ := s.Create(ctx, func() approvals.Request {
			r := secretRequest()
			r.Args = []byte(`{"id":"s-3","password":"hunter2"}`)
			return r
		}())
		lost, _ := s.Create(ctx, func() approvals.Request {
			r := secretRequest()
			r.Args = []byte(`{"id":"s-4","password":"hunter2"}`)
			return r
		}())
		got, err := s.Get(ctx, ran.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(got.Shown), "hunter2") || !strings.Contains(string(got.Shown), `"id":"s-1"`) {
			t.Fatalf("shown %s; want the arguments with the password redacted", got.Shown)
		}
		if string(got.Args) != string(secretRequest().Args) {
			t.Fatalf("raw arguments %s while pending; the run needs them as sent", got.Args)
		}
		list, _ := s.List(ctx, approvals.Filter{})
		for _, a := range list {
			if strings.Contains(string(a.Shown), "hunter2") {
				t.Errorf("listed %s shows %s", a.ID, a.Shown)
			}
		}
		// Run one, reject one, let one lapse, lose one with its host.
		if _, err := s.Decide(ctx, ran.ID, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		if a, ok, err := s.Start(ctx, ran.ID); !ok || err != nil || string(a.Args) != string(secretRequest().Args) {
			t.Fatalf("start: %v %v, args %s; the run needs the raw arguments", ok, err, a.Args)
		}
		if _, err := s.Finish(ctx, ran.ID, approvals.Outcome{Kind: approvals.OutcomeResult, Result: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, rejected.ID, approvals.Decision{By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		s.Decide(ctx, lost.ID, approvals.Decision{Approve: true, By: "ops", ByUser: "ops"})
		s.Start(ctx, lost.ID)
		c.advance(approvals.Lease + time.Hour)
		if sw, err := s.Sweep(ctx); err != nil || sw.Expired != 1 || sw.Lost != 1 {
			t.Fatalf("sweep %+v %v", sw, err)
		}
		for _, id := range []string{ran.ID, rejected.ID, lapsed.ID, lost.ID} {
			a, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if a.Args != nil {
				t.Errorf("%s is %s, and the database still holds its raw arguments %s", id, a.Status, a.Args)
			}
			if strings.Contains(string(a.Shown), "hunter2") || !strings.Contains(string(a.Shown), `"id"`) {
				t.Errorf("%s shows %s; want the redacted copy kept", id, a.Shown)
			}
		}
	})

	t.Run("IdenticalPendingCallJoinsItsRequest", func(t *testing.T) {
		s, open, c := setup(t)
		other := open(t, c)
		first, err := s.Create(ctx, request())
		if err != nil || first.Joined {
			t.Fatalf("first: %+v %v", first, err)
		}
		// The same call, spaced and ordered otherwise, on another replica.
		again := request()
		again.Args = []byte(`{"id":"s-1"}`)
		joined, err := other.Create(ctx, again)
		if err != nil || joined.ID != first.ID || !joined.Joined {
			t.Fatalf("the same call again: %+v %v; want request %s", joined, err, first.ID)
		}
		for name, r := range map[string]approvals.Request{
			"other arguments":  requestFor("s-2"),
			"other user":       func() approvals.Request { r := request(); r.UserID = "bob"; return r }(),
			"other token":      func() approvals.Request { r := request(); r.TokenLabel = "tokens-1"; return r }(),
			"other capability": func() approvals.Request { r := request(); r.Capability = "subscription.pause"; return r }(),
		} {
			if a, err := s.Create(ctx, r); err != nil || a.Joined || a.ID == first.ID {
				t.Errorf("%s: %+v %v; want a request of its own", name, a, err)
			}
		}
		if _, err := s.Decide(ctx, first.ID, approvals.Decision{By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		if a, err := s.Create(ctx, request()); err != nil || a.Joined || a.ID == first.ID {
			t.Fatalf("after a decision: %+v %v; want a new request", a, err)
		}
		// Racing replicas store one request of one call.
		r := requestFor("s-race")
		ids := make(chan string, 20)
		race(20, s, other, func(st *approvals.Store) bool {
			a, err := st.Create(ctx, r)
			if err != nil {
				t.Error(err)
			}
			ids <- a.ID
			return !a.Joined
		})
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		if len(seen) != 1 {
			t.Fatalf("20 racing copies of one call made %d requests; want 1", len(seen))
		}
		if l, _ := s.List(ctx, approvals.Filter{Status: approvals.Pending, Limit: approvals.MaxLimit}); len(l) != 6 {
			t.Fatalf("%d pending; want 6 (one per distinct call)", len(l))
		}
	})

	t.Run("PendingRequestsCappedPerUser", func(t *testing.T) {
		s, open, c := setup(t)
		other := open(t, c)
		capped := func(id string) approvals.Request { r := requestFor(id); r.MaxPending = 3; return r }
		var ids []string
		for i := range 3 {
			a, err := s.Create(ctx, capped(fmt.Sprint("s-", i)))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.ID)
		}
		_, err := other.Create(ctx, capped("s-3"))
		if !errors.Is(err, approvals.ErrTooManyPending) || !strings.Contains(err.Error(), "3") || !strings.Contains(err.Error(), "alice") {
			t.Fatalf("a fourth: %v; want ErrTooManyPending naming the user and the cap", err)
		}
		// Joining an identical pending call takes no slot.
		if a, err := s.Create(ctx, capped("s-0")); err != nil || !a.Joined {
			t.Fatalf("the same call at the cap: %+v %v; want it joined", a, err)
		}
		// Another user has slots of their own.
		bob := capped("s-3")
		bob.UserID = "bob"
		if _, err := s.Create(ctx, bob); err != nil {
			t.Fatalf("bob at alice's cap: %v", err)
		}
		// A decision frees a slot.
		if _, err := s.Decide(ctx, ids[0], approvals.Decision{By: "ops", ByUser: "ops"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, capped("s-3")); err != nil {
			t.Fatalf("after a decision: %v", err)
		}
		// So does the lapse of time, sweep or no sweep.
		c.advance(time.Hour)
		for i := range 3 {
			if _, err := other.Create(ctx, capped(fmt.Sprint("t-", i))); err != nil {
				t.Fatalf("after the others lapsed: %v", err)
			}
		}
	})

	t.Run("CapHoldsAcrossReplicas", func(t *testing.T) {
		s, open, c := setup(t)
		other := open(t, c)
		var n atomic.Int32
		stored := race(20, s, other, func(st *approvals.Store) bool {
			r := requestFor(fmt.Sprint("s-", n.Add(1)))
			r.MaxPending = 5
			_, err := st.Create(ctx, r)
			if err != nil && !errors.Is(err, approvals.ErrTooManyPending) {
				t.Error(err)
			}
			return err == nil
		})
		if stored != 5 {
			t.Fatalf("%d of 20 racing requests stored under a cap of 5", stored)
		}
		if l, _ := s.List(ctx, approvals.Filter{UserID: "alice", Status: approvals.Pending}); len(l) != 5 {
			t.Fatalf("%d pending; want 5", len(l))
		}
	})

	t.Run("FourEyesComparesNormalizedUsers", func(t *testing.T) {
		s, _, _ := setup(t)
		a, _ := s.Create(ctx, request())
		for _, by := range []string{"Alice", " alice", "ALICE\t"} {
			if _, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-9", ByUser: by}); !errors.Is(err, approvals.ErrSelfApproval) {
				t.Errorf("decided by user %q: %v; want ErrSelfApproval", by, err)
			}
		}
		for _, by := range []string{"", "  "} {
			_, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-9", ByUser: by, AllowSelf: true})
			if !errors.Is(err, approvals.ErrUnboundDecider) || !strings.Contains(err.Error(), "tokens-9") {
				t.Errorf("decided by no user (%q): %v; want ErrUnboundDecider naming the decider", by, err)
			}
		}
		if got, _ := s.Get(ctx, a.ID); got.Status != approvals.Pending {
			t.Fatalf("a refused decision changed the request: %s", got.Status)
		}
		if got, err := s.Decide(ctx, a.ID, approvals.Decision{Approve: true, By: "tokens-9", ByUser: "ops"}); err != nil || got.Status != approvals.Approved {
			t.Fatalf("another user: %+v %v", got, err)
		}
	})
}
