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

// demoResources is a mid-sized office: enough variety (kinds, sizes,
// equipment, slot lengths, hours) that an agent has something real to
// search and book — "projector", "quiet", "standing desk", "tennis", "EV
// charger" all find something. The first seven are the original demo, which
// tests and the README name; keep their ids and slots.
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

	// Meeting and event rooms.
	{
		ID: "room-dawn", Name: "Dawn", Kind: "room", Location: "Floor 3, north wing",
		Description: "Meeting room for six around a round table, with a ceiling projector, a pull-down screen and a whiteboard; good for workshops and sprint planning.",
		Capacity:    6, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-ember", Name: "Ember", Kind: "room", Location: "Floor 4, east wing",
		Description: "Meeting room for ten with a video conferencing bar (wide-angle camera, ceiling microphones, speakers), a 65-inch screen and wireless screen sharing.",
		Capacity:    10, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-fjord", Name: "Fjord", Kind: "room", Location: "Floor 4, west wing",
		Description: "Small meeting room for four with a wall-mounted screen, an HDMI and USB-C cable, a whiteboard and a speakerphone; booked in half hours.",
		Capacity:    4, SlotMinutes: 30, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-glacier", Name: "Glacier", Kind: "room", Location: "Floor 5",
		Description: "Training room for twenty-four in classroom layout with a laser projector, a lectern with a microphone, two mobile whiteboards and a hearing loop; booked in two-hour blocks.",
		Capacity:    24, SlotMinutes: 120, OpensMinute: 8 * 60, ClosesMinute: 18 * 60,
	},
	{
		ID: "room-harbour", Name: "Harbour", Kind: "room", Location: "Ground floor, next to reception",
		Description: "Client meeting room for six near reception, with step-free access, a video conferencing screen with a camera and a coffee machine.",
		Capacity:    6, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "room-juniper", Name: "Juniper", Kind: "room", Location: "Floor 6, by the roof terrace",
		Description: "Bright brainstorming room for eight with floor-to-ceiling whiteboard walls, sticky notes, markers, beanbags and daylight; opens onto the roof terrace.",
		Capacity:    8, SlotMinutes: 60, OpensMinute: 9 * 60, ClosesMinute: 18 * 60,
	},
	{
		ID: "room-kestrel", Name: "Kestrel", Kind: "room", Location: "Floor 6",
		Description: "Event space for up to sixty with a small stage, two projectors, a PA system with wireless microphones and movable seating; booked in half-day blocks.",
		Capacity:    60, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "room-wellbeing", Name: "Wellbeing room", Kind: "room", Location: "Floor 3, south wing",
		Description: "Private, quiet room with a reclining chair, dimmable light, a sink and a small fridge; for nursing parents, prayer or a rest when unwell.",
		Capacity:    1, SlotMinutes: 30, OpensMinute: 7 * 60, ClosesMinute: 21 * 60,
	},
	{
		ID: "terrace", Name: "Roof terrace", Kind: "terrace", Location: "Floor 6, outdoors",
		Description: "Roof terrace for team events of up to thirty, with a gas barbecue, bench seating, patio heaters and festoon lights; booked in three-hour blocks.",
		Capacity:    30, SlotMinutes: 180, OpensMinute: 10 * 60, ClosesMinute: 22 * 60,
	},

	// Phone booths and pods.
	{
		ID: "booth-1", Name: "Phone booth 1", Kind: "booth", Location: "Floor 2, open space A",
		Description: "Soundproof phone booth for one with a shelf desk, a stool, a power socket and fresh-air ventilation; for calls and video meetings.",
		Capacity:    1, SlotMinutes: 30, OpensMinute: 7 * 60, ClosesMinute: 21 * 60,
	},
	{
		ID: "booth-2", Name: "Phone booth 2", Kind: "booth", Location: "Floor 3, south wing",
		Description: "Soundproof phone booth for one, set up for video calls: a webcam, a ring light, a headset and a USB-C dock.",
		Capacity:    1, SlotMinutes: 30, OpensMinute: 7 * 60, ClosesMinute: 21 * 60,
	},
	{
		ID: "booth-pod", Name: "Quiet pod", Kind: "booth", Location: "Floor 4, library corner",
		Description: "Enclosed quiet pod for two with acoustic panels, a small table and dimmable light; for focused pair work or a private conversation.",
		Capacity:    2, SlotMinutes: 30, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},

	// Desks, by zone.
	{
		ID: "desk-a3", Name: "Desk A3", Kind: "desk", Location: "Floor 2, open space A",
		Description: "Height-adjustable standing desk with two 24-inch monitors and a USB-C dock; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-b1", Name: "Desk B1", Kind: "desk", Location: "Floor 2, quiet zone B",
		Description: "Quiet-zone window desk — phones on silent, no calls — with a 27-inch monitor and a desk lamp; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-b2", Name: "Desk B2", Kind: "desk", Location: "Floor 2, quiet zone B",
		Description: "Quiet-zone desk with a 24-inch monitor on an arm and noise-cancelling headphones to borrow; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-c1", Name: "Desk C1", Kind: "desk", Location: "Floor 4, standing zone C",
		Description: "Electric standing desk with height presets, an anti-fatigue mat and a 27-inch monitor; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-c2", Name: "Walking desk C2", Kind: "desk", Location: "Floor 4, standing zone C",
		Description: "Walking desk: a standing desk over a slow under-desk treadmill, with a laptop stand and a monitor; booked in two-hour blocks.",
		Capacity:    1, SlotMinutes: 120, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-d1", Name: "Desk D1", Kind: "desk", Location: "Floor 3, collaboration zone D",
		Description: "Desk next to the team tables, where conversation is welcome, with a whiteboard on wheels and a USB-C dock; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-d2", Name: "Design desk D2", Kind: "desk", Location: "Floor 3, collaboration zone D",
		Description: "Desk for designers with a 32-inch colour-calibrated 4K monitor, a drawing tablet and a USB-C dock; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},
	{
		ID: "desk-e1", Name: "Accessible desk E1", Kind: "desk", Location: "Ground floor, by the lift",
		Description: "Wheelchair-accessible, height-adjustable desk near the lift and the accessible toilet, with a 24-inch monitor and a USB-C dock; booked in four-hour blocks.",
		Capacity:    1, SlotMinutes: 240, OpensMinute: 8 * 60, ClosesMinute: 20 * 60,
	},

	// Sport.
	{
		ID: "court-2", Name: "Tennis court 2", Kind: "court", Location: "Rooftop",
		Description: "Outdoor artificial-clay tennis court with a practice wall and a ball machine on request; no floodlights, so daylight hours only.",
		Capacity:    4, SlotMinutes: 60, OpensMinute: 8 * 60, ClosesMinute: 18 * 60,
	},
	{
		ID: "court-squash", Name: "Squash court", Kind: "court", Location: "Basement, sports hall",
		Description: "Glass-backed squash court with a viewing gallery; rackets, eye protection and balls at the front desk; booked in 45-minute sessions.",
		Capacity:    2, SlotMinutes: 45, OpensMinute: 7 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "court-padel", Name: "Padel court", Kind: "court", Location: "Rooftop",
		Description: "Covered outdoor padel court for doubles with LED floodlights; four padel rackets and balls to borrow; booked in 90-minute games.",
		Capacity:    4, SlotMinutes: 90, OpensMinute: 7 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "court-hall", Name: "Sports hall", Kind: "court", Location: "Basement, sports hall",
		Description: "Indoor half basketball court, also marked for badminton and volleyball; balls, shuttlecocks and nets in the store room.",
		Capacity:    10, SlotMinutes: 60, OpensMinute: 7 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "gym", Name: "Gym", Kind: "gym", Location: "Basement, sports hall",
		Description: "Fitness room for up to six with two treadmills, a rowing machine, an exercise bike, free weights up to 30 kg and a squat rack; showers and towels next door.",
		Capacity:    6, SlotMinutes: 60, OpensMinute: 6 * 60, ClosesMinute: 22 * 60,
	},

	// Studios and workshops.
	{
		ID: "studio-photo", Name: "Photo studio", Kind: "studio", Location: "Basement",
		Description: "Photo studio with a white cyclorama wall, a green screen, three LED softbox lights, a tripod and a laptop for tethered shooting; booked in two-hour sessions.",
		Capacity:    4, SlotMinutes: 120, OpensMinute: 9 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "studio-music", Name: "Music room", Kind: "studio", Location: "Basement",
		Description: "Soundproofed music rehearsal room with a digital piano, a drum kit, guitar and bass amps and a small PA; bring your own instrument.",
		Capacity:    5, SlotMinutes: 60, OpensMinute: 10 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "studio-movement", Name: "Movement studio", Kind: "studio", Location: "Floor 6",
		Description: "Sprung-floor studio with a mirror wall, yoga mats, blocks and a Bluetooth speaker; for yoga, stretching, pilates and dance classes.",
		Capacity:    12, SlotMinutes: 60, OpensMinute: 7 * 60, ClosesMinute: 21 * 60,
	},
	{
		ID: "kitchen-workshop", Name: "Workshop kitchen", Kind: "kitchen", Location: "Floor 1",
		Description: "Teaching kitchen for cooking workshops and team lunches: six induction hobs, two ovens, an island for twelve, a dishwasher and a camera over the counter on a big screen; booked in three-hour blocks.",
		Capacity:    12, SlotMinutes: 180, OpensMinute: 9 * 60, ClosesMinute: 21 * 60,
	},
	{
		ID: "maker-space", Name: "Maker space", Kind: "workshop", Location: "Ground floor, courtyard side",
		Description: "Maker space with a 3D printer, a laser cutter, a soldering station, a workbench and hand tools; take the safety induction before your first booking.",
		Capacity:    6, SlotMinutes: 120, OpensMinute: 9 * 60, ClosesMinute: 19 * 60,
	},

	// Parking and lockers.
	{
		ID: "parking-p1", Name: "Parking space P1", Kind: "parking", Location: "Underground car park, level -1",
		Description: "Covered parking space with a 22 kW EV charger (Type 2 cable attached); booked in half days, 07:00-13:00 and 13:00-19:00.",
		Capacity:    1, SlotMinutes: 360, OpensMinute: 7 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "parking-p2", Name: "Parking space P2", Kind: "parking", Location: "Underground car park, level -1",
		Description: "Covered parking space with an 11 kW EV charger (bring your own Type 2 cable); booked in half days, 07:00-13:00 and 13:00-19:00.",
		Capacity:    1, SlotMinutes: 360, OpensMinute: 7 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "parking-p3", Name: "Accessible parking space P3", Kind: "parking", Location: "Underground car park, level -1, by the lift",
		Description: "Wide accessible parking bay next to the lift, with an EV charger; for blue-badge holders first; booked in half days.",
		Capacity:    1, SlotMinutes: 360, OpensMinute: 7 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "parking-bike", Name: "Cargo bike bay", Kind: "parking", Location: "Courtyard bike shelter",
		Description: "Covered, lockable bay for a cargo bike or e-bike with a charging socket; booked in half days.",
		Capacity:    1, SlotMinutes: 360, OpensMinute: 7 * 60, ClosesMinute: 19 * 60,
	},
	{
		ID: "locker-1", Name: "Locker 1", Kind: "locker", Location: "Ground floor, by the showers",
		Description: "Full-height locker with a keypad lock and a USB charging point, big enough for a suit bag and a bike helmet; booked for the day.",
		Capacity:    1, SlotMinutes: 960, OpensMinute: 6 * 60, ClosesMinute: 22 * 60,
	},
	{
		ID: "locker-2", Name: "Locker 2", Kind: "locker", Location: "Ground floor, by the showers",
		Description: "Half-height locker with a keypad lock, for a laptop bag or gym kit; booked for the day.",
		Capacity:    1, SlotMinutes: 960, OpensMinute: 6 * 60, ClosesMinute: 22 * 60,
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
