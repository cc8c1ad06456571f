package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
)

// RunContract runs the store contract. newStore must return an empty,
// migrated store on its own database; RunContract closes it.
func RunContract(t *testing.T, newStore func(t *testing.T) store.Store) {
	open := func(t *testing.T) store.Store {
		t.Helper()
		s := newStore(t)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close store: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"PlansRoundTrip", testPlansRoundTrip},
		{"PlanNotFound", testPlanNotFound},
		{"CreatePlanDuplicate", testCreatePlanDuplicate},
		{"CreatePlanInvalid", testCreatePlanInvalid},
		{"SubscriptionRoundTrip", testSubscriptionRoundTrip},
		{"SubscriptionNotFound", testSubscriptionNotFound},
		{"SubscribeUnknownPlan", testSubscribeUnknownPlan},
		{"SubscribeTwiceNamesTheActiveOne", testSubscribeTwice},
		{"SubscribeDuplicateID", testSubscribeDuplicateID},
		{"SubscribeInvalid", testSubscribeInvalid},
		{"ConcurrentSubscribesOneWins", testConcurrentSubscribes},
		{"CancelImmediately", testCancelImmediately},
		{"CancelAtPeriodEnd", testCancelAtPeriodEnd},
		{"CancelErrors", testCancelErrors},
		{"ResubscribeAfterEnd", testResubscribeAfterEnd},
		{"ConcurrentCancelsOneWins", testConcurrentCancels},
		{"ListSubscriptions", testListSubscriptions},
		{"ListInvalidFilter", testListInvalidFilter},
		{"SeedOnce", testSeedOnce},
		{"SeedSkipsNonEmpty", testSeedSkipsNonEmpty},
		{"SeedFailureWritesNothing", testSeedFailureWritesNothing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, open(t))
		})
	}
}

// day is a fixed instant far from any real clock, so results never depend
// on when the suite runs.
var day = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

func plan(id string, period store.Period) store.Plan {
	return store.Plan{ID: id, Name: "Plan " + id, Description: "Everything in " + id + ".", PriceCents: 999, Currency: "EUR", Period: period}
}

func sub(id, planID, user string, started time.Time) store.Subscription {
	return store.Subscription{
		ID: id, PlanID: planID, UserID: user, Period: store.Monthly, Status: store.StatusActive,
		StartedAt: started, CurrentPeriodEnd: store.Monthly.End(started, 1),
	}
}

func mustCreatePlan(t *testing.T, s store.Store, p store.Plan) {
	t.Helper()
	if err := s.CreatePlan(context.Background(), p); err != nil {
		t.Fatalf("CreatePlan(%s): %v", p.ID, err)
	}
}

func mustSubscribe(t *testing.T, s store.Store, sb store.Subscription) {
	t.Helper()
	if err := s.Subscribe(context.Background(), sb); err != nil {
		t.Fatalf("Subscribe(%s): %v", sb.ID, err)
	}
}

func mustGet(t *testing.T, s store.Store, id string) store.Subscription {
	t.Helper()
	got, err := s.Subscription(context.Background(), id)
	if err != nil {
		t.Fatalf("Subscription(%s): %v", id, err)
	}
	return got
}

func same(a, b store.Subscription) bool {
	return a.ID == b.ID && a.PlanID == b.PlanID && a.UserID == b.UserID && a.Period == b.Period && a.Status == b.Status &&
		a.StartedAt.Equal(b.StartedAt) && a.CurrentPeriodEnd.Equal(b.CurrentPeriodEnd) && a.CancelAt.Equal(b.CancelAt)
}

func ids(subs []store.Subscription) []string {
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.ID
	}
	return out
}

func testPlansRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.Plans(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("Plans on empty store = %v, %v; want none", got, err)
	}
	b, a := plan("pro-yearly", store.Yearly), plan("basic-monthly", store.Monthly)
	a.Description, a.PriceCents = "", 0 // a free plan without a description is a plan too
	mustCreatePlan(t, s, b)
	mustCreatePlan(t, s, a)
	got, err = s.Plans(ctx)
	if err != nil {
		t.Fatalf("Plans: %v", err)
	}
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Plans = %+v; want [%+v %+v] ordered by id", got, a, b)
	}
	one, err := s.Plan(ctx, "pro-yearly")
	if err != nil || one != b {
		t.Fatalf("Plan(pro-yearly) = %+v, %v; want %+v", one, err, b)
	}
}

