package booking

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/capgate/capgate/sdk"
)

// PlanVisitIn are the arguments of the booking.plan_visit prompt.
type PlanVisitIn struct {
	Booking string `json:"booking" capgate:"maxLength=32" jsonschema:"one of your bookings, as booking.list returns its id (bk_…)"`
	Note    string `json:"note,omitempty" capgate:"maxLength=500" jsonschema:"anything the plan should take into account"`
}

// PlanVisit renders the booking.plan_visit prompt: the caller's booking,
// the resource it is for, and a request to plan the visit. A booking that
// is not the caller's is answered as one that does not exist (admin scope
// excepted, as for booking.get).
func (s *Service) PlanVisit(ctx context.Context, call sdk.Call, in PlanVisitIn) ([]sdk.PromptMessage, error) {
	b, err := s.booking(ctx, in.Booking)
	if err != nil {
		return nil, err
	}
	if b.UserID != call.Principal.UserID && !call.Principal.IsAdmin() {
		return nil, sdk.NotFound("no booking with id %s", shortQuote(in.Booking))
	}
	r, err := s.resource(ctx, b.ResourceID)
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	fmt.Fprintf(&text, "I have booked %s (%s, %s) from %s to %s UTC; booking %s is %s.\n",
		r.Name, r.Kind, r.Location, wireTime(b.Start), wireTime(b.End), b.ID, b.Status)
	text.WriteString("Help me plan the visit: when to leave, how to find it, and what to prepare for a " + r.Kind + ".")
	if in.Note != "" {
		text.WriteString("\nKeep in mind: " + in.Note)
	}
	text.WriteString("\nIf I cannot make it, remind me that booking.cancel frees the slot until it starts.")
	return []sdk.PromptMessage{
		// The resource's catalogue record, as resources/read would return it.
		sdk.UserSays(sdk.ResourceLink{URI: "capgate://" + EntityResource + "/" + url.PathEscape(r.ID), Name: r.Name,
			Description: "the booked " + r.Kind, MIMEType: "application/json"}),
		sdk.UserSays(sdk.Text(text.String())),
	}, nil
}

// maxBookingSuggestions bounds the bookings CompleteBooking reads.
const maxBookingSuggestions = 100

// CompleteBooking suggests the ids of the caller's own active bookings
// that start with partial, soonest first: only what booking.list would
// show this caller.
func (s *Service) CompleteBooking(ctx context.Context, call sdk.Call, partial string, _ map[string]string) ([]string, error) {
	if call.Principal.UserID == "" {
		return nil, nil
	}
	out, err := s.List(ctx, call, ListIn{Status: "active", Limit: maxBookingSuggestions})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, b := range out.Bookings {
		if strings.HasPrefix(b.ID, partial) {
			ids = append(ids, b.ID)
		}
	}
	return ids, nil
}
