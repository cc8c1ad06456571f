package booking

// The capabilities' inputs and outputs. Their JSON Schemas, inferred by the
// SDK, are what agents see: the jsonschema tags are written for them. The
// capgate tags bound every input to what its real values can be, so the
// host refuses anything longer before the plugin runs:
//
//   - a resource id has at most 63 characters (store.Resource.Validate);
//   - a booking id has 15 ("bk_" and 12, newBookingID): 32 leaves near
//     misses to the plugin's own message, which says what ids look like;
//   - a date is YYYY-MM-DD, 10;
//   - an RFC 3339 time has 20 (35 with nanoseconds and an offset): 40;
//   - a status is active or cancelled: 16 leaves misspellings to the
//     plugin's message, which names both;
//   - days and limit have the ranges the plugin accepts, 0 meaning the
//     default.

// ResourcesIn is booking.resources' input: it takes no arguments.
type ResourcesIn struct{}

// Resource is a bookable resource as agents see it.
type Resource struct {
	ID          string `json:"id" jsonschema:"resource id, e.g. room-aurora; pass it as resource_id"`
	Name        string `json:"name"`
	Kind        string `json:"kind" jsonschema:"room, desk, court, studio, …"`
	Description string `json:"description"`
	Location    string `json:"location"`
	Capacity    int    `json:"capacity" jsonschema:"how many people it holds"`
	SlotMinutes int    `json:"slot_minutes" jsonschema:"length of every slot in minutes"`
	Opens       string `json:"opens" jsonschema:"start of the first slot of each day, HH:MM UTC"`
	Closes      string `json:"closes" jsonschema:"no slot ends after this, HH:MM UTC"`
}

// ResourcesOut is booking.resources' output.
type ResourcesOut struct {
	Resources []Resource `json:"resources"`
}

// AvailabilityIn is booking.availability's input.
type AvailabilityIn struct {
	ResourceID string `json:"resource_id" capgate:"maxLength=63" jsonschema:"resource id from booking.resources"`
	Date       string `json:"date,omitempty" capgate:"maxLength=10" jsonschema:"first day to look at, YYYY-MM-DD (UTC); today when omitted"`
	Days       int    `json:"days,omitempty" capgate:"minimum=0,maximum=14" jsonschema:"number of days to look at, 1 to 14; 1 when omitted"`
}

// Slot is one bookable time span.
type Slot struct {
	Start string `json:"start" jsonschema:"RFC 3339 UTC; pass it as start to booking.create"`
	End   string `json:"end" jsonschema:"RFC 3339 UTC"`
}

// AvailabilityOut is booking.availability's output.
type AvailabilityOut struct {
	ResourceID  string `json:"resource_id"`
	From        string `json:"from" jsonschema:"start of the window looked at, RFC 3339 UTC"`
	To          string `json:"to" jsonschema:"end of the window looked at, RFC 3339 UTC"`
	SlotMinutes int    `json:"slot_minutes"`
	FreeSlots   []Slot `json:"free_slots" jsonschema:"slots in the window that are in the future and not booked, in time order"`
}

// ListIn is booking.list's input.
type ListIn struct {
	Status string `json:"status,omitempty" capgate:"maxLength=16" jsonschema:"active or cancelled; both when omitted"`
	Limit  int    `json:"limit,omitempty" capgate:"minimum=0,maximum=200" jsonschema:"at most this many bookings, 1 to 200; 50 when omitted"`
}

// Booking is a booking as agents see it.
type Booking struct {
	ID          string `json:"id" jsonschema:"booking id, bk_ followed by 12 characters"`
	ResourceID  string `json:"resource_id"`
	Start       string `json:"start" jsonschema:"RFC 3339 UTC"`
	End         string `json:"end" jsonschema:"RFC 3339 UTC"`
	Status      string `json:"status" jsonschema:"active or cancelled"`
	CreatedAt   string `json:"created_at,omitempty" jsonschema:"when it was booked, RFC 3339 UTC"`
	CancelledAt string `json:"cancelled_at,omitempty" jsonschema:"when it was cancelled, RFC 3339 UTC; absent while active"`
}

// ListOut is booking.list's output.
type ListOut struct {
	Bookings []Booking `json:"bookings" jsonschema:"the caller's bookings, ordered by start"`
}

// IDIn names one booking: the input of booking.get and booking.cancel.
type IDIn struct {
	ID string `json:"id" capgate:"maxLength=32" jsonschema:"booking id, as booking.create or booking.list returned it"`
}

// CreateIn is booking.create's input.
type CreateIn struct {
	ResourceID string `json:"resource_id" capgate:"maxLength=63" jsonschema:"resource id from booking.resources"`
	Start      string `json:"start" capgate:"maxLength=40" jsonschema:"slot start, RFC 3339, e.g. 2030-01-07T10:00:00Z; booking.availability lists free slots"`
}

// CancelOut is booking.cancel's output: the booking, now cancelled.
type CancelOut struct {
	ID               string `json:"id"`
	ResourceID       string `json:"resource_id"`
	Start            string `json:"start" jsonschema:"RFC 3339 UTC"`
	End              string `json:"end" jsonschema:"RFC 3339 UTC"`
	Status           string `json:"status" jsonschema:"cancelled"`
	CreatedAt        string `json:"created_at,omitempty" jsonschema:"RFC 3339 UTC"`
	CancelledAt      string `json:"cancelled_at" jsonschema:"when it was cancelled, RFC 3339 UTC"`
	AlreadyCancelled bool   `json:"already_cancelled" jsonschema:"true when the booking had been cancelled before this call, which then changed nothing"`
	Message          string `json:"message"`
}
