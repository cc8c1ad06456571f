package events

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// MaxEventSize caps the encoded size of one event, in bytes.
const MaxEventSize = 64 << 10

// DefaultBufferSize is the number of events a bus retains when its config
// leaves the size at zero.
const DefaultBufferSize = 10_000

// Event is one thing that happened on the platform.
type Event struct {
	// Cursor is assigned by the bus on Publish and increases strictly within
	// one bus (one stream). It must be zero when publishing.
	Cursor uint64 `json:"cursor"`
	// Type is a dotted lower-case name such as "booking.cancelled".
	Type string `json:"type"`
	// Entity is the kind of thing the event is about, e.g. "booking" or
	// "booking.resource".
	Entity string `json:"entity"`
	// ID identifies the entity within its kind.
	ID string `json:"id"`
	// UserID is the owner of the entity; empty for public catalogue events.
	UserID string `json:"user_id,omitempty"`
	// At is when it happened; the bus sets it to the publish time when zero.
	At time.Time `json:"at"`
	// Data is an optional JSON object with details. Treat it as read-only:
	// subscribers of one event may share it.
	Data json.RawMessage `json:"data,omitempty"`
}

// Handler processes one delivered event. Returning an error asks for the same
// event again later; the subscriber delivers nothing newer until it succeeds.
// ctx is cancelled when the subscription or the bus closes.
type Handler func(ctx context.Context, ev Event) error

// Bus publishes events, retains a window of them and delivers them to named
// subscribers.
type Bus interface {
	// Publish validates ev, assigns its cursor and stores it.
	Publish(ctx context.Context, ev Event) (cursor uint64, err error)
	// Subscribe starts delivering, in order and at least once, every event
	// after cursor after to handler, until the subscription or the bus is
	// closed. name identifies the subscriber: an existing subscription of
	// that name resumes from its last acknowledged event, also after a
	// restart, and after is ignored. Two live subscriptions of one name on
	// one bus are refused. ctx bounds only the setup.
	Subscribe(ctx context.Context, name string, after uint64, handler Handler) (Subscription, error)
	// Follow is Subscribe for a subscriber that keeps its own cursor: the
	// subscription has a fresh name, always starts after cursor after, and
	// leaves nothing on the bus once closed.
	Follow(ctx context.Context, after uint64, handler Handler) (Subscription, error)
	// Since returns up to limit retained events with cursors greater than
	// after, oldest first, and the oldest retained cursor (0 when nothing is
	// retained). When events after after have already been dropped it
	// returns a *CursorTooOldError (matching ErrCursorTooOld).
	Since(ctx context.Context, after uint64, limit int) (evs []Event, oldest uint64, err error)
	// State reports the bus's identity and the cursors it retains.
	State(ctx context.Context) (State, error)
	// Close stops every subscription, waits for their handlers to return
	// and releases the bus. Later calls return ErrClosed.
	Close() error
}

// State describes a bus at one moment.
type State struct {
	// ID identifies the sequence of cursors: a cursor kept under one ID
	// means nothing under another. A bus keeps its ID for the life of its
	// stream, across restarts of the host and of an embedded server.
	ID string
	// Oldest is the oldest retained cursor, 0 when nothing is retained.
	Oldest uint64
	// Last is the newest cursor ever assigned, 0 before the first publish.
	Last uint64
}

// Subscription is a running subscriber.
type Subscription interface {
	// Name is the subscriber name given to Subscribe.
	Name() string
	// Close stops delivery and waits for a running handler to return.
	// Closing twice is harmless.
	Close() error
}

var (
	// ErrInvalidEvent is wrapped by every validation error of Publish.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrCursorTooOld is matched by the error Since returns when the events
	// after the given cursor are no longer retained.
	ErrCursorTooOld = errors.New("cursor is older than the retained events")
	// ErrClosed is returned by a closed bus.
	ErrClosed = errors.New("event bus is closed")
	// ErrInvalidSubscriber is wrapped when a subscriber name is malformed or
	// already subscribed on this bus.
	ErrInvalidSubscriber = errors.New("invalid subscriber")
)

