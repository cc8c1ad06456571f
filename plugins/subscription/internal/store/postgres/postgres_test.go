package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/postgres"
	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/plugins/subscription/internal/store/storetest"
	"github.com/capgate/capgate/sdk/pgtest"
)

func openAt(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.RunContract(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(context.Background(), pgtest.SchemaDSN(t), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

var raceDay = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

var plus = store.Plan{ID: "plus", Name: "Plus", PriceCents: 999, Currency: "EUR", Period: store.Monthly}

func raceSub(id string, started time.Time) store.Subscription {
	return store.Subscription{
		ID: id, PlanID: "plus", UserID: "alice", Period: store.Monthly, Status: store.StatusActive,
		StartedAt: started, CurrentPeriodEnd: store.Monthly.End(started, 1),
	}
}

// TestReplicasRace: two stores, each with its own pool, stand for two
// replicas of the plugin on one database. They open (and so migrate) at the
// same time, seed at the same time, then race subscribes of one user to one
// plan (also when a lapsed subscription must be closed first) and cancels
// of one subscription; PostgreSQL alone picks each winner.
func TestReplicasRace(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.SchemaDSN(t)
	var replicas [2]*postgres.Store
	var openErrs [2]error
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i], openErrs[i] = postgres.Open(ctx, dsn, nil)
		}()
	}
	wg.Wait()
	for i, err := range openErrs {
		if err != nil {
			t.Fatalf("replica %d: Open: %v", i, err)
		}
		t.Cleanup(func() { replicas[i].Close() })
	}

	// Seed from both at once: applied by exactly one, its rows once.
	var applied [2]bool
	var seedErrs [2]error
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], seedErrs[i] = r.Seed(ctx, "demo", raceDay, []store.Plan{plus}, []store.Subscription{raceSub("sub_seeded", raceDay.AddDate(0, 0, -10))})
		}()
	}
	wg.Wait()
	if seedErrs[0] != nil || seedErrs[1] != nil || applied[0] == applied[1] {
		t.Fatalf("seeds from two replicas = %v %v, %v %v; want exactly one applied and no error", applied[0], seedErrs[0], applied[1], seedErrs[1])
	}
	var seeds int
	if err := replicas[0].Pool().QueryRow(ctx, `SELECT COUNT(*) FROM subscription_seeds`).Scan(&seeds); err != nil || seeds != 1 {
		t.Fatalf("seeds rows = %d, %v; want 1", seeds, err)
	}

	const n = 20
	// The seeded subscription ends at its period end; subscribes racing
	// after that must each try to close it, and exactly one wins.
	pe := store.Monthly.End(raceDay.AddDate(0, 0, -10), 1)
	if _, changed, err := replicas[1].Cancel(ctx, "sub_seeded", store.Cancellation{Now: raceDay, PeriodEnd: pe}); err != nil || !changed {
		t.Fatalf("cancel at period end = %v, %v", changed, err)
	}
	subscribeRace := func(round string, started time.Time) string {
		t.Helper()
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = replicas[i%2].Subscribe(ctx, raceSub(fmt.Sprintf("sub_%s%02d", round, i), started))
			}()
		}
		close(start)
		wg.Wait()
		var winner string
		var refused int
		for i, err := range errs {
			var already *store.AlreadySubscribedError
			switch {
			case err == nil:
				if winner != "" {
					t.Fatalf("%s: both %s and subscribe %d won", round, winner, i)
				}
				winner = fmt.Sprintf("sub_%s%02d", round, i)
			case errors.As(err, &already) && already.ExistingID != "":
				refused++
			default:
				t.Fatalf("%s: subscribe %d: %v", round, i, err)
			}
		}
		if winner == "" || refused != n-1 {
			t.Fatalf("%s: %d subscribes over 2 replicas: winner %q, %d refused naming one; want 1 and %d", round, n, winner, refused, n-1)
		}
		return winner
	}
	winner := subscribeRace("lapsed", pe)
	if got, err := replicas[0].Subscription(ctx, "sub_seeded"); err != nil || got.Status != store.StatusCancelled || !got.CancelAt.Equal(pe) {
		t.Fatalf("lapsed seeded subscription = %+v, %v; want closed at %s", got, err, pe)
	}

	for _, immediate := range []bool{false, true} {
		results := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		now := pe.Add(time.Hour)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, results[i], errs[i] = replicas[i%2].Cancel(ctx, winner,
					store.Cancellation{Now: now, Immediate: immediate, PeriodEnd: store.Monthly.End(pe, 1)})
			}()
		}
		close(start)
		wg.Wait()
		var changed int
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("immediate=%v: cancel %d: %v", immediate, i, errs[i])
			}
			if results[i] {
				changed++
			}
		}
		if changed != 1 {
			t.Fatalf("immediate=%v: %d cancels over 2 replicas: %d reported a change; want exactly 1", immediate, n, changed)
		}
	}
	// Cancelled immediately, the plan is free: a new race, one winner again.
	subscribeRace("fresh", pe.Add(2*time.Hour))
}

