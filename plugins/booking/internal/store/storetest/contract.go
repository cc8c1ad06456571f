package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
)

// RunContract runs the store contract, its tests in parallel. newStore must
// return an empty, migrated store on its own database (a fresh file, a fresh
// PostgreSQL schema); RunContract closes it.
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
		{"ResourcesRoundTrip", testResourcesRoundTrip},
		{"ResourceNotFound", testResourceNotFound},
		{"CreateResourceDuplicate", testCreateResourceDuplicate},
		{"CreateResourceInvalid", testCreateResourceInvalid},
		{"BookingRoundTrip", testBookingRoundTrip},
		{"BookingNotFound", testBookingNotFound},
		{"CreateBookingUnknownResource", testCreateBookingUnknownResource},
		{"CreateBookingSlotTaken", testCreateBookingSlotTaken},
		{"CreateBookingDuplicateID", testCreateBookingDuplicateID},
		{"CreateBookingInvalid", testCreateBookingInvalid},
		{"ConcurrentCreatesOneWins", testConcurrentCreates},
		{"CancelBooking", testCancelBooking},
		{"CancelBookingErrors", testCancelBookingErrors},
		{"CancelFreesSlot", testCancelFreesSlot},
		{"ConcurrentCancelsOneWins", testConcurrentCancels},
		{"ListBookings", testListBookings},
		{"ListBookingsInvalidFilter", testListBookingsInvalidFilter},
		{"ActiveBookings", testActiveBookings},
		{"SeedOnce", testSeedOnce},
		{"SeedSkipsNonEmpty", testSeedSkipsNonEmpty},
		{"SeedFailureWritesNothing", testSeedFailureWritesNothing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each test has its own database, so they may run side by side.
			t.Parallel()
			tc.run(t, open(t))
		})
	}
}

// day is a fixed Monday far from any real clock, so results never depend on
// when the suite runs.
var day = time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)

func at(h, m int) time.Time {
	return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

func room(id string) store.Resource {
	return store.Resource{
		ID: id, Name: "Room " + id, Kind: "room", Description: "A quiet room.", Location: "Floor 2",
		Capacity: 6, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	}
}

func booking(id, resource, user string, start time.Time) store.Booking {
	return store.Booking{
		ID: id, ResourceID: resource, UserID: user,
		Start: start, End: start.Add(time.Hour),
		Status: store.StatusActive, CreatedAt: day.Add(-24 * time.Hour),
	}
}

func mustCreateResource(t *testing.T, s store.Store, r store.Resource) {
	t.Helper()
	if err := s.CreateResource(context.Background(), r); err != nil {
		t.Fatalf("CreateResource(%s): %v", r.ID, err)
	}
}

func mustCreateBooking(t *testing.T, s store.Store, b store.Booking) {
	t.Helper()
	if err := s.CreateBooking(context.Background(), b); err != nil {
		t.Fatalf("CreateBooking(%s): %v", b.ID, err)
	}
}

func ids(bs []store.Booking) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

func sameBooking(a, b store.Booking) bool {
	return a.ID == b.ID && a.ResourceID == b.ResourceID && a.UserID == b.UserID &&
		a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.Status == b.Status &&
		a.CreatedAt.Equal(b.CreatedAt) && a.CancelledAt.Equal(b.CancelledAt)
}

func testResourcesRoundTrip(t *testing.T, s store.Store) {
	ctx := context.Background()
	got, err := s.Resources(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("Resources on empty store = %v, %v; want none", got, err)
	}
	b, a := room("room-b"), room("room-a")
	a.Description, a.Location = "", ""
	mustCreateResource(t, s, b)
	mustCreateResource(t, s, a)
	got, err = s.Resources(ctx)
	if err != nil {
		t.Fatalf("Resources: %v", err)
	}
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Resources = %+v; want [%+v %+v] ordered by id", got, a, b)
	}
	one, err := s.Resource(ctx, "room-b")
	if err != nil || one != b {
		t.Fatalf("Resource(room-b) = %+v, %v; want %+v", one, err, b)
	}
}

