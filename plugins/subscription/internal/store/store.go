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
	// ErrNotFound: no plan or subscription with the given id.
	ErrNotFound = errors.New("not found")
	// ErrAlreadySubscribed: the user already has an active subscription to
	// the plan. The error is an *AlreadySubscribedError naming it.
	ErrAlreadySubscribed = errors.New("already subscribed")
	// ErrDuplicateID: a record with the same id exists. For subscriptions
	// the caller picks a new random id and tries again.
	ErrDuplicateID = errors.New("id already exists")
	// ErrInvalid: the record breaks a rule of the schema.
	ErrInvalid = errors.New("invalid record")
)

// AlreadySubscribedError is the ErrAlreadySubscribed a Subscribe returns:
// it names the subscription that holds the plan, so the caller can point
// the user at it.
type AlreadySubscribedError struct {
	// ExistingID is the active subscription's id. It is empty in the rare
	// race where that subscription ended between the refused insert and
	// the look-up.
	ExistingID string
}

func (e *AlreadySubscribedError) Error() string {
	if e.ExistingID == "" {
		return ErrAlreadySubscribed.Error()
	}
	return fmt.Sprintf("%v by %s", ErrAlreadySubscribed, e.ExistingID)
}

// Is makes errors.Is(err, ErrAlreadySubscribed) hold.
func (e *AlreadySubscribedError) Is(target error) bool { return target == ErrAlreadySubscribed }

// Period is how often a plan renews.
type Period string

const (
	Monthly Period = "month"
	Yearly  Period = "year"
)

// Valid reports whether p is a known period.
func (p Period) Valid() bool { return p == Monthly || p == Yearly }

// End is the end of the n-th period (n ≥ 1) of a subscription started at
// start. It counts from start each time instead of chaining, so a
// subscription started on the 31st ends its periods on the last day of
// shorter months and on the 31st again afterwards, never drifting.
func (p Period) End(start time.Time, n int) time.Time {
	months := n
	if p == Yearly {
		months = 12 * n
	}
	y, m, d := start.Date()
	first := time.Date(y, m+time.Month(months), 1, start.Hour(), start.Minute(), start.Second(), start.Nanosecond(), start.Location())
	// The last day of the target month, when the start's day is past it.
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(d, last)-1)
}

// Plan is one offer of the public catalogue.
type Plan struct {
	ID          string
	Name        string
	Description string
	// PriceCents is the price per period in the currency's minor unit.
	PriceCents int
	// Currency is an ISO 4217 code, e.g. EUR.
	Currency string
	Period   Period
}