// TestSameResultsAsSQLite runs one sequence of calls on both stores and
// compares every answer: sub-second times, time zones and id order must
// come out the same.
func TestSameResultsAsSQLite(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "subscription.db"), nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { lite.Close() })
	pg := openAt(t, pgtest.SchemaDSN(t))
	paris := time.FixedZone("Paris", 3600)
	day := time.Date(2030, 1, 31, 9, 0, 0, 0, paris)
	type answer struct {
		plans     []store.Plan
		list      []store.Subscription
		active    []store.Subscription
		cancelled store.Subscription
		got       store.Subscription
	}
	run := func(s store.Store) answer {
		t.Helper()
		// Ids whose byte order differs from a locale's order.
		for _, id := range []string{"plan-b", "plan1", "plan-a", "planz", "plan0"} {
			p := plus
			p.ID = id
			if err := s.CreatePlan(ctx, p); err != nil {
				t.Fatalf("CreatePlan(%s): %v", id, err)
			}
		}
		for i, id := range []string{"sub_B", "sub_a", "sub-c", "sub_1"} {
			started := day.Add(time.Duration(i%2) * time.Hour).Add(123 * time.Millisecond)
			sb := store.Subscription{
				ID: id, PlanID: []string{"plan-b", "plan1", "plan-a", "planz"}[i], UserID: "alice", Period: store.Monthly,
				Status: store.StatusActive, StartedAt: started, CurrentPeriodEnd: store.Monthly.End(started, 1),
			}
			if err := s.Subscribe(ctx, sb); err != nil {
				t.Fatalf("Subscribe(%s): %v", id, err)
			}
		}
		var a answer
		var err error
		if a.plans, err = s.Plans(ctx); err != nil {
			t.Fatal(err)
		}
		if a.cancelled, _, err = s.Cancel(ctx, "sub_a", store.Cancellation{Now: day.Add(500 * time.Millisecond), Immediate: true, PeriodEnd: store.Monthly.End(day, 1)}); err != nil {
			t.Fatal(err)
		}
		if _, _, err = s.Cancel(ctx, "sub_B", store.Cancellation{Now: day.Add(time.Hour), PeriodEnd: store.Monthly.End(day, 1)}); err != nil {
			t.Fatal(err)
		}
		if a.list, err = s.ListSubscriptions(ctx, "alice", store.ListFilter{}); err != nil {
			t.Fatal(err)
		}
		if a.active, err = s.ListSubscriptions(ctx, "alice", store.ListFilter{Status: store.StatusActive, Now: day.AddDate(0, 1, 0)}); err != nil {
			t.Fatal(err)
		}
		if a.got, err = s.Subscription(ctx, "sub-c"); err != nil {
			t.Fatal(err)
		}
		return a
	}
	want, got := run(lite), run(pg)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PostgreSQL answered\n%+v\nSQLite answered\n%+v", got, want)
	}
	if got.got.StartedAt.Location() != time.UTC || got.got.StartedAt.Nanosecond() != 0 {
		t.Fatalf("started_at = %v; want UTC, whole seconds", got.got.StartedAt)
	}
}