func testResourceNotFound(t *testing.T, s store.Store) {
	_, err := s.Resource(context.Background(), "room-nowhere")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Resource(unknown) error = %v; want ErrNotFound", err)
	}
}

func testCreateResourceDuplicate(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	other := room("room-a")
	other.Name = "Impostor"
	if err := s.CreateResource(context.Background(), other); !errors.Is(err, store.ErrDuplicateID) {
		t.Fatalf("duplicate CreateResource error = %v; want ErrDuplicateID", err)
	}
	got, err := s.Resource(context.Background(), "room-a")
	if err != nil || got.Name != "Room room-a" {
		t.Fatalf("original resource changed: %+v, %v", got, err)
	}
}

func testCreateResourceInvalid(t *testing.T, s store.Store) {
	tests := []struct {
		name   string
		mutate func(r *store.Resource)
	}{
		{"empty id", func(r *store.Resource) { r.ID = "" }},
		{"upper-case id", func(r *store.Resource) { r.ID = "Room-A" }},
		{"id with space", func(r *store.Resource) { r.ID = "room a" }},
		{"empty name", func(r *store.Resource) { r.Name = "" }},
		{"empty kind", func(r *store.Resource) { r.Kind = "" }},
		{"zero capacity", func(r *store.Resource) { r.Capacity = 0 }},
		{"tiny slot", func(r *store.Resource) { r.SlotMinutes = 1 }},
		{"slot over a day", func(r *store.Resource) { r.SlotMinutes = 1441 }},
		{"opens before midnight", func(r *store.Resource) { r.OpensMinute = -10 }},
		{"closes after midnight", func(r *store.Resource) { r.ClosesMinute = 1500 }},
		{"closes before opening", func(r *store.Resource) { r.OpensMinute, r.ClosesMinute = 600, 540 }},
		{"no room for a slot", func(r *store.Resource) { r.OpensMinute, r.ClosesMinute = 600, 630 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := room("room-x")
			tc.mutate(&r)
			if err := s.CreateResource(context.Background(), r); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("CreateResource(%+v) error = %v; want ErrInvalid", r, err)
			}
		})
	}
	got, err := s.Resources(context.Background())
	if err != nil || len(got) != 0 {
		t.Fatalf("after invalid creates Resources = %+v, %v; want none stored", got, err)
	}
}

func testBookingRoundTrip(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	// A non-UTC zone on the way in must come back as the same instant.
	b := booking("bk_roundtrip0001", "room-a", "alice", at(10, 0).In(time.FixedZone("CET", 3600)))
	mustCreateBooking(t, s, b)
	got, err := s.Booking(context.Background(), b.ID)
	if err != nil {
		t.Fatalf("Booking: %v", err)
	}
	if !sameBooking(got, b) {
		t.Fatalf("Booking = %+v; want %+v", got, b)
	}
	if got.Start.Location() != time.UTC || !got.CancelledAt.IsZero() {
		t.Fatalf("Booking start zone %v, cancelled_at %v; want UTC and unset", got.Start.Location(), got.CancelledAt)
	}
}

func testBookingNotFound(t *testing.T, s store.Store) {
	if _, err := s.Booking(context.Background(), "bk_nosuchbooking"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Booking(unknown) error = %v; want ErrNotFound", err)
	}
}

func testCreateBookingUnknownResource(t *testing.T, s store.Store) {
	err := s.CreateBooking(context.Background(), booking("bk_orphan", "room-nowhere", "alice", at(10, 0)))
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CreateBooking(unknown resource) error = %v; want ErrNotFound", err)
	}
	if _, err := s.Booking(context.Background(), "bk_orphan"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("orphan booking was stored: %v", err)
	}
}