// planIDPattern keeps ids readable and safe to echo in messages.
var (
	planIDPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

// Validate reports the first rule p breaks, wrapping ErrInvalid.
func (p Plan) Validate() error {
	switch {
	case !planIDPattern.MatchString(p.ID):
		return fmt.Errorf("%w: plan id %q must be 1-63 lower-case letters, digits or dashes", ErrInvalid, p.ID)
	case p.Name == "":
		return fmt.Errorf("%w: plan %s: name is empty", ErrInvalid, p.ID)
	case p.PriceCents < 0:
		return fmt.Errorf("%w: plan %s: price %d is negative", ErrInvalid, p.ID, p.PriceCents)
	case !currencyPattern.MatchString(p.Currency):
		return fmt.Errorf("%w: plan %s: currency %q is not a three-letter ISO 4217 code", ErrInvalid, p.ID, p.Currency)
	case !p.Period.Valid():
		return fmt.Errorf("%w: plan %s: period %q must be %q or %q", ErrInvalid, p.ID, p.Period, Monthly, Yearly)
	}
	return nil
}

// Status is a subscription's stored state. A cancelled subscription is
// kept, never deleted.
type Status string

const (
	// StatusActive: the subscription runs. It may carry a CancelAt, when it
	// was cancelled at the end of its period: it stays active until then.
	StatusActive Status = "active"
	// StatusCancelled: the subscription ended.
	StatusCancelled Status = "cancelled"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s == StatusActive || s == StatusCancelled }

// Subscription is one user's subscription to one plan.
type Subscription struct {
	ID     string
	PlanID string
	UserID string
	// Period is the plan's period when the user subscribed: the terms
	// agreed then, which later plan changes do not rewrite.
	Period    Period
	Status    Status
	StartedAt time.Time
	// CurrentPeriodEnd is the end of the period the subscription was in
	// when it was last written. An active subscription without CancelAt
	// renews at each period end; see StatusAt and PeriodEndAt.
	CurrentPeriodEnd time.Time
	// CancelAt is zero while no cancellation is asked for; else when the
	// subscription ends (or ended).
	CancelAt time.Time
}

// StatusAt is the status as of now: an active subscription whose CancelAt
// has come has ended, though the row still says active until the next
// write for that user and plan (Subscribe) closes it. Reads never write.
func (s Subscription) StatusAt(now time.Time) Status {
	if s.Status == StatusActive && !s.CancelAt.IsZero() && !s.CancelAt.After(now) {
		return StatusCancelled
	}
	return s.Status
}

// PeriodEndAt is the end of the period the subscription is in at now. A
// running subscription without a cancellation renews, so its period end
// moves forward; an ending or ended one keeps the stored one.
func (s Subscription) PeriodEndAt(now time.Time) time.Time {
	if s.Status != StatusActive || !s.CancelAt.IsZero() || s.CurrentPeriodEnd.After(now) {
		return s.CurrentPeriodEnd
	}
	n := 1
	for !s.Period.End(s.StartedAt, n).After(now) {
		n++
	}
	return s.Period.End(s.StartedAt, n)
}

// Validate reports the first rule a new subscription breaks, wrapping
// ErrInvalid.
func (s Subscription) Validate() error {
	switch {
	case s.ID == "":
		return fmt.Errorf("%w: subscription id is empty", ErrInvalid)
	case s.PlanID == "":
		return fmt.Errorf("%w: subscription %s: plan id is empty", ErrInvalid, s.ID)
	case s.UserID == "":
		return fmt.Errorf("%w: subscription %s: user id is empty", ErrInvalid, s.ID)
	case !s.Period.Valid():
		return fmt.Errorf("%w: subscription %s: period %q is unknown", ErrInvalid, s.ID, s.Period)
	case s.StartedAt.IsZero():
		return fmt.Errorf("%w: subscription %s: started_at is unset", ErrInvalid, s.ID)
	case !s.CurrentPeriodEnd.After(s.StartedAt):
		return fmt.Errorf("%w: subscription %s: period end %s must be after start %s", ErrInvalid, s.ID, s.CurrentPeriodEnd, s.StartedAt)
	case s.Status != StatusActive:
		// A subscription is born active; cancelling is a separate, atomic step.
		return fmt.Errorf("%w: subscription %s: a new subscription must be active, not %q", ErrInvalid, s.ID, s.Status)
	case !s.CancelAt.IsZero():
		return fmt.Errorf("%w: subscription %s: a new subscription has no cancel_at", ErrInvalid, s.ID)
	}
	return nil
}

// Cancellation is what Cancel writes.
type Cancellation struct {
	// Now is when the cancel is asked for.
	Now time.Time
	// Immediate ends the subscription at Now; otherwise it ends at
	// PeriodEnd and stays active until then.
	Immediate bool
	// PeriodEnd is the end of the period the subscription is in at Now
	// (after Now): the stored current_period_end of either cancel.
	PeriodEnd time.Time
}

// ListFilter narrows ListSubscriptions. The zero value lists everything.
type ListFilter struct {
	// Status, when set, keeps only subscriptions whose StatusAt(Now) is it.
	Status Status
	Now    time.Time
}

// Store is the subscription plugin's persistence. Implementations are safe
// for concurrent use, also from several processes sharing one database.
type Store interface {
	// Plans lists every plan, ordered by id.
	Plans(ctx context.Context) ([]Plan, error)
	// Plan returns one plan or ErrNotFound.
	Plan(ctx context.Context, id string) (Plan, error)
	// CreatePlan adds p; ErrDuplicateID when the id is taken.
	CreatePlan(ctx context.Context, p Plan) error

	// Subscribe inserts an active subscription. First, in the same
	// transaction, it closes the user's active subscription to the plan
	// whose CancelAt is at or before sub.StartedAt, as that one has ended.
	// It returns ErrNotFound when the plan does not exist, an
	// *AlreadySubscribedError when the user has an active subscription to
	// the plan, ErrDuplicateID when the id is taken. Of any number of
	// concurrent subscribes of one user to one plan exactly one succeeds.
	Subscribe(ctx context.Context, sub Subscription) error
	// Subscription returns one subscription or ErrNotFound.
	Subscription(ctx context.Context, id string) (Subscription, error)
	// ListSubscriptions returns userID's subscriptions ordered by start,
	// then id.
	ListSubscriptions(ctx context.Context, userID string, f ListFilter) ([]Subscription, error)
	// Cancel applies c to a subscription still running at c.Now and returns
	// it with changed true. An immediate cancel ends an active
	// subscription, also one already set to end at its period end; a cancel
	// at period end sets CancelAt (and CurrentPeriodEnd) to c.PeriodEnd on
	// an active subscription that has none. Otherwise it returns the stored
	// record unchanged with changed false. Of concurrent identical cancels
	// of one subscription exactly one reports changed. ErrNotFound for an
	// unknown id.
	Cancel(ctx context.Context, id string, c Cancellation) (sub Subscription, changed bool, err error)

	// Seed applies the named seed once in one transaction: only when no seed
	// of that name was applied before and the store holds no plans. It
	// reports whether it applied anything. On error nothing is written.
	Seed(ctx context.Context, name string, at time.Time, plans []Plan, subs []Subscription) (applied bool, err error)

	// Close releases the database.
	Close() error
}
