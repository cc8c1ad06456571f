package booking_test

import (
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk/sdktest"
)

func TestEventsPublished(t *testing.T) {
	c := start(t, demo)
	seeded := c.Published()
	resources := map[string]bool{}
	for _, r := range sdktest.Call[booking.ResourcesOut](t, c, "booking.resources", alice, nil).Resources {
		resources[r.ID] = true
	}
	announced := map[string]bool{}
	for _, ev := range seeded {
		if ev.Type != "catalogue.upsert" || ev.Entity != booking.EntityResource || !resources[ev.ID] || ev.UserID != "" {
			t.Fatalf("seed event %+v; want a public catalogue.upsert of a seeded booking.resource", ev)
		}
		announced[ev.ID] = true
	}
	if len(seeded) != len(resources) || len(announced) != len(resources) {
		t.Fatalf("seeding published %d events for %d resources; want one catalogue.upsert per demo resource (%d)",
			len(seeded), len(announced), len(resources))
	}

	b := sdktest.Call[booking.Booking](t, c, "booking.create", carol, booking.CreateIn{ResourceID: "room-borealis", Start: "2030-01-08T10:30:00Z"})
	fail(t, c, "booking.create", carol, booking.CreateIn{ResourceID: "room-borealis", Start: "2030-01-08T10:30:00Z"}, conflict, "already booked")
	sdktest.Call[booking.CancelOut](t, c, "booking.cancel", carol, booking.IDIn{ID: b.ID})
	sdktest.Call[booking.CancelOut](t, c, "booking.cancel", carol, booking.IDIn{ID: b.ID}) // already cancelled: no event

	got := c.Published()[len(seeded):]
	want := []struct{ typ string }{{"booking.created"}, {"booking.cancelled"}}
	if len(got) != len(want) {
		t.Fatalf("published after seeding: %+v; want created then cancelled", got)
	}
	for i, ev := range got {
		if ev.Type != want[i].typ || ev.Entity != "booking" || ev.ID != b.ID || ev.UserID != "carol" {
			t.Errorf("event %d = %+v; want %s of %s owned by carol", i, ev, want[i].typ, b.ID)
		}
		var data map[string]string
		if err := json.Unmarshal(ev.Data, &data); err != nil || data["resource_id"] != "room-borealis" ||
			data["start"] != "2030-01-08T10:30:00Z" || data["end"] != "2030-01-08T11:00:00Z" || len(data) != 3 {
			t.Errorf("event %d data = %s, %v", i, ev.Data, err)
		}
	}

	// A restart over the same data seeds nothing, so publishes nothing.
	dir := t.TempDir()
	startIn(t, dir, now, demo)
	if again := startIn(t, dir, now, demo).Published(); len(again) != 0 {
		t.Errorf("second start published %+v", again)
	}
}