func testCreateBookingSlotTaken(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	mustCreateResource(t, s, room("room-b"))
	mustCreateBooking(t, s, booking("bk_first", "room-a", "alice", at(10, 0)))
	err := s.CreateBooking(context.Background(), booking("bk_second", "room-a", "bob", at(10, 0)))
	if !errors.Is(err, store.ErrSlotTaken) {
		t.Fatalf("CreateBooking(taken slot) error = %v; want ErrSlotTaken", err)
	}
	if _, err := s.Booking(context.Background(), "bk_second"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("losing booking was stored: %v", err)
	}
	// The same start on another resource and the next slot are free.
	mustCreateBooking(t, s, booking("bk_other_room", "room-b", "bob", at(10, 0)))
	mustCreateBooking(t, s, booking("bk_next_slot", "room-a", "bob", at(11, 0)))
}

func testCreateBookingDuplicateID(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	mustCreateBooking(t, s, booking("bk_same", "room-a", "alice", at(10, 0)))
	err := s.CreateBooking(context.Background(), booking("bk_same", "room-a", "bob", at(12, 0)))
	if !errors.Is(err, store.ErrDuplicateID) {
		t.Fatalf("CreateBooking(duplicate id) error = %v; want ErrDuplicateID", err)
	}
	got, err := s.Booking(context.Background(), "bk_same")
	if err != nil || got.UserID != "alice" {
		t.Fatalf("original booking changed: %+v, %v", got, err)
	}
}

func testCreateBookingInvalid(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	tests := []struct {
		name   string
		mutate func(b *store.Booking)
	}{
		{"empty id", func(b *store.Booking) { b.ID = "" }},
		{"empty resource", func(b *store.Booking) { b.ResourceID = "" }},
		{"empty user", func(b *store.Booking) { b.UserID = "" }},
		{"zero start", func(b *store.Booking) { b.Start = time.Time{} }},
		{"end before start", func(b *store.Booking) { b.End = b.Start.Add(-time.Hour) }},
		{"end equals start", func(b *store.Booking) { b.End = b.Start }},
		{"born cancelled", func(b *store.Booking) { b.Status = store.StatusCancelled }},
		{"unknown status", func(b *store.Booking) { b.Status = "pending" }},
		{"no created_at", func(b *store.Booking) { b.CreatedAt = time.Time{} }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := booking(fmt.Sprintf("bk_invalid%02d", i), "room-a", "alice", at(10, 0))
			tc.mutate(&b)
			if err := s.CreateBooking(context.Background(), b); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("CreateBooking(%+v) error = %v; want ErrInvalid", b, err)
			}
		})
	}
	got, err := s.ActiveBookings(context.Background(), "room-a", day, day.Add(24*time.Hour))
	if err != nil || len(got) != 0 {
		t.Fatalf("after invalid creates ActiveBookings = %v, %v; want none stored", ids(got), err)
	}
}

// testConcurrentCreates races creates for one slot on real connections: the
// database, not the caller, must pick exactly one winner.
func testConcurrentCreates(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.CreateBooking(context.Background(), booking(fmt.Sprintf("bk_race%02d", i), "room-a", fmt.Sprintf("user%02d", i), at(10, 0)))
		}()
	}
	close(start)
	wg.Wait()
	var won, taken int
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, store.ErrSlotTaken):
			taken++
		default:
			t.Errorf("create %d: unexpected error %v", i, err)
		}
	}
	if won != 1 || taken != n-1 {
		t.Fatalf("%d concurrent creates: %d won, %d saw the slot taken; want 1 and %d", n, won, taken, n-1)
	}
	active, err := s.ActiveBookings(context.Background(), "room-a", day, day.Add(24*time.Hour))
	if err != nil || len(active) != 1 {
		t.Fatalf("active bookings after the race = %v, %v; want exactly one", ids(active), err)
	}
}