func testPlanNotFound(t *testing.T, s store.Store) {
	if _, err := s.Plan(context.Background(), "gold"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Plan(unknown) error = %v; want ErrNotFound", err)
	}
}

func testCreatePlanDuplicate(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	other := plan("plus", store.Yearly)
	other.Name = "Impostor"
	if err := s.CreatePlan(context.Background(), other); !errors.Is(err, store.ErrDuplicateID) {
		t.Fatalf("duplicate CreatePlan error = %v; want ErrDuplicateID", err)
	}
	if got, err := s.Plan(context.Background(), "plus"); err != nil || got.Name != "Plan plus" {
		t.Fatalf("original plan changed: %+v, %v", got, err)
	}
}

func testCreatePlanInvalid(t *testing.T, s store.Store) {
	tests := []struct {
		name   string
		mutate func(p *store.Plan)
	}{
		{"empty id", func(p *store.Plan) { p.ID = "" }},
		{"upper-case id", func(p *store.Plan) { p.ID = "Plus" }},
		{"empty name", func(p *store.Plan) { p.Name = "" }},
		{"negative price", func(p *store.Plan) { p.PriceCents = -1 }},
		{"lower-case currency", func(p *store.Plan) { p.Currency = "eur" }},
		{"long currency", func(p *store.Plan) { p.Currency = "EURO" }},
		{"unknown period", func(p *store.Plan) { p.Period = "week" }},
		{"no period", func(p *store.Plan) { p.Period = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := plan("plan-x", store.Monthly)
			tc.mutate(&p)
			if err := s.CreatePlan(context.Background(), p); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("CreatePlan(%+v) error = %v; want ErrInvalid", p, err)
			}
		})
	}
	if got, err := s.Plans(context.Background()); err != nil || len(got) != 0 {
		t.Fatalf("after invalid creates Plans = %+v, %v; want none stored", got, err)
	}
}

func testSubscriptionRoundTrip(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	// A non-UTC zone on the way in must come back as the same instant.
	sb := sub("sub_roundtrip01", "plus", "alice", day.In(time.FixedZone("CET", 3600)))
	mustSubscribe(t, s, sb)
	got := mustGet(t, s, sb.ID)
	if !same(got, sb) {
		t.Fatalf("Subscription = %+v; want %+v", got, sb)
	}
	if got.StartedAt.Location() != time.UTC || !got.CancelAt.IsZero() {
		t.Fatalf("started_at zone %v, cancel_at %v; want UTC and unset", got.StartedAt.Location(), got.CancelAt)
	}
}

func testSubscriptionNotFound(t *testing.T, s store.Store) {
	if _, err := s.Subscription(context.Background(), "sub_nosuchthing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Subscription(unknown) error = %v; want ErrNotFound", err)
	}
}

func testSubscribeUnknownPlan(t *testing.T, s store.Store) {
	if err := s.Subscribe(context.Background(), sub("sub_orphan", "gold", "alice", day)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Subscribe(unknown plan) error = %v; want ErrNotFound", err)
	}
	if _, err := s.Subscription(context.Background(), "sub_orphan"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("orphan subscription was stored: %v", err)
	}
}

func testSubscribeTwice(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	mustCreatePlan(t, s, plan("pro", store.Monthly))
	mustSubscribe(t, s, sub("sub_first", "plus", "alice", day))
	err := s.Subscribe(context.Background(), sub("sub_second", "plus", "alice", day.Add(time.Hour)))
	var already *store.AlreadySubscribedError
	if !errors.Is(err, store.ErrAlreadySubscribed) || !errors.As(err, &already) || already.ExistingID != "sub_first" {
		t.Fatalf("second Subscribe error = %v; want ErrAlreadySubscribed naming sub_first", err)
	}
	if _, err := s.Subscription(context.Background(), "sub_second"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused subscription was stored: %v", err)
	}
	// Another plan, and the same plan for another user, are free.
	mustSubscribe(t, s, sub("sub_other_plan", "pro", "alice", day))
	mustSubscribe(t, s, sub("sub_other_user", "plus", "bob", day))
	// A cancel at the period end keeps the plan held until then.
	pe := store.Monthly.End(day, 1)
	if _, _, err := s.Cancel(context.Background(), "sub_first", store.Cancellation{Now: day, PeriodEnd: pe}); err != nil {
		t.Fatal(err)
	}
	err = s.Subscribe(context.Background(), sub("sub_third", "plus", "alice", pe.Add(-time.Second)))
	if !errors.As(err, &already) || already.ExistingID != "sub_first" {
		t.Fatalf("Subscribe before the scheduled end = %v; want ErrAlreadySubscribed naming sub_first", err)
	}
}

