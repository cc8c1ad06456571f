package booking_test

import (
	"context"
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

var operator = sdk.Principal{Role: "admin", Scope: "admin", UserID: "ops"}

func zenith() booking.AddResourceIn {
	return booking.AddResourceIn{
		ID: "room-zenith", Name: "Zenith", Kind: "room", Description: "Meditation room with floor cushions.",
		Location: "Floor 7", Capacity: 6, SlotMinutes: 30, Opens: "07:00", Closes: "24:00",
	}
}

func TestAddResource(t *testing.T) {
	c := start(t, nil)
	got := sdktest.Call[booking.Resource](t, c, "booking.add_resource", operator, zenith())
	if got.ID != "room-zenith" || got.Opens != "07:00" || got.Closes != "24:00" || got.Capacity != 6 {
		t.Fatalf("added %+v", got)
	}
	// Search learns of it from the event, then fetches its document.
	evs := c.Published()
	if len(evs) != 1 || evs[0].Type != "catalogue.upsert" || evs[0].Entity != booking.EntityResource || evs[0].ID != "room-zenith" || evs[0].UserID != "" {
		t.Fatalf("published %+v; want one public catalogue.upsert of room-zenith", evs)
	}
	docs, err := c.DocumentsByID(context.Background(), booking.EntityResource, "room-zenith")
	if err != nil || len(docs) != 1 || docs[0].Body != "Meditation room with floor cushions." {
		t.Fatalf("document = %v, %v", docs, err)
	}
	// It is bookable at once.
	sdktest.Call[booking.Booking](t, c, "booking.create", carol, booking.CreateIn{ResourceID: "room-zenith", Start: "2030-01-08T07:30:00Z"})

	fail(t, c, "booking.add_resource", operator, zenith(), conflict, "room-zenith", "exists already")
	if n := len(c.Published()); n != 2 { // the add and the booking
		t.Errorf("a refused add published an event: %d events", n)
	}
}

func TestAddResourceInvalid(t *testing.T) {
	c := start(t, nil)
	for _, tc := range []struct {
		name string
		edit func(*booking.AddResourceIn)
		want string
	}{
		{"bad id", func(in *booking.AddResourceIn) { in.ID = "Room Zenith" }, "lower-case letters"},
		{"no name", func(in *booking.AddResourceIn) { in.Name = "" }, "name is empty"},
		{"no kind", func(in *booking.AddResourceIn) { in.Kind = "" }, "kind is empty"},
		{"no capacity", func(in *booking.AddResourceIn) { in.Capacity = 0 }, "capacity 0"},
		{"slot too short", func(in *booking.AddResourceIn) { in.SlotMinutes = 1 }, "outside 5..1440"},
		{"opens not a time", func(in *booking.AddResourceIn) { in.Opens = "7am" }, "opens"},
		{"closes not a time", func(in *booking.AddResourceIn) { in.Closes = "25:00" }, "closes"},
		{"closes before opens", func(in *booking.AddResourceIn) { in.Opens, in.Closes = "18:00", "08:00" }, "hold at least one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := zenith()
			tc.edit(&in)
			fail(t, c, "booking.add_resource", operator, in, invalid, tc.want)
		})
	}
	if evs := c.Published(); len(evs) != 0 {
		t.Errorf("refused adds published %+v", evs)
	}
}