func testCancelBooking(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateResource(t, s, room("room-a"))
	b := booking("bk_cancel", "room-a", "alice", at(10, 0))
	mustCreateBooking(t, s, b)
	first := day.Add(-time.Hour)
	got, cancelled, err := s.CancelBooking(ctx, b.ID, first)
	if err != nil || !cancelled {
		t.Fatalf("first CancelBooking = %v, %v; want cancelled", cancelled, err)
	}
	want := b
	want.Status, want.CancelledAt = store.StatusCancelled, first
	if !sameBooking(got, want) {
		t.Fatalf("first CancelBooking returned %+v; want %+v", got, want)
	}
	got, cancelled, err = s.CancelBooking(ctx, b.ID, first.Add(time.Minute))
	if err != nil || cancelled {
		t.Fatalf("second CancelBooking = %v, %v; want already cancelled, no error", cancelled, err)
	}
	if !sameBooking(got, want) {
		t.Fatalf("second CancelBooking changed the record: %+v; want %+v", got, want)
	}
	stored, err := s.Booking(ctx, b.ID)
	if err != nil || !sameBooking(stored, want) {
		t.Fatalf("stored after cancel = %+v, %v; want %+v (kept, not deleted)", stored, err, want)
	}
}

func testCancelBookingErrors(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	mustCreateBooking(t, s, booking("bk_keep", "room-a", "alice", at(10, 0)))
	tests := []struct {
		name string
		id   string
		at   time.Time
		want error
	}{
		{"unknown id", "bk_nosuchbooking", day, store.ErrNotFound},
		{"unset time", "bk_keep", time.Time{}, store.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.CancelBooking(context.Background(), tc.id, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CancelBooking error = %v; want %v", err, tc.want)
			}
		})
	}
	b, err := s.Booking(context.Background(), "bk_keep")
	if err != nil || b.Status != store.StatusActive {
		t.Fatalf("failed cancels changed bk_keep: %+v, %v", b, err)
	}
}

func testCancelFreesSlot(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateResource(t, s, room("room-a"))
	mustCreateBooking(t, s, booking("bk_old", "room-a", "alice", at(10, 0)))
	if _, _, err := s.CancelBooking(ctx, "bk_old", day); err != nil {
		t.Fatalf("CancelBooking: %v", err)
	}
	mustCreateBooking(t, s, booking("bk_new", "room-a", "bob", at(10, 0)))
	// Several cancelled bookings of one slot coexist; only active ones are unique.
	if _, _, err := s.CancelBooking(ctx, "bk_new", day); err != nil {
		t.Fatalf("CancelBooking: %v", err)
	}
	mustCreateBooking(t, s, booking("bk_newer", "room-a", "carol", at(10, 0)))
	old, err := s.Booking(ctx, "bk_old")
	if err != nil || old.Status != store.StatusCancelled {
		t.Fatalf("cancelled booking not kept: %+v, %v", old, err)
	}
}

func testConcurrentCancels(t *testing.T, s store.Store) {
	mustCreateResource(t, s, room("room-a"))
	mustCreateBooking(t, s, booking("bk_contested", "room-a", "alice", at(10, 0)))
	const n = 20
	type result struct {
		b         store.Booking
		cancelled bool
		err       error
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			b, c, err := s.CancelBooking(context.Background(), "bk_contested", day.Add(time.Duration(i)*time.Second))
			res[i] = result{b, c, err}
		}()
	}
	close(start)
	wg.Wait()
	var winners int
	var when time.Time
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("cancel %d: %v", i, r.err)
		}
		if r.cancelled {
			winners++
			when = r.b.CancelledAt
		}
	}
	if winners != 1 {
		t.Fatalf("%d concurrent cancels: %d reported cancelling; want exactly 1", n, winners)
	}
	for i, r := range res {
		if r.b.Status != store.StatusCancelled || !r.b.CancelledAt.Equal(when) {
			t.Fatalf("cancel %d saw %s at %v; want cancelled at the winner's %v", i, r.b.Status, r.b.CancelledAt, when)
		}
	}
}

