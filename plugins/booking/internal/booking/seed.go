package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/sdk"
)

// SeedDemo is the name of the demo seed, as the config's seed key spells it.
const SeedDemo = "demo"

// demoResources is a small office: enough variety (slot lengths, hours,
// kinds) that an agent has something real to search and book.
var demoResources = []store.Resource{
	{
		ID: "room-aurora", Name: "Aurora", Kind: "room", Location: "Floor 3, north wing",
		Description: "Meeting room for eight with a 75-inch screen, video-conferencing kit and a whiteboard wall.",
		Capacity:    8, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-borealis", Name: "Borealis", Kind: "room", Location: "Floor 3, south wing",
		Description: "Small quiet room for calls and one-to-ones; booked in half hours.",
		Capacity:    3, SlotMinutes: 30, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-cirrus", Name: "Cirrus", Kind: "room", Location: "Floor 5",
		Description: "Boardroom for sixteen with a projector and a catering hatch.",
		Capacity:    16, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 18 * 60,
	},
	{
		ID: "desk-a1", Name: "Desk A1", Kind: "desk", Location: "Floor 2, open space A",
		Description: "Window desk with a 27-inch monitor and a standing frame; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-a2", Name: "Desk A2", Kind: "desk", Location: "Floor 2, open space A (quiet zone)",
		Description: "Quiet-zone desk with a USB-C docking station; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "court-1", Name: "Tennis court 1", Kind: "court", Location: "Rooftop",
		Description: "Outdoor hard court with floodlights; rackets and balls at the front desk.",
		Capacity:    4, SlotMinutes: 60, OpensMinute: 7 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "studio-podcast", Name: "Podcast studio", Kind: "studio", Location: "Basement",
		Description: "Sound-treated booth with two microphones, a mixer and a recorder; booked in 90-minute sessions.",
		Capacity:    2, SlotMinutes: 90, OpensMinute: 9 * 60, ClosesMinute: 18 * 60,
	},
}

// demoBookings gives alice two bookings and bob one, tomorrow (UTC) after
// now, so they are always in the future when seeded.
func (s *Service) demoBookings(now time.Time) []store.Booking {
	tomorrow := startOfDay(now).Add(day)
	mk := func(user, resource string, hour int, minutes int) store.Booking {
		start := tomorrow.Add(time.Duration(hour) * time.Hour)
		return store.Booking{
			ID: s.newID(), ResourceID: resource, UserID: user,
			Start: start, End: start.Add(time.Duration(minutes) * time.Minute),
			Status: store.StatusActive, CreatedAt: now,
		}
	}
	return []store.Booking{
		mk("alice", "room-aurora", 10, 60),
		mk("alice", "court-1", 14, 60),
		mk("bob", "room-aurora", 14, 60),
	}
}

// Seed applies the named seed to an empty store, once. It reports whether
// anything was written.
func (s *Service) Seed(ctx context.Context, name string) (bool, error) {
	if name != SeedDemo {
		return false, fmt.Errorf("unknown seed %q", name)
	}
	now := s.clock()
	applied, err := s.store.Seed(ctx, name, now, demoResources, s.demoBookings(now))
	if err != nil {
		return false, fmt.Errorf("seed %q: %w", name, err)
	}
	if applied {
		s.log.Info("seeded the booking database", "seed", name, "resources", len(demoResources))
		for _, r := range demoResources {
			s.publish(ctx, sdk.Event{
				Type: "catalogue.upsert", Entity: EntityResource, ID: r.ID,
				Data: map[string]any{"name": r.Name, "kind": r.Kind, "location": r.Location},
			})
		}
	} else {
		s.log.Debug("seed not applied: it was applied before or the database holds resources", "seed", name)
	}
	return applied, nil
}
