package booking

import (
	"context"
	"errors"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/sdk"
)

// PermAdmin is what a role needs to change the bookable catalogue.
const PermAdmin = "booking.admin"

// AddResourceIn is booking.add_resource's input.
type AddResourceIn struct {
	ID          string `json:"id" jsonschema:"new resource id: 1-63 lower-case letters, digits or dashes, e.g. room-zenith"`
	Name        string `json:"name"`
	Kind        string `json:"kind" jsonschema:"room, desk, court, studio, …"`
	Description string `json:"description,omitempty" jsonschema:"what it offers; this is what search finds it by"`
	Location    string `json:"location,omitempty"`
	Capacity    int    `json:"capacity" jsonschema:"how many people it holds, at least 1"`
	SlotMinutes int    `json:"slot_minutes" jsonschema:"length of every slot in minutes, 5 to 1440"`
	Opens       string `json:"opens" jsonschema:"start of the first slot of each day, HH:MM UTC"`
	Closes      string `json:"closes" jsonschema:"no slot ends after this, HH:MM UTC (24:00 for midnight)"`
}

// AddResource adds a bookable resource to the catalogue and announces it,
// so search finds it.
func (s *Service) AddResource(ctx context.Context, _ sdk.Call, in AddResourceIn) (Resource, error) {
	opens, err := parseHHMM("opens", in.Opens)
	if err != nil {
		return Resource{}, err
	}
	closes, err := parseHHMM("closes", in.Closes)
	if err != nil {
		return Resource{}, err
	}
	r := store.Resource{
		ID: in.ID, Name: in.Name, Kind: in.Kind, Description: in.Description, Location: in.Location,
		Capacity: in.Capacity, SlotMinutes: in.SlotMinutes, OpensMinute: opens, ClosesMinute: closes,
	}
	if err := r.Validate(); err != nil {
		return Resource{}, sdk.InvalidInput("%v", err)
	}
	switch err := s.store.CreateResource(ctx, r); {
	case errors.Is(err, store.ErrDuplicateID):
		return Resource{}, sdk.Conflict("a resource with id %s exists already; pick another id", shortQuote(in.ID))
	case errors.Is(err, store.ErrInvalid):
		return Resource{}, sdk.InvalidInput("%v", err)
	case err != nil:
		return Resource{}, err
	}
	s.publish(ctx, sdk.Event{
		Type: "catalogue.upsert", Entity: EntityResource, ID: r.ID,
		Data: map[string]any{"name": r.Name, "kind": r.Kind, "location": r.Location},
	})
	return resourceToWire(r), nil
}

// parseHHMM reads a time of day as minutes after midnight; 24:00 is the
// end of the day.
func parseHHMM(field, v string) (int, error) {
	if v == "24:00" {
		return 24 * 60, nil
	}
	t, err := time.Parse("15:04", v)
	if err != nil {
		return 0, sdk.InvalidInput("%s %s is not a time of day: use HH:MM, e.g. 08:00", field, shortQuote(v))
	}
	return t.Hour()*60 + t.Minute(), nil
}
