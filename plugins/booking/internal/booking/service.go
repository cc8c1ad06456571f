package booking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/sdk"
)

const (
	defaultListLimit = 50
	maxListLimit     = 200
	maxDays          = 14
	// idAttempts bounds retries on a booking id collision, which at 60
	// random bits happens about never; repeated collisions mean a broken
	// random source, and then failing is right.
	idAttempts = 3
)

// Service answers the booking capabilities from a store.
type Service struct {
	store store.Store
	now   func() time.Time
	log   *slog.Logger
	newID func() string
	pub   Publisher
}

// Publisher puts an event on the host's bus; sdk.Env.Publish is one.
type Publisher func(context.Context, sdk.Event) (uint64, error)

// SetPublisher makes the service publish booking.created,
// booking.cancelled and catalogue.upsert events through pub. Without one
// it publishes nothing.
func (s *Service) SetPublisher(pub Publisher) { s.pub = pub }

// publish sends ev after the change it reports is committed. A failure is
// logged and swallowed on purpose: the booking is already stored, and
// failing the call would make the agent retry a change that happened.
func (s *Service) publish(ctx context.Context, ev sdk.Event) {
	if s.pub == nil {
		return
	}
	if _, err := s.pub(ctx, ev); err != nil {
		s.log.Warn("publishing an event failed; the change itself is stored", "type", ev.Type, "entity", ev.Entity, "id", ev.ID, "err", err)
	}
}

