package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
)

// BenchmarkBooking measures the read behind booking.get and its owner
// check, with parallel callers as the plugin sees them.
func BenchmarkBooking(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "booking.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now().UTC().Truncate(time.Hour).Add(48 * time.Hour)
	r := store.Resource{ID: "room-a", Name: "Room A", Kind: "room", Capacity: 4, SlotMinutes: 60, OpensMinute: 0, ClosesMinute: 24 * 60}
	bk := store.Booking{ID: "bk_aaaaaaaaaaaa", ResourceID: r.ID, UserID: "alice", Start: start, End: start.Add(time.Hour), Status: store.StatusActive, CreatedAt: time.Now().UTC()}
	if _, err := s.Seed(ctx, "bench", time.Now(), []store.Resource{r}, []store.Booking{bk}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Booking(ctx, bk.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