func testSubscribeDuplicateID(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	mustCreatePlan(t, s, plan("pro", store.Monthly))
	mustSubscribe(t, s, sub("sub_same", "plus", "alice", day))
	if err := s.Subscribe(context.Background(), sub("sub_same", "pro", "bob", day)); !errors.Is(err, store.ErrDuplicateID) {
		t.Fatalf("Subscribe(duplicate id) error = %v; want ErrDuplicateID", err)
	}
	if got := mustGet(t, s, "sub_same"); got.UserID != "alice" {
		t.Fatalf("original subscription changed: %+v", got)
	}
}

func testSubscribeInvalid(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	tests := []struct {
		name   string
		mutate func(sb *store.Subscription)
	}{
		{"empty id", func(sb *store.Subscription) { sb.ID = "" }},
		{"empty plan", func(sb *store.Subscription) { sb.PlanID = "" }},
		{"empty user", func(sb *store.Subscription) { sb.UserID = "" }},
		{"unknown period", func(sb *store.Subscription) { sb.Period = "week" }},
		{"zero start", func(sb *store.Subscription) { sb.StartedAt = time.Time{} }},
		{"period ends before start", func(sb *store.Subscription) { sb.CurrentPeriodEnd = sb.StartedAt.Add(-time.Hour) }},
		{"period ends at start", func(sb *store.Subscription) { sb.CurrentPeriodEnd = sb.StartedAt }},
		{"born cancelled", func(sb *store.Subscription) { sb.Status = store.StatusCancelled }},
		{"unknown status", func(sb *store.Subscription) { sb.Status = "trial" }},
		{"born with cancel_at", func(sb *store.Subscription) { sb.CancelAt = sb.CurrentPeriodEnd }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb := sub(fmt.Sprintf("sub_invalid%02d", i), "plus", "alice", day)
			tc.mutate(&sb)
			if err := s.Subscribe(context.Background(), sb); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Subscribe(%+v) error = %v; want ErrInvalid", sb, err)
			}
		})
	}
	if got, err := s.ListSubscriptions(context.Background(), "alice", store.ListFilter{}); err != nil || len(got) != 0 {
		t.Fatalf("after invalid subscribes alice has %v, %v; want none stored", ids(got), err)
	}
}

// testConcurrentSubscribes races one user's subscribes to one plan on real
// connections: the database, not the caller, must pick exactly one winner.
func testConcurrentSubscribes(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.Subscribe(context.Background(), sub(fmt.Sprintf("sub_race%02d", i), "plus", "alice", day))
		}()
	}
	close(start)
	wg.Wait()
	var won, refused int
	for i, err := range errs {
		var already *store.AlreadySubscribedError
		switch {
		case err == nil:
			won++
		case errors.As(err, &already) && already.ExistingID != "":
			refused++
		default:
			t.Errorf("subscribe %d: unexpected error %v", i, err)
		}
	}
	if won != 1 || refused != n-1 {
		t.Fatalf("%d concurrent subscribes: %d won, %d refused naming the winner; want 1 and %d", n, won, refused, n-1)
	}
	active, err := s.ListSubscriptions(context.Background(), "alice", store.ListFilter{Status: store.StatusActive, Now: day})
	if err != nil || len(active) != 1 {
		t.Fatalf("active subscriptions after the race = %v, %v; want exactly one", ids(active), err)
	}
}