func testListBookings(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateResource(t, s, room("room-a"))
	mustCreateResource(t, s, room("room-b"))
	mustCreateBooking(t, s, booking("bk_a3", "room-a", "alice", at(15, 0)))
	mustCreateBooking(t, s, booking("bk_a1", "room-a", "alice", at(9, 0)))
	mustCreateBooking(t, s, booking("bk_a2", "room-b", "alice", at(12, 0)))
	mustCreateBooking(t, s, booking("bk_b1", "room-b", "bob", at(9, 0)))
	if _, _, err := s.CancelBooking(ctx, "bk_a2", day); err != nil {
		t.Fatalf("CancelBooking: %v", err)
	}
	tests := []struct {
		name   string
		user   string
		filter store.ListFilter
		want   []string
	}{
		{"all of alice by start", "alice", store.ListFilter{}, []string{"bk_a1", "bk_a2", "bk_a3"}},
		{"active only", "alice", store.ListFilter{Status: store.StatusActive}, []string{"bk_a1", "bk_a3"}},
		{"cancelled only", "alice", store.ListFilter{Status: store.StatusCancelled}, []string{"bk_a2"}},
		{"limit", "alice", store.ListFilter{Limit: 2}, []string{"bk_a1", "bk_a2"}},
		{"status and limit", "alice", store.ListFilter{Status: store.StatusActive, Limit: 1}, []string{"bk_a1"}},
		{"another user", "bob", store.ListFilter{}, []string{"bk_b1"}},
		{"user with none", "carol", store.ListFilter{}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ListBookings(ctx, tc.user, tc.filter)
			if err != nil {
				t.Fatalf("ListBookings: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("ListBookings(%s, %+v) = %v; want %v", tc.user, tc.filter, ids(got), tc.want)
			}
			for _, b := range got {
				if b.UserID != tc.user {
					t.Fatalf("ListBookings(%s) returned %s of %s", tc.user, b.ID, b.UserID)
				}
			}
		})
	}
}

func testListBookingsInvalidFilter(t *testing.T, s store.Store) {
	tests := []struct {
		name   string
		filter store.ListFilter
	}{
		{"unknown status", store.ListFilter{Status: "pending"}},
		{"negative limit", store.ListFilter{Limit: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.ListBookings(context.Background(), "alice", tc.filter); !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("ListBookings(%+v) error = %v; want ErrInvalid", tc.filter, err)
			}
		})
	}
}

func testActiveBookings(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateResource(t, s, room("room-a"))
	mustCreateResource(t, s, room("room-b"))
	mustCreateBooking(t, s, booking("bk_8", "room-a", "alice", at(8, 0)))
	mustCreateBooking(t, s, booking("bk_10", "room-a", "bob", at(10, 0)))
	mustCreateBooking(t, s, booking("bk_12", "room-a", "bob", at(12, 0)))
	mustCreateBooking(t, s, booking("bk_gone", "room-a", "bob", at(11, 0)))
	mustCreateBooking(t, s, booking("bk_elsewhere", "room-b", "bob", at(10, 0)))
	mustCreateBooking(t, s, booking("bk_tomorrow", "room-a", "bob", at(24+10, 0)))
	if _, _, err := s.CancelBooking(ctx, "bk_gone", day); err != nil {
		t.Fatalf("CancelBooking: %v", err)
	}
	tests := []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"whole day", day, day.Add(24 * time.Hour), []string{"bk_8", "bk_10", "bk_12"}},
		{"from is inclusive, to exclusive", at(10, 0), at(12, 0), []string{"bk_10"}},
		{"two days", day, day.Add(48 * time.Hour), []string{"bk_8", "bk_10", "bk_12", "bk_tomorrow"}},
		{"empty range", at(13, 0), at(13, 0), []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ActiveBookings(ctx, "room-a", tc.from, tc.to)
			if err != nil {
				t.Fatalf("ActiveBookings: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Fatalf("ActiveBookings(%v, %v) = %v; want %v", tc.from, tc.to, ids(got), tc.want)
			}
		})
	}
}

