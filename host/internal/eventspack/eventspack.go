// Package eventspack is the events pack: the host's own capability
// events.poll, which lets an agent read what happened on the platform from
// the event bus's retained window, filtered to what its token may see.
//
// It is a [dispatch.Provider] registered under the provider name
// [ProviderName], so calls reach it through the same gate as a plugin's:
// pack "events", permission "events.read", read scope.
package eventspack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

const (
	// ProviderName is the provider the host's own capabilities are
	// registered under; no plugin may take it.
	ProviderName = "capgate"
	// Pack is the operator toggle of events.poll.
	Pack = "events"
	// Permission is what a role must hold to poll.
	Permission = "events.read"
	// Capability is the tool's name.
	Capability = "events.poll"
)

// PollIn is the input of events.poll.
type PollIn struct {
	After uint64 `json:"after,omitempty" jsonschema:"the next value of the previous poll; leave it out (or 0) to start at the oldest retained event"`
	Limit int    `json:"limit,omitempty" jsonschema:"most events to return; default and maximum are the server's max_results"`
}

// Event is one event as an agent reads it.
type Event struct {
	Cursor uint64 `json:"cursor" jsonschema:"position on the bus; events come in increasing cursor order"`
	Type   string `json:"type" jsonschema:"what happened, e.g. booking.cancelled or catalogue.upsert"`
	Entity string `json:"entity" jsonschema:"the kind of thing it happened to, e.g. booking or booking.resource"`
	ID     string `json:"id" jsonschema:"the id of that thing"`
	UserID string `json:"user_id" jsonschema:"the user it belongs to; empty for public catalogue events"`
	At     string `json:"at" jsonschema:"when it happened, RFC 3339 UTC"`
	Data   any    `json:"data,omitempty" jsonschema:"details, as the publisher gave them"`
}

// PollOut is the result of events.poll.
type PollOut struct {
	Events []Event `json:"events"`
	Next   uint64  `json:"next" jsonschema:"pass it as after in the next poll to get only newer events"`
}

// Provider serves events.poll from a bus.
type Provider struct {
	bus        events.Bus
	maxResults int
}

// New returns the events pack over bus; maxResults (config max_results) is
// the default and the largest limit.
func New(bus events.Bus, maxResults int) (*Provider, error) {
	if bus == nil {
		return nil, errors.New("eventspack: no bus")
	}
	if maxResults < 1 {
		return nil, fmt.Errorf("eventspack: max_results must be at least 1, got %d", maxResults)
	}
	return &Provider{bus: bus, maxResults: maxResults}, nil
}

// Capability is events.poll's registry record, with schemas inferred from
// PollIn and PollOut; limit is bounded by max_results.
func (p *Provider) Capability() (registry.Capability, error) {
	inRaw, outRaw, err := registry.SchemasOf[PollIn, PollOut](func(in *jsonschema.Schema) {
		if lim := in.Properties["limit"]; lim != nil {
			lo, hi := 1.0, float64(p.maxResults)
			lim.Minimum, lim.Maximum = &lo, &hi
		}
		if after := in.Properties["after"]; after != nil {
			zero := 0.0
			after.Minimum = &zero
		}
	})
	if err != nil {
		return registry.Capability{}, fmt.Errorf("events.poll %w", err)
	}
	return registry.Capability{
		Name: Capability,
		Description: "Read what happened on the platform (bookings created or cancelled, catalogue changes), oldest first. " +
			"You see your own events and public catalogue events. Pass the returned next as after to get only newer ones.",
		Kind:         registry.Read,
		InputSchema:  inRaw,
		OutputSchema: outRaw,
		Pack:         Pack,
		Permission:   Permission,
		Plugin:       ProviderName,
	}, nil
}

// Visible says whether p may see ev: an admin-scoped principal sees every
// event; anyone sees public catalogue events (no user); a principal bound
// to a user also sees that user's events. An unbound principal therefore
// sees catalogue events only.
func Visible(p dispatch.Principal, ev events.Event) bool {
	return p.Scope == dispatch.ScopeAdmin || ev.UserID == "" || (p.UserID != "" && ev.UserID == p.UserID)
}

// Invoke runs events.poll.
func (p *Provider) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	capability, args, pr := r.Capability, r.Args, r.Principal
	if capability != Capability {
		return nil, fmt.Errorf("%w: %q (the events pack has only %s)", dispatch.ErrUnknownCapability, capability, Capability)
	}
	var in PollIn
	if !registry.NoArgs(args) {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf("arguments do not fit the input schema: %v", err)}
		}
	}
	out, err := p.Poll(ctx, pr, in)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// Poll returns up to in.Limit events after in.After that pr may see. It
// reads on past events pr may not see, so one poll fills its limit when the
// window holds enough; next is the last event returned, or the last one
// read when none was visible, so a poll never reads the same events twice.
func (p *Provider) Poll(ctx context.Context, pr dispatch.Principal, in PollIn) (PollOut, error) {
	limit := in.Limit
	switch {
	case limit == 0:
		limit = p.maxResults
	case limit < 1 || limit > p.maxResults:
		return PollOut{}, &dispatch.ToolError{Code: dispatch.InvalidInput,
			Message: fmt.Sprintf("limit must be between 1 and %d, got %d", p.maxResults, limit)}
	}
	out := PollOut{Events: []Event{}, Next: in.After}
	after := in.After
	for len(out.Events) < limit {
		batch, _, err := p.bus.Since(ctx, after, limit)
		var tooOld *events.CursorTooOldError
		switch {
		case errors.As(err, &tooOld) && in.After == 0 && after == 0:
			// No cursor given: start at the oldest retained event.
			after = tooOld.Oldest - 1
			out.Next = after
			continue
		case errors.As(err, &tooOld):
			return PollOut{}, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf(
				"cursor %d is older than the events still kept: the oldest available cursor is %d. "+
					"Events in between are gone; poll with after: %d to go on from the oldest one.",
				in.After, tooOld.Oldest, tooOld.Oldest-1)}
		case err != nil:
			return PollOut{}, fmt.Errorf("events.poll: %w", err)
		}
		if len(batch) == 0 {
			break
		}
		for _, ev := range batch {
			after = ev.Cursor
			if !Visible(pr, ev) {
				out.Next = ev.Cursor
				continue
			}
			out.Events = append(out.Events, toWire(ev))
			out.Next = ev.Cursor
			if len(out.Events) == limit {
				break
			}
		}
	}
	return out, nil
}

func toWire(ev events.Event) Event {
	w := Event{
		Cursor: ev.Cursor, Type: ev.Type, Entity: ev.Entity, ID: ev.ID, UserID: ev.UserID,
		At: ev.At.UTC().Format(time.RFC3339Nano),
	}
	if len(ev.Data) > 0 {
		w.Data = ev.Data
	}
	return w
}