func testCancelImmediately(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	sb := sub("sub_cancel", "plus", "alice", day)
	mustSubscribe(t, s, sb)
	now := day.AddDate(0, 1, 3) // in the second period
	pe := store.Monthly.End(day, 2)
	got, changed, err := s.Cancel(ctx, sb.ID, store.Cancellation{Now: now, Immediate: true, PeriodEnd: pe})
	if err != nil || !changed {
		t.Fatalf("first Cancel = %v, %v; want changed", changed, err)
	}
	want := sb
	want.Status, want.CancelAt, want.CurrentPeriodEnd = store.StatusCancelled, now, pe
	if !same(got, want) {
		t.Fatalf("first Cancel returned %+v; want %+v", got, want)
	}
	for _, c := range []store.Cancellation{
		{Now: now.Add(time.Minute), Immediate: true, PeriodEnd: pe},
		{Now: now.Add(time.Minute), PeriodEnd: pe},
	} {
		got, changed, err = s.Cancel(ctx, sb.ID, c)
		if err != nil || changed || !same(got, want) {
			t.Fatalf("Cancel(%+v) of a cancelled subscription = %+v, %v, %v; want the stored record unchanged", c, got, changed, err)
		}
	}
	if stored := mustGet(t, s, sb.ID); !same(stored, want) {
		t.Fatalf("stored after cancel = %+v; want %+v (kept, not deleted)", stored, want)
	}
}

func testCancelAtPeriodEnd(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	sb := sub("sub_later", "plus", "alice", day)
	mustSubscribe(t, s, sb)
	now, pe := day.Add(48*time.Hour), store.Monthly.End(day, 1)
	got, changed, err := s.Cancel(ctx, sb.ID, store.Cancellation{Now: now, PeriodEnd: pe})
	if err != nil || !changed {
		t.Fatalf("Cancel at period end = %v, %v; want changed", changed, err)
	}
	want := sb
	want.CancelAt = pe
	if !same(got, want) || got.StatusAt(now) != store.StatusActive || got.StatusAt(pe) != store.StatusCancelled {
		t.Fatalf("Cancel at period end returned %+v; want %+v, active until %s", got, want, pe)
	}
	// Again at period end: nothing changes.
	got, changed, err = s.Cancel(ctx, sb.ID, store.Cancellation{Now: now.Add(time.Hour), PeriodEnd: pe})
	if err != nil || changed || !same(got, want) {
		t.Fatalf("second Cancel at period end = %+v, %v, %v; want unchanged", got, changed, err)
	}
	// Immediately, before the scheduled end: ends it now.
	later := now.Add(2 * time.Hour)
	got, changed, err = s.Cancel(ctx, sb.ID, store.Cancellation{Now: later, Immediate: true, PeriodEnd: pe})
	want.Status, want.CancelAt = store.StatusCancelled, later
	if err != nil || !changed || !same(got, want) {
		t.Fatalf("immediate Cancel of a scheduled end = %+v, %v, %v; want %+v", got, changed, err, want)
	}
	// After a scheduled end has passed, an immediate cancel changes nothing.
	mustSubscribe(t, s, sub("sub_lapsing", "plus", "bob", day))
	if _, _, err := s.Cancel(ctx, "sub_lapsing", store.Cancellation{Now: now, PeriodEnd: pe}); err != nil {
		t.Fatal(err)
	}
	got, changed, err = s.Cancel(ctx, "sub_lapsing", store.Cancellation{Now: pe.Add(time.Hour), Immediate: true, PeriodEnd: store.Monthly.End(day, 2)})
	if err != nil || changed || !got.CancelAt.Equal(pe) || got.StatusAt(pe.Add(time.Hour)) != store.StatusCancelled {
		t.Fatalf("immediate Cancel after the scheduled end = %+v, %v, %v; want it ended at %s, unchanged", got, changed, err, pe)
	}
}

func testCancelErrors(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	mustSubscribe(t, s, sub("sub_keep", "plus", "alice", day))
	pe := store.Monthly.End(day, 1)
	tests := []struct {
		name string
		id   string
		c    store.Cancellation
		want error
	}{
		{"unknown id", "sub_nosuchthing", store.Cancellation{Now: day, Immediate: true, PeriodEnd: pe}, store.ErrNotFound},
		{"unset time", "sub_keep", store.Cancellation{Immediate: true, PeriodEnd: pe}, store.ErrInvalid},
		{"period end not after now", "sub_keep", store.Cancellation{Now: pe, PeriodEnd: pe}, store.ErrInvalid},
		{"no period end", "sub_keep", store.Cancellation{Now: day, Immediate: true}, store.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.Cancel(context.Background(), tc.id, tc.c); !errors.Is(err, tc.want) {
				t.Fatalf("Cancel error = %v; want %v", err, tc.want)
			}
		})
	}
	if got := mustGet(t, s, "sub_keep"); got.Status != store.StatusActive || !got.CancelAt.IsZero() {
		t.Fatalf("failed cancels changed sub_keep: %+v", got)
	}
}