// bookingData is the data of booking.created and booking.cancelled.
type bookingData struct {
	ResourceID string `json:"resource_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
}

func bookingEvent(typ string, b store.Booking) sdk.Event {
	return sdk.Event{
		Type: typ, Entity: "booking", ID: b.ID, UserID: b.UserID,
		Data: bookingData{ResourceID: b.ResourceID, Start: wireTime(b.Start), End: wireTime(b.End)},
	}
}

// NewService returns a service over st. now is its clock (time.Now in
// production; a fixed instant in tests of past and future slots); log may be
// nil.
func NewService(st store.Store, now func() time.Time, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, now: now, log: log, newID: newBookingID}
}

// clock is the current instant at the store's precision (seconds, UTC).
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Second) }

// Resources lists every resource.
func (s *Service) Resources(ctx context.Context, _ sdk.Call, _ ResourcesIn) (ResourcesOut, error) {
	rs, err := s.store.Resources(ctx)
	if err != nil {
		return ResourcesOut{}, err
	}
	out := ResourcesOut{Resources: make([]Resource, 0, len(rs))}
	for _, r := range rs {
		out.Resources = append(out.Resources, resourceToWire(r))
	}
	return out, nil
}

func resourceToWire(r store.Resource) Resource {
	return Resource{
		ID: r.ID, Name: r.Name, Kind: r.Kind, Description: r.Description, Location: r.Location,
		Capacity: r.Capacity, SlotMinutes: r.SlotMinutes, Opens: hhmm(r.OpensMinute), Closes: hhmm(lastStart(r) + r.SlotMinutes),
	}
}

// resource loads a resource named by the caller, as a tool error when the
// name is missing or unknown.
func (s *Service) resource(ctx context.Context, id string) (store.Resource, error) {
	if id == "" {
		return store.Resource{}, sdk.InvalidInput("resource_id is required; booking.resources lists the resources")
	}
	r, err := s.store.Resource(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Resource{}, sdk.NotFound("no resource with id %s; booking.resources lists the resources", shortQuote(id))
	}
	return r, err
}

// Availability lists the free slots of a resource over whole UTC days.
func (s *Service) Availability(ctx context.Context, _ sdk.Call, in AvailabilityIn) (AvailabilityOut, error) {
	now := s.clock()
	today := startOfDay(now)
	from := today
	if in.Date != "" {
		d, err := time.Parse(time.DateOnly, in.Date)
		if err != nil {
			return AvailabilityOut{}, sdk.InvalidInput("date %s is not a date like %s (YYYY-MM-DD, UTC)", shortQuote(in.Date), today.Format(time.DateOnly))
		}
		from = d
	}
	days := in.Days
	if days == 0 {
		days = 1
	}
	if days < 1 || days > maxDays {
		return AvailabilityOut{}, sdk.InvalidInput("days must be between 1 and %d, got %d", maxDays, in.Days)
	}
	if from.Before(today) {
		return AvailabilityOut{}, sdk.InvalidInput("date %s is in the past; the earliest is today, %s (UTC)", from.Format(time.DateOnly), today.Format(time.DateOnly))
	}
	if from.After(now.Add(horizon)) {
		return AvailabilityOut{}, sdk.InvalidInput("date %s is too far ahead; slots can be booked at most %d days in advance", from.Format(time.DateOnly), horizon/day)
	}
	r, err := s.resource(ctx, in.ResourceID)
	if err != nil {
		return AvailabilityOut{}, err
	}
	to := from.Add(time.Duration(days) * day)
	booked, err := s.store.ActiveBookings(ctx, r.ID, from, to)
	if err != nil {
		return AvailabilityOut{}, err
	}
	taken := make(map[int64]bool, len(booked))
	for _, b := range booked {
		taken[b.Start.Unix()] = true
	}
	out := AvailabilityOut{ResourceID: r.ID, From: wireTime(from), To: wireTime(to), SlotMinutes: r.SlotMinutes, FreeSlots: []Slot{}}
	slot := time.Duration(r.SlotMinutes) * time.Minute
	for d := from; d.Before(to); d = d.Add(day) {
		for _, start := range daySlots(r, d) {
			if !start.After(now) || start.After(now.Add(horizon)) || taken[start.Unix()] {
				continue
			}
			out.FreeSlots = append(out.FreeSlots, Slot{Start: wireTime(start), End: wireTime(start.Add(slot))})
		}
	}
	return out, nil
}

// userOf is the user a call acts for. The host refuses actions of unbound
// tokens already; reads reach here unbound, and "my bookings" of nobody is
// a mistake worth naming.
func userOf(call sdk.Call) (string, error) {
	if call.Principal.UserID == "" {
		return "", sdk.InvalidInput("this token is not bound to a user, so it has no bookings; use a token issued for a user")
	}
	return call.Principal.UserID, nil
}

func toWire(b store.Booking) Booking {
	out := Booking{
		ID: b.ID, ResourceID: b.ResourceID, Start: wireTime(b.Start), End: wireTime(b.End),
		Status: string(b.Status), CreatedAt: wireTime(b.CreatedAt),
	}
	if !b.CancelledAt.IsZero() {
		out.CancelledAt = wireTime(b.CancelledAt)
	}
	return out
}

// List returns the caller's own bookings.
func (s *Service) List(ctx context.Context, call sdk.Call, in ListIn) (ListOut, error) {
	user, err := userOf(call)
	if err != nil {
		return ListOut{}, err
	}
	f := store.ListFilter{Status: store.Status(in.Status), Limit: in.Limit}
	if in.Status != "" && !f.Status.Valid() {
		return ListOut{}, sdk.InvalidInput("status must be %q or %q, got %s", store.StatusActive, store.StatusCancelled, shortQuote(in.Status))
	}
	if f.Limit == 0 {
		f.Limit = defaultListLimit
	}
	if f.Limit < 1 || f.Limit > maxListLimit {
		return ListOut{}, sdk.InvalidInput("limit must be between 1 and %d, got %d", maxListLimit, in.Limit)
	}
	bs, err := s.store.ListBookings(ctx, user, f)
	if err != nil {
		return ListOut{}, err
	}
	out := ListOut{Bookings: make([]Booking, 0, len(bs))}
	for _, b := range bs {
		out.Bookings = append(out.Bookings, toWire(b))
	}
	return out, nil
}

// booking loads the booking a caller named, as a tool error when there is
// none.
func (s *Service) booking(ctx context.Context, id string) (store.Booking, error) {
	if id == "" {
		return store.Booking{}, sdk.InvalidInput("id is required: a booking id such as booking.list returns")
	}
	// A malformed id cannot exist; say what ids look like instead of
	// asking the database.
	if !bookingIDPattern.MatchString(id) {
		return store.Booking{}, sdk.NotFound("no booking with id %s; booking ids look like bk_ followed by 12 letters and digits", shortQuote(id))
	}
	b, err := s.store.Booking(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Booking{}, sdk.NotFound("no booking with id %s", shortQuote(id))
	}
	return b, err
}

// Owner names the user who owns the booking in, for the gate's ownership
// check of booking.get and booking.cancel.
func (s *Service) Owner(ctx context.Context, call sdk.Call, in IDIn) (string, error) {
	b, err := s.booking(ctx, in.ID)
	if err != nil {
		return "", err
	}
	call.Keep(b) // Get answers with it: one read of the row, not two
	return b.UserID, nil
}

// Get returns one booking. The gate has checked that it is the caller's.
func (s *Service) Get(ctx context.Context, call sdk.Call, in IDIn) (Booking, error) {
	if b, ok := sdk.Kept[store.Booking](call); ok && b.ID == in.ID {
		return toWire(b), nil
	}
	b, err := s.booking(ctx, in.ID)
	if err != nil {
		return Booking{}, err
	}
	return toWire(b), nil
}

// Create books a slot for the caller.
func (s *Service) Create(ctx context.Context, call sdk.Call, in CreateIn) (Booking, error) {
	user, err := userOf(call)
	if err != nil {
		return Booking{}, err
	}
	r, err := s.resource(ctx, in.ResourceID)
	if err != nil {
		return Booking{}, err
	}
	if in.Start == "" {
		return Booking{}, sdk.InvalidInput("start is required: the start of a slot, e.g. %s; %s", s.exampleSlot(r), slotRule(r))
	}
	start, err := time.Parse(time.RFC3339, in.Start)
	if err != nil {
		return Booking{}, sdk.InvalidInput("start %s is not an RFC 3339 time like %s; %s", shortQuote(in.Start), s.exampleSlot(r), slotRule(r))
	}
	start = start.UTC()
	if !isSlot(r, start) {
		return Booking{}, sdk.InvalidInput("start %s is not the start of a slot: %s; booking.availability lists the free ones",
			shortQuote(in.Start), slotRule(r))
	}
	now := s.clock()
	if !start.After(now) {
		return Booking{}, sdk.InvalidInput("slot %s of %s is in the past (it is now %s); booking.availability lists the free ones",
			wireTime(start), r.ID, wireTime(now))
	}
	if start.After(now.Add(horizon)) {
		return Booking{}, sdk.InvalidInput("slot %s of %s is too far ahead; slots can be booked at most %d days in advance",
			wireTime(start), r.ID, horizon/day)
	}
	b := store.Booking{
		ResourceID: r.ID, UserID: user,
		Start: start, End: start.Add(time.Duration(r.SlotMinutes) * time.Minute),
		Status: store.StatusActive, CreatedAt: now,
	}
	for attempt := 1; ; attempt++ {
		b.ID = s.newID()
		err = s.store.CreateBooking(ctx, b)
		if !errors.Is(err, store.ErrDuplicateID) || attempt == idAttempts {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrSlotTaken):
		if own := s.ownBooking(ctx, r.ID, start, b.End, user); own != "" {
			// A retry of a create whose answer was lost, most likely: say
			// which booking the caller already holds.
			return Booking{}, sdk.Conflict("slot %s of %s is already booked by you, as booking %s (booking.get shows it)", wireTime(start), r.ID, own)
		}
		return Booking{}, sdk.Conflict("slot %s of %s is already booked; booking.availability lists the free ones", wireTime(start), r.ID)
	case errors.Is(err, store.ErrNotFound):
		return Booking{}, sdk.NotFound("no resource with id %s; booking.resources lists the resources", shortQuote(r.ID))
	case err != nil:
		return Booking{}, fmt.Errorf("book %s at %s for %s: %w", r.ID, wireTime(start), user, err)
	}
	s.log.Info("booking created", "booking", b.ID, "resource", r.ID, "start", wireTime(start), "user", user, "call_id", call.ID)
	s.publish(ctx, bookingEvent("booking.created", b))
	return toWire(b), nil
}

// exampleSlot is a concrete valid start for messages: the resource's first
// slot tomorrow, which is always in the future.
func (s *Service) exampleSlot(r store.Resource) string {
	return wireTime(daySlots(r, startOfDay(s.clock()).Add(day))[0])
}

// ownBooking is the id of user's active booking of resource at start, or
// "" when the slot is someone else's (or the lookup fails: the plain
// conflict is still true).
func (s *Service) ownBooking(ctx context.Context, resource string, start, end time.Time, user string) string {
	active, err := s.store.ActiveBookings(ctx, resource, start, end)
	if err != nil {
		return ""
	}
	for _, b := range active {
		if b.Start.Equal(start) && b.UserID == user {
			return b.ID
		}
	}
	return ""
}

// Cancel cancels one of the caller's bookings. Cancelling a cancelled
// booking changes nothing and is not an error, so a retried call is safe.
func (s *Service) Cancel(ctx context.Context, call sdk.Call, in IDIn) (CancelOut, error) {
	b, err := s.booking(ctx, in.ID)
	if err != nil {
		return CancelOut{}, err
	}
	if b.Status == store.StatusCancelled {
		return cancelOut(b, false), nil
	}
	now := s.clock()
	// The start never changes, so checking it before the write races with
	// nothing; the status is settled by the store's conditional update.
	if !b.Start.After(now) {
		return CancelOut{}, sdk.Conflict("booking %s started at %s and can no longer be cancelled", b.ID, wireTime(b.Start))
	}
	b, cancelled, err := s.store.CancelBooking(ctx, b.ID, now)
	if errors.Is(err, store.ErrNotFound) {
		return CancelOut{}, sdk.NotFound("no booking with id %s", shortQuote(in.ID))
	}
	if err != nil {
		return CancelOut{}, fmt.Errorf("cancel booking %s: %w", in.ID, err)
	}
	if cancelled {
		s.log.Info("booking cancelled", "booking", b.ID, "resource", b.ResourceID, "start", wireTime(b.Start), "by", call.Principal.UserID, "call_id", call.ID)
		s.publish(ctx, bookingEvent("booking.cancelled", b))
	}
	return cancelOut(b, cancelled), nil
}

func cancelOut(b store.Booking, cancelledNow bool) CancelOut {
	w := toWire(b)
	out := CancelOut{
		ID: w.ID, ResourceID: w.ResourceID, Start: w.Start, End: w.End, Status: w.Status,
		CreatedAt: w.CreatedAt, CancelledAt: w.CancelledAt, AlreadyCancelled: !cancelledNow,
	}
	if cancelledNow {
		out.Message = fmt.Sprintf("booking %s of %s at %s is cancelled; the slot is free again", b.ID, b.ResourceID, w.Start)
	} else {
		out.Message = fmt.Sprintf("booking %s was already cancelled at %s; nothing changed", b.ID, w.CancelledAt)
	}
	return out
}
