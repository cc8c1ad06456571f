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

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/postgres"
	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
	"github.com/capgate/capgate/plugins/booking/internal/store/storetest"
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

var raceDay = time.Date(2030, 1, 7, 10, 0, 0, 0, time.UTC)

func raceBooking(id string) store.Booking {
	return store.Booking{
		ID: id, ResourceID: "room-a", UserID: "user-" + id, Start: raceDay, End: raceDay.Add(time.Hour),
		Status: store.StatusActive, CreatedAt: raceDay.Add(-time.Hour),
	}
}

var roomA = store.Resource{ID: "room-a", Name: "Room A", Kind: "room", Capacity: 4, SlotMinutes: 60, OpensMinute: 480, ClosesMinute: 1200}

// TestReplicasRace: two stores, each with its own pool, stand for two
// replicas of the plugin on one database. They open (and so migrate) at the
// same time, seed at the same time, then race creates for one slot and
// cancels of one booking; PostgreSQL alone picks each winner.
func TestReplicasRace(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	var replicas [2]*postgres.Store
	var openErrs [2]error
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i], openErrs[i] = postgres.Open(context.Background(), dsn, nil)
		}()
	}
	wg.Wait()
	for i, err := range openErrs {
		if err != nil {
			t.Fatalf("replica %d: Open: %v", i, err)
		}
		t.Cleanup(func() { replicas[i].Close() })
	}

	// Seed from both at once: applied by exactly one.
	var applied [2]bool
	var seedErrs [2]error
	for i, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], seedErrs[i] = r.Seed(context.Background(), "demo", raceDay, []store.Resource{roomA}, nil)
		}()
	}
	wg.Wait()
	if seedErrs[0] != nil || seedErrs[1] != nil || applied[0] == applied[1] {
		t.Fatalf("seeds from two replicas = %v %v, %v %v; want exactly one applied and no error", applied[0], seedErrs[0], applied[1], seedErrs[1])
	}

	const n = 20
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = replicas[i%2].CreateBooking(context.Background(), raceBooking(fmt.Sprintf("bk_replica%02d", i)))
		}()
	}
	close(start)
	wg.Wait()
	var winner string
	var won, taken int
	for i, err := range errs {
		switch {
		case err == nil:
			won++
			winner = fmt.Sprintf("bk_replica%02d", i)
		case errors.Is(err, store.ErrSlotTaken):
			taken++
		default:
			t.Errorf("create %d: %v", i, err)
		}
	}
	if won != 1 || taken != n-1 {
		t.Fatalf("%d creates over 2 replicas: %d won, %d taken; want 1 and %d", n, won, taken, n-1)
	}

	cancelled := make([]bool, n)
	start = make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, cancelled[i], errs[i] = replicas[i%2].CancelBooking(context.Background(), winner, raceDay.Add(-time.Duration(i)*time.Minute))
		}()
	}
	close(start)
	wg.Wait()
	var cancels int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("cancel %d: %v", i, errs[i])
		}
		if cancelled[i] {
			cancels++
		}
	}
	if cancels != 1 {
		t.Fatalf("%d cancels over 2 replicas: %d reported cancelling; want exactly 1", n, cancels)
	}
}

// TestSameResultsAsSQLite runs one sequence of calls on both stores and
// compares every answer: sub-second times, time zones and id order must
// come out the same.
func TestSameResultsAsSQLite(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "booking.db"), nil)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { lite.Close() })
	pg := openAt(t, pgtest.SchemaDSN(t))
	paris := time.FixedZone("Paris", 3600)
	day := time.Date(2030, 1, 7, 9, 0, 0, 0, paris)
	type answer struct {
		resources []store.Resource
		list      []store.Booking
		active    []store.Booking
		cancelled store.Booking
		got       store.Booking
	}
	run := func(s store.Store) answer {
		t.Helper()
		// Ids whose byte order differs from a locale's order.
		for _, id := range []string{"room-b", "room1", "room-a", "roomz", "room0"} {
			r := roomA
			r.ID = id
			if err := s.CreateResource(ctx, r); err != nil {
				t.Fatalf("CreateResource(%s): %v", id, err)
			}
		}
		for i, id := range []string{"bk_B", "bk_a", "bk-c", "bk_1"} {
			b := store.Booking{
				ID: id, ResourceID: "room-a", UserID: "alice",
				Start:  day.Add(time.Duration(i%2) * time.Hour).Add(123 * time.Millisecond),
				End:    day.Add(time.Duration(i%2+1) * time.Hour),
				Status: store.StatusActive, CreatedAt: day.Add(-time.Hour).Add(999 * time.Millisecond),
			}
			if i >= 2 {
				b.ResourceID = "room1"
			}
			if err := s.CreateBooking(ctx, b); err != nil {
				t.Fatalf("CreateBooking(%s): %v", id, err)
			}
		}
		var a answer
		var err error
		if a.resources, err = s.Resources(ctx); err != nil {
			t.Fatal(err)
		}
		if a.cancelled, _, err = s.CancelBooking(ctx, "bk_a", day.Add(500*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if a.list, err = s.ListBookings(ctx, "alice", store.ListFilter{}); err != nil {
			t.Fatal(err)
		}
		if a.active, err = s.ActiveBookings(ctx, "room-a", day, day.Add(24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if a.got, err = s.Booking(ctx, "bk-c"); err != nil {
			t.Fatal(err)
		}
		return a
	}
	want, got := run(lite), run(pg)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PostgreSQL answered\n%+v\nSQLite answered\n%+v", got, want)
	}
	if got.got.Start.Location() != time.UTC || got.got.Start.Nanosecond() != 0 {
		t.Fatalf("start = %v; want UTC, whole seconds", got.got.Start)
	}
}