func testResubscribeAfterEnd(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	// Ended at once: the plan is free again straight away.
	mustSubscribe(t, s, sub("sub_old", "plus", "alice", day))
	if _, _, err := s.Cancel(ctx, "sub_old", store.Cancellation{Now: day.Add(time.Hour), Immediate: true, PeriodEnd: store.Monthly.End(day, 1)}); err != nil {
		t.Fatal(err)
	}
	mustSubscribe(t, s, sub("sub_new", "plus", "alice", day.Add(2*time.Hour)))
	// Ended at its period end: free once that has come, and the subscribe
	// closes the lapsed row so the record says so too.
	pe := store.Monthly.End(day.Add(2*time.Hour), 1)
	if _, _, err := s.Cancel(ctx, "sub_new", store.Cancellation{Now: day.Add(3 * time.Hour), PeriodEnd: pe}); err != nil {
		t.Fatal(err)
	}
	mustSubscribe(t, s, sub("sub_newer", "plus", "alice", pe))
	for id, want := range map[string]store.Status{"sub_old": store.StatusCancelled, "sub_new": store.StatusCancelled, "sub_newer": store.StatusActive} {
		if got := mustGet(t, s, id); got.Status != want {
			t.Errorf("%s stored as %s; want %s", id, got.Status, want)
		}
	}
	if got := mustGet(t, s, "sub_new"); !got.CancelAt.Equal(pe) {
		t.Errorf("closing the lapsed sub_new moved its cancel_at to %s; want %s", got.CancelAt, pe)
	}
}

func testConcurrentCancels(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("plus", store.Monthly))
	pe := store.Monthly.End(day, 1)
	for _, immediate := range []bool{true, false} {
		t.Run(fmt.Sprintf("immediate=%v", immediate), func(t *testing.T) {
			id := fmt.Sprintf("sub_contested_%v", immediate)
			mustSubscribe(t, s, sub(id, "plus", "user-"+id, day))
			const n = 20
			type result struct {
				sub     store.Subscription
				changed bool
				err     error
			}
			results := make([]result, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					sb, changed, err := s.Cancel(context.Background(), id, store.Cancellation{Now: day.Add(time.Hour), Immediate: immediate, PeriodEnd: pe})
					results[i] = result{sb, changed, err}
				}()
			}
			close(start)
			wg.Wait()
			var changed int
			for i, r := range results {
				if r.err != nil {
					t.Fatalf("cancel %d: %v", i, r.err)
				}
				if r.changed {
					changed++
				}
				if r.sub.CancelAt.IsZero() || (r.sub.Status == store.StatusCancelled) != immediate {
					t.Fatalf("cancel %d returned %+v", i, r.sub)
				}
			}
			if changed != 1 {
				t.Fatalf("%d concurrent cancels: %d report a change; want exactly 1", n, changed)
			}
		})
	}
}

