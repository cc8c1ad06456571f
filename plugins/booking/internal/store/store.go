package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Errors a Store returns; callers test them with errors.Is. Implementations
// wrap them with context.
var (
	// ErrNotFound: no resource or booking with the given id.
	ErrNotFound = errors.New("not found")
	// ErrSlotTaken: the resource already has an active booking at that start.
	ErrSlotTaken = errors.New("slot already booked")
	// ErrDuplicateID: a record with the same id exists. For bookings the
	// caller picks a new random id and tries again.
	ErrDuplicateID = errors.New("id already exists")
	// ErrInvalid: the record breaks a rule of the schema.
	ErrInvalid = errors.New("invalid record")
)

// Status is a booking's state. A cancelled booking is kept, never deleted.
type Status string

const (
	StatusActive    Status = "active"
	StatusCancelled Status = "cancelled"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s == StatusActive || s == StatusCancelled }

// Resource is something bookable: a room, a desk, a court.
//
// Its day is divided into slots of SlotMinutes starting at OpensMinute; the
// last slot ends at or before ClosesMinute. Minutes count from midnight UTC.
type Resource struct {
	ID           string
	Name         string
	Kind         string
	Description  string
	Location     string
	Capacity     int
	SlotMinutes  int
	OpensMinute  int
	ClosesMinute int
}

// resourceIDPattern keeps ids readable and safe to echo in messages.
var resourceIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// Validate reports the first rule r breaks, wrapping ErrInvalid.
func (r Resource) Validate() error {
	switch {
	case !resourceIDPattern.MatchString(r.ID):
		return fmt.Errorf("%w: resource id %q must be 1-63 lower-case letters, digits or dashes", ErrInvalid, r.ID)
	case r.Name == "":
		return fmt.Errorf("%w: resource %s: name is empty", ErrInvalid, r.ID)
	case r.Kind == "":
		return fmt.Errorf("%w: resource %s: kind is empty", ErrInvalid, r.ID)
	case r.Capacity < 1:
		return fmt.Errorf("%w: resource %s: capacity %d is below 1", ErrInvalid, r.ID, r.Capacity)
	case r.SlotMinutes < 5 || r.SlotMinutes > 1440:
		return fmt.Errorf("%w: resource %s: slot of %d minutes is outside 5..1440", ErrInvalid, r.ID, r.SlotMinutes)
	case r.OpensMinute < 0 || r.ClosesMinute > 1440 || r.ClosesMinute-r.OpensMinute < r.SlotMinutes:
		return fmt.Errorf("%w: resource %s: open minutes %d..%d must lie within 0..1440 and hold at least one %d-minute slot",
			ErrInvalid, r.ID, r.OpensMinute, r.ClosesMinute, r.SlotMinutes)
	}
	return nil
}

// Booking is one user's hold on one slot of one resource.
type Booking struct {
	ID         string
	ResourceID string
	UserID     string
	Start, End time.Time
	Status     Status
	CreatedAt  time.Time
	// CancelledAt is zero while the booking is active.
	CancelledAt time.Time
}

// Validate reports the first rule a new booking breaks, wrapping ErrInvalid.
func (b Booking) Validate() error {
	switch {
	case b.ID == "":
		return fmt.Errorf("%w: booking id is empty", ErrInvalid)
	case b.ResourceID == "":
		return fmt.Errorf("%w: booking %s: resource id is empty", ErrInvalid, b.ID)
	case b.UserID == "":
		return fmt.Errorf("%w: booking %s: user id is empty", ErrInvalid, b.ID)
	case b.Start.IsZero() || !b.End.After(b.Start):
		return fmt.Errorf("%w: booking %s: end %s must be after start %s", ErrInvalid, b.ID, b.End, b.Start)
	case b.CreatedAt.IsZero():
		return fmt.Errorf("%w: booking %s: created_at is unset", ErrInvalid, b.ID)
	case b.Status != StatusActive:
		// A booking is born active; cancelling is a separate, atomic step.
		return fmt.Errorf("%w: booking %s: a new booking must be active, not %q", ErrInvalid, b.ID, b.Status)
	}
	return nil
}

// ListFilter narrows ListBookings. The zero value lists everything.
type ListFilter struct {
	// Status, when set, keeps only bookings in that state.
	Status Status
	// Limit caps the result; 0 means no cap.
	Limit int
}

// Store is the booking plugin's persistence. Implementations are safe for
// concurrent use, also from several processes sharing one database.
type Store interface {
	// Resources lists every resource, ordered by id.
	Resources(ctx context.Context) ([]Resource, error)
	// Resource returns one resource or ErrNotFound.
	Resource(ctx context.Context, id string) (Resource, error)
	// CreateResource adds r; ErrDuplicateID when the id is taken.
	CreateResource(ctx context.Context, r Resource) error

	// CreateBooking inserts an active booking. It returns ErrNotFound when
	// the resource does not exist, ErrSlotTaken when the slot already has an
	// active booking, ErrDuplicateID when the booking id is taken. Exactly
	// one of any number of concurrent creates for one slot succeeds.
	CreateBooking(ctx context.Context, b Booking) error
	// Booking returns one booking or ErrNotFound.
	Booking(ctx context.Context, id string) (Booking, error)
	// ListBookings returns userID's bookings ordered by start, then id.
	ListBookings(ctx context.Context, userID string, f ListFilter) ([]Booking, error)
	// ActiveBookings returns the active bookings of a resource whose start
	// lies in [from, to), ordered by start.
	ActiveBookings(ctx context.Context, resourceID string, from, to time.Time) ([]Booking, error)
	// CancelBooking marks an active booking cancelled at `at` and returns it
	// with cancelled true. When it was already cancelled it returns the
	// stored record unchanged with cancelled false. Of concurrent cancels of
	// one booking exactly one reports cancelled. ErrNotFound for an unknown id.
	CancelBooking(ctx context.Context, id string, at time.Time) (b Booking, cancelled bool, err error)

	// Seed applies the named seed once in one transaction: only when no seed
	// of that name was applied before and the store holds no resources. It
	// reports whether it applied anything. On error nothing is written.
	Seed(ctx context.Context, name string, at time.Time, resources []Resource, bookings []Booking) (applied bool, err error)

	// Close releases the database.
	Close() error
}