// CursorTooOldError reports a cursor older than the retained window.
type CursorTooOldError struct {
	After  uint64 // the cursor asked for
	Oldest uint64 // the oldest cursor still retained
}

func (e *CursorTooOldError) Error() string {
	return fmt.Sprintf("cursor %d is older than the retained events: the oldest available is %d", e.After, e.Oldest)
}

// Is makes errors.Is(err, ErrCursorTooOld) hold.
func (e *CursorTooOldError) Is(target error) bool { return target == ErrCursorTooOld }

var (
	typeRE       = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	entityRE     = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
	subscriberRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

const maxIDLen = 256

// Validate checks an event about to be published. Every error wraps
// ErrInvalidEvent.
func (ev Event) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
	}
	switch {
	case ev.Cursor != 0:
		return bad("cursor is assigned by the bus, got %d", ev.Cursor)
	case ev.Type == "":
		return bad("type is empty")
	case !typeRE.MatchString(ev.Type):
		return bad("type %q is not dotted lower-case words such as \"booking.created\"", ev.Type)
	case ev.Entity == "":
		return bad("entity is empty")
	case !entityRE.MatchString(ev.Entity):
		return bad("entity %q is not lower-case words separated by dots such as \"booking.resource\"", ev.Entity)
	case ev.ID == "":
		return bad("id is empty")
	case len(ev.ID) > maxIDLen:
		return bad("id is %d bytes, more than %d", len(ev.ID), maxIDLen)
	case len(ev.UserID) > maxIDLen:
		return bad("user_id is %d bytes, more than %d", len(ev.UserID), maxIDLen)
	}
	if len(ev.Data) > 0 {
		if !json.Valid(ev.Data) {
			return bad("data is not valid JSON")
		}
		if t := bytes.TrimLeft(ev.Data, " \t\r\n"); t[0] != '{' {
			return bad("data must be a JSON object")
		}
	}
	if n := encodedSize(ev); n > MaxEventSize {
		return bad("event is %d bytes encoded, more than %d", n, MaxEventSize)
	}
	return nil
}

func encodedSize(ev Event) int {
	b, err := json.Marshal(ev)
	if err != nil {
		return MaxEventSize + 1
	}
	return len(b)
}

// prepare validates ev and returns the copy the bus stores: At set and in
// UTC, Data compacted into a buffer of its own.
func prepare(ev Event, now time.Time) (Event, error) {
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	if ev.At.IsZero() {
		ev.At = now
	}
	ev.At = ev.At.UTC().Round(0)
	if len(ev.Data) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, ev.Data); err != nil {
			return Event{}, fmt.Errorf("%w: data: %v", ErrInvalidEvent, err)
		}
		ev.Data = buf.Bytes()
	} else {
		ev.Data = nil
	}
	return ev, nil
}

func validateSubscriber(name string) error {
	if !subscriberRE.MatchString(name) {
		return fmt.Errorf("%w: name %q must be 1-64 letters, digits, '-' or '_'", ErrInvalidSubscriber, name)
	}
	return nil
}

// followerName is a subscriber name no other subscription has.
func followerName() string { return "follower-" + rand.Text() }

func validateLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("events: limit must be positive, got %d", limit)
	}
	return nil
}

// Backoff spaces out redeliveries of an event whose handler failed: the
// first retry waits Min, each further one twice as long, up to Max.
type Backoff struct {
	Min time.Duration
	Max time.Duration
}

// DefaultBackoff is used when a config leaves Backoff zero.
var DefaultBackoff = Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

func (b Backoff) orDefault() Backoff {
	if b.Min <= 0 {
		b.Min = DefaultBackoff.Min
	}
	if b.Max < b.Min {
		b.Max = max(DefaultBackoff.Max, b.Min)
	}
	return b
}

// Delay is the wait before delivery attempt number failures+1, after
// failures consecutive failures (failures ≥ 1).
func (b Backoff) Delay(failures int) time.Duration {
	b = b.orDefault()
	d := b.Min
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// callHandler runs h, turning a panic into an error.
func callHandler(ctx context.Context, h Handler, ev Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(ctx, ev)
}