func testListSubscriptions(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, p := range []string{"a", "b", "c", "d"} {
		mustCreatePlan(t, s, plan("plan-"+p, store.Monthly))
	}
	mustSubscribe(t, s, sub("sub_3", "plan-c", "alice", day.Add(3*time.Hour)))
	mustSubscribe(t, s, sub("sub_1", "plan-a", "alice", day.Add(1*time.Hour)))
	mustSubscribe(t, s, sub("sub_2", "plan-b", "alice", day.Add(2*time.Hour)))
	mustSubscribe(t, s, sub("sub_4", "plan-d", "alice", day.Add(4*time.Hour)))
	mustSubscribe(t, s, sub("sub_bob", "plan-a", "bob", day))
	now := day.Add(5 * time.Hour)
	if _, _, err := s.Cancel(ctx, "sub_2", store.Cancellation{Now: now, Immediate: true, PeriodEnd: store.Monthly.End(day, 1)}); err != nil {
		t.Fatal(err)
	}
	// sub_3 ends at its period end: active before it, cancelled after.
	pe3 := store.Monthly.End(day.Add(3*time.Hour), 1)
	if _, _, err := s.Cancel(ctx, "sub_3", store.Cancellation{Now: now, PeriodEnd: pe3}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		user string
		f    store.ListFilter
		want []string
	}{
		{"all, by start", "alice", store.ListFilter{}, []string{"sub_1", "sub_2", "sub_3", "sub_4"}},
		{"active now", "alice", store.ListFilter{Status: store.StatusActive, Now: now}, []string{"sub_1", "sub_3", "sub_4"}},
		{"cancelled now", "alice", store.ListFilter{Status: store.StatusCancelled, Now: now}, []string{"sub_2"}},
		{"active after sub_3 ended", "alice", store.ListFilter{Status: store.StatusActive, Now: pe3}, []string{"sub_1", "sub_4"}},
		{"cancelled after sub_3 ended", "alice", store.ListFilter{Status: store.StatusCancelled, Now: pe3}, []string{"sub_2", "sub_3"}},
		{"another user", "bob", store.ListFilter{}, []string{"sub_bob"}},
		{"nobody", "carol", store.ListFilter{}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListSubscriptions(ctx, tc.user, tc.f)
			if err != nil || fmt.Sprint(ids(got)) != fmt.Sprint(tc.want) {
				t.Fatalf("ListSubscriptions = %v, %v; want %v", ids(got), err, tc.want)
			}
		})
	}
}

func testListInvalidFilter(t *testing.T, s store.Store) {
	for _, f := range []store.ListFilter{{Status: "paused", Now: day}, {Status: store.StatusActive}} {
		if _, err := s.ListSubscriptions(context.Background(), "alice", f); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ListSubscriptions(%+v) error = %v; want ErrInvalid", f, err)
		}
	}
}

func seedData() ([]store.Plan, []store.Subscription) {
	return []store.Plan{plan("basic", store.Monthly), plan("pro", store.Yearly)},
		[]store.Subscription{sub("sub_seed_alice", "basic", "alice", day), sub("sub_seed_bob", "pro", "bob", day)}
}

func testSeedOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	plans, subs := seedData()
	applied, err := s.Seed(ctx, "demo", day, plans, subs)
	if err != nil || !applied {
		t.Fatalf("first Seed = %v, %v; want applied", applied, err)
	}
	got, err := s.Plans(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("Plans after seed = %v, %v", got, err)
	}
	mustGet(t, s, "sub_seed_alice")
	mustGet(t, s, "sub_seed_bob")
	applied, err = s.Seed(ctx, "demo", day, []store.Plan{plan("extra", store.Monthly)}, nil)
	if err != nil || applied {
		t.Fatalf("second Seed = %v, %v; want not applied", applied, err)
	}
	if _, err := s.Plan(ctx, "extra"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second seed wrote a plan: %v", err)
	}
	if _, err := s.Seed(ctx, "", day, nil, nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Seed with no name error = %v; want ErrInvalid", err)
	}
}

func testSeedSkipsNonEmpty(t *testing.T, s store.Store) {
	mustCreatePlan(t, s, plan("mine", store.Monthly))
	plans, subs := seedData()
	applied, err := s.Seed(context.Background(), "demo", day, plans, subs)
	if err != nil || applied {
		t.Fatalf("Seed over existing plans = %v, %v; want skipped", applied, err)
	}
	if got, _ := s.Plans(context.Background()); len(got) != 1 {
		t.Fatalf("plans = %+v; want only the operator's", got)
	}
}

func testSeedFailureWritesNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	plans, subs := seedData()
	subs = append(subs, sub("sub_bad", "gold", "carol", day)) // no such plan
	if applied, err := s.Seed(ctx, "demo", day, plans, subs); err == nil || applied {
		t.Fatalf("failing Seed = %v, %v; want an error", applied, err)
	}
	if got, err := s.Plans(ctx); err != nil || len(got) != 0 {
		t.Fatalf("failed seed left plans %+v, %v", got, err)
	}
	// Not marked as applied either: a fixed seed still runs.
	plans, subs = seedData()
	if applied, err := s.Seed(ctx, "demo", day, plans, subs); err != nil || !applied {
		t.Fatalf("Seed after a failed one = %v, %v; want applied", applied, err)
	}
}
