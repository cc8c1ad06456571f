package booking

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
)

var now = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

// newService is a seeded service on a real database file.
func newService(t *testing.T) (*Service, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), DBFile), nil)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	s := NewService(st, func() time.Time { return now }, nil)
	if applied, err := s.Seed(context.Background(), SeedDemo); err != nil || !applied {
		t.Fatalf("Seed = %v, %v", applied, err)
	}
	return s, st
}

// ids yields the given ids in turn, then fresh random ones.
func ids(given ...string) func() string {
	return func() string {
		if len(given) == 0 {
			return newBookingID()
		}
		id := given[0]
		given = given[1:]
		return id
	}
}

var carol = sdk.Call{Principal: sdk.Principal{Role: "customer", Scope: "action", UserID: "carol"}}

func TestCreateRetriesOnIDCollision(t *testing.T) {
	s, st := newService(t)
	taken, err := st.ListBookings(context.Background(), "alice", store.ListFilter{})
	if err != nil || len(taken) == 0 {
		t.Fatalf("ListBookings: %v", err)
	}
	tests := []struct {
		name    string
		ids     []string
		wantErr bool
	}{
		{"one collision, then a fresh id", []string{taken[0].ID}, false},
		{"two collisions, then a fresh id", []string{taken[0].ID, taken[1].ID}, false},
		{"collisions on every attempt", []string{taken[0].ID, taken[1].ID, taken[0].ID}, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.newID = ids(tc.ids...)
			start := fmt.Sprintf("2030-01-09T%02d:00:00Z", 8+i)
			got, err := s.Create(context.Background(), carol, CreateIn{ResourceID: "room-aurora", Start: start})
			if tc.wantErr {
				if err == nil || !errors.Is(err, store.ErrDuplicateID) {
					t.Fatalf("Create = %+v, %v; want a duplicate-id failure", got, err)
				}
				// An internal failure, not something the caller can fix.
				if strings.Contains(err.Error(), "already booked") {
					t.Fatalf("collision reported as a taken slot: %v", err)
				}
				return
			}
			if err != nil || contains(tc.ids, got.ID) || !bookingIDPattern.MatchString(got.ID) {
				t.Fatalf("Create = %+v, %v; want a fresh id", got, err)
			}
		})
	}
	// The exhausted attempt wrote nothing; the others wrote one each.
	mine, err := st.ListBookings(context.Background(), "carol", store.ListFilter{})
	if err != nil || len(mine) != 2 {
		t.Fatalf("carol has %d bookings, %v; want 2", len(mine), err)
	}
	for _, b := range taken {
		if got, err := st.Booking(context.Background(), b.ID); err != nil || got.UserID != "alice" {
			t.Fatalf("colliding id %s now belongs to %+v, %v", b.ID, got, err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestStoreFailures: when the database itself fails, every capability
// reports an error with context, and no tool error that would blame the
// caller's input.
func TestStoreFailures(t *testing.T) {
	s, st := newService(t)
	bs, err := st.ListBookings(context.Background(), "alice", store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	id := bs[0].ID
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := sdk.Call{Principal: sdk.Principal{UserID: "alice"}}
	tests := []struct {
		name string
		call func() error
	}{
		{"resources", func() error { _, err := s.Resources(ctx, alice, ResourcesIn{}); return err }},
		{"availability", func() error {
			_, err := s.Availability(ctx, alice, AvailabilityIn{ResourceID: "room-aurora"})
			return err
		}},
		{"list", func() error { _, err := s.List(ctx, alice, ListIn{}); return err }},
		{"get", func() error { _, err := s.Get(ctx, alice, IDIn{ID: id}); return err }},
		{"owner", func() error { _, err := s.Owner(ctx, alice, IDIn{ID: id}); return err }},
		{"create", func() error {
			_, err := s.Create(ctx, alice, CreateIn{ResourceID: "room-aurora", Start: "2030-01-09T10:00:00Z"})
			return err
		}},
		{"cancel", func() error { _, err := s.Cancel(ctx, alice, IDIn{ID: id}); return err }},
		{"seed", func() error { _, err := s.Seed(ctx, SeedDemo); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil || !strings.Contains(err.Error(), "closed") {
				t.Fatalf("error = %v; want the closed database reported", err)
			}
			for _, blame := range []string{"no booking", "no resource", "is required", "already booked"} {
				if strings.Contains(err.Error(), blame) {
					t.Fatalf("error %q blames the caller", err)
				}
			}
		})
	}
}

func TestSeedUnknownName(t *testing.T) {
	s, _ := newService(t)
	if _, err := s.Seed(context.Background(), "prod"); err == nil || !strings.Contains(err.Error(), `unknown seed "prod"`) {
		t.Fatalf("Seed(prod) error = %v", err)
	}
}

func TestSlots(t *testing.T) {
	r := store.Resource{ID: "r", SlotMinutes: 90, OpensMinute: 9 * 60, ClosesMinute: 18 * 60}
	uneven := store.Resource{ID: "u", SlotMinutes: 250, OpensMinute: 8 * 60, ClosesMinute: 20 * 60}
	allDay := store.Resource{ID: "a", SlotMinutes: 60, OpensMinute: 0, ClosesMinute: 1440}
	d := time.Date(2030, 1, 8, 0, 0, 0, 0, time.UTC)
	at := func(h, m int) time.Time { return d.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute) }
	tests := []struct {
		name  string
		r     store.Resource
		start time.Time
		want  bool
	}{
		{"first slot", r, at(9, 0), true},
		{"second slot", r, at(10, 30), true},
		{"last slot", r, at(16, 30), true},
		{"between", r, at(10, 0), false},
		{"before opening", r, at(7, 30), false},
		{"would end after closing", r, at(18, 0), false},
		{"a second late", r, at(9, 0).Add(time.Second), false},
		{"uneven day: last full slot", uneven, at(12, 10), true},
		{"uneven day: slot past closing", uneven, at(16, 20), false},
		{"open all day: midnight", allDay, at(0, 0), true},
		{"open all day: last hour", allDay, at(23, 0), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := isSlot(tc.r, tc.start); got != tc.want {
				t.Fatalf("isSlot(%s, %s) = %v; want %v", tc.r.ID, tc.start.Format("15:04:05"), got, tc.want)
			}
			if onGrid := contains(fmtTimes(daySlots(tc.r, d)), tc.start.Format(time.RFC3339)); onGrid != tc.want {
				t.Fatalf("daySlots contains %s = %v; want %v", tc.start, onGrid, tc.want)
			}
		})
	}
	if got := slotRule(allDay); !strings.Contains(got, "from 00:00 to 23:00") || !strings.Contains(got, "ends at 24:00") {
		t.Fatalf("slotRule(all day) = %q", got)
	}
}

func fmtTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Format(time.RFC3339)
	}
	return out
}

func TestShortQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"room-a", `"room-a"`},
		{`a"b`, `"a\"b"`},
		{strings.Repeat("é", 70), `"` + strings.Repeat("é", 64) + `…"`},
	}
	for _, tc := range tests {
		if got := shortQuote(tc.in); got != tc.want {
			t.Errorf("shortQuote(%q) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

func TestNewBookingID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newBookingID()
		if !bookingIDPattern.MatchString(id) || seen[id] {
			t.Fatalf("id %q is malformed or repeated", id)
		}
		seen[id] = true
	}
}

// TestOwnChecksBehindTheGate calls the handlers directly with what the gate
// refuses before they run (arguments over the schema's bounds, an action of
// an unbound token): the plugin's own checks still answer with a short
// error the agent can act on, and book nothing.
func TestOwnChecksBehindTheGate(t *testing.T) {
	s, st := newService(t)
	ctx := context.Background()
	alice := sdk.Call{Principal: sdk.Principal{Role: "customer", Scope: sdk.ScopeAction, UserID: "alice"}}
	unbound := sdk.Call{Principal: sdk.Principal{Role: "customer", Scope: sdk.ScopeRead}}
	long := strings.Repeat("x", 10_000)
	tests := []struct {
		name string
		call func() error
		code sdk.ErrorCode
		want []string
	}{
		{"date with time", func() error {
			_, err := s.Availability(ctx, alice, AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-08T10:00:00Z"})
			return err
		}, sdk.CodeInvalidInput, []string{"YYYY-MM-DD"}},
		{"too many days", func() error {
			_, err := s.Availability(ctx, alice, AvailabilityIn{ResourceID: "room-aurora", Days: 15})
			return err
		}, sdk.CodeInvalidInput, []string{"between 1 and 14"}},
		{"negative days", func() error {
			_, err := s.Availability(ctx, alice, AvailabilityIn{ResourceID: "room-aurora", Days: -1})
			return err
		}, sdk.CodeInvalidInput, []string{"between 1 and 14"}},
		{"limit too high", func() error { _, err := s.List(ctx, alice, ListIn{Limit: 500}); return err },
			sdk.CodeInvalidInput, []string{"limit must be between 1 and 200"}},
		{"negative limit", func() error { _, err := s.List(ctx, alice, ListIn{Limit: -3}); return err },
			sdk.CodeInvalidInput, []string{"limit must be between 1 and 200"}},
		{"unbound create", func() error {
			_, err := s.Create(ctx, unbound, CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:00Z"})
			return err
		}, sdk.CodeInvalidInput, []string{"this token is not bound to a user"}},
		{"huge resource id", func() error {
			_, err := s.Create(ctx, carol, CreateIn{ResourceID: long, Start: "2030-01-08T11:00:00Z"})
			return err
		}, sdk.CodeNotFound, []string{"no resource with id", "…"}},
		{"huge booking id", func() error { _, err := s.Get(ctx, alice, IDIn{ID: long}); return err },
			sdk.CodeNotFound, []string{"no booking with id", "…"}},
		{"huge booking id to cancel", func() error { _, err := s.Cancel(ctx, alice, IDIn{ID: long}); return err },
			sdk.CodeNotFound, []string{"no booking with id", "…"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if sdk.CodeOf(err) != tc.code {
				t.Fatalf("error = %v; want a %s error", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q; want it to contain %q", err, w)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes echoes the argument", len(err.Error()))
			}
		})
	}
	if mine, err := st.ListBookings(ctx, "carol", store.ListFilter{}); err != nil || len(mine) != 0 {
		t.Fatalf("carol has %+v, %v after refused creates; want nothing", mine, err)
	}
}