func seedData() ([]store.Resource, []store.Booking) {
	return []store.Resource{room("room-a"), room("room-b")},
		[]store.Booking{booking("bk_seed1", "room-a", "alice", at(10, 0)), booking("bk_seed2", "room-b", "bob", at(14, 0))}
}

func testSeedOnce(t *testing.T, s store.Store) {
	ctx := context.Background()
	rs, bs := seedData()
	applied, err := s.Seed(ctx, "demo", day, rs, bs)
	if err != nil || !applied {
		t.Fatalf("first Seed = %v, %v; want applied", applied, err)
	}
	got, err := s.Resources(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("Resources after seed = %+v, %v; want 2", got, err)
	}
	if b, err := s.Booking(ctx, "bk_seed2"); err != nil || b.UserID != "bob" {
		t.Fatalf("seeded booking = %+v, %v", b, err)
	}
	// Even after everything seeded is cancelled, the seed does not come back.
	for _, b := range bs {
		if _, _, err := s.CancelBooking(ctx, b.ID, day); err != nil {
			t.Fatalf("CancelBooking: %v", err)
		}
	}
	applied, err = s.Seed(ctx, "demo", day, rs, []store.Booking{booking("bk_seed3", "room-a", "alice", at(16, 0))})
	if err != nil || applied {
		t.Fatalf("second Seed = %v, %v; want nothing applied, no error", applied, err)
	}
	if _, err := s.Booking(ctx, "bk_seed3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second seed wrote a booking: %v", err)
	}
}

func testSeedSkipsNonEmpty(t *testing.T, s store.Store) {
	ctx := context.Background()
	mustCreateResource(t, s, room("room-mine"))
	rs, bs := seedData()
	applied, err := s.Seed(ctx, "demo", day, rs, bs)
	if err != nil || applied {
		t.Fatalf("Seed on a store with data = %v, %v; want skipped", applied, err)
	}
	got, err := s.Resources(ctx)
	if err != nil || len(got) != 1 || got[0].ID != "room-mine" {
		t.Fatalf("Resources = %+v, %v; want only room-mine", got, err)
	}
}

func testSeedFailureWritesNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	tests := []struct {
		name      string
		seed      string
		resources []store.Resource
		bookings  []store.Booking
		want      error
	}{
		{"empty name", "", []store.Resource{room("room-a")}, nil, store.ErrInvalid},
		{"invalid resource", "demo", []store.Resource{room("room-a"), {ID: "Bad Id"}}, nil, store.ErrInvalid},
		{"duplicate resource", "demo", []store.Resource{room("room-a"), room("room-a")}, nil, store.ErrDuplicateID},
		{"booking of unknown resource", "demo", []store.Resource{room("room-a")},
			[]store.Booking{booking("bk_ok", "room-a", "alice", at(10, 0)), booking("bk_orphan", "room-x", "bob", at(10, 0))}, store.ErrNotFound},
		{"two bookings of one slot", "demo", []store.Resource{room("room-a")},
			[]store.Booking{booking("bk_one", "room-a", "alice", at(10, 0)), booking("bk_two", "room-a", "bob", at(10, 0))}, store.ErrSlotTaken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			applied, err := s.Seed(ctx, tc.seed, day, tc.resources, tc.bookings)
			if applied || !errors.Is(err, tc.want) {
				t.Fatalf("Seed = %v, %v; want not applied and %v", applied, err, tc.want)
			}
			rs, err := s.Resources(ctx)
			if err != nil || len(rs) != 0 {
				t.Fatalf("failed seed left resources %+v, %v", rs, err)
			}
			if _, err := s.Booking(ctx, "bk_ok"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("failed seed left a booking: %v", err)
			}
		})
	}
	// The failures recorded nothing, so a good seed still applies.
	rs, bs := seedData()
	if applied, err := s.Seed(ctx, "demo", day, rs, bs); err != nil || !applied {
		t.Fatalf("Seed after failures = %v, %v; want applied", applied, err)
	}
}
