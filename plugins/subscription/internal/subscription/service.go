package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/sdk"
)

// idAttempts bounds retries on a subscription id collision, which at 60
// random bits happens about never; repeated collisions mean a broken
// random source, and then failing is right.
const idAttempts = 3

// Service answers the subscription capabilities from a store.
type Service struct {
	store store.Store
	now   func() time.Time
	log   *slog.Logger
	newID func() string
	pub   Publisher
}

// Publisher puts an event on the host's bus; sdk.Env.Publish is one.
type Publisher func(context.Context, sdk.Event) (uint64, error)

// SetPublisher makes the service publish subscription.started,
// subscription.cancelled and catalogue.upsert events through pub. Without
// one it publishes nothing.
func (s *Service) SetPublisher(pub Publisher) { s.pub = pub }

// publish sends ev after the change it reports is committed. A failure is
// logged and swallowed on purpose: the change is already stored, and
// failing the call would make the agent retry a change that happened.
func (s *Service) publish(ctx context.Context, ev sdk.Event) {
	if s.pub == nil {
		return
	}
	if _, err := s.pub(ctx, ev); err != nil {
		s.log.Warn("publishing an event failed; the change itself is stored", "type", ev.Type, "entity", ev.Entity, "id", ev.ID, "err", err)
	}
}

// startedData is the data of subscription.started.
type startedData struct {
	PlanID           string `json:"plan_id"`
	StartedAt        string `json:"started_at"`
	CurrentPeriodEnd string `json:"current_period_end"`
}

// cancelledData is the data of subscription.cancelled.
type cancelledData struct {
	PlanID    string `json:"plan_id"`
	CancelAt  string `json:"cancel_at"`
	Immediate bool   `json:"immediate"`
}

// NewService returns a service over st. now is its clock (time.Now in
// production; a fixed instant in tests of renewals and period ends); log
// may be nil.
func NewService(st store.Store, now func() time.Time, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, now: now, log: log, newID: newSubscriptionID}
}

// clock is the current instant at the store's precision (seconds, UTC).
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Second) }

func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func planToWire(p store.Plan) Plan {
	return Plan{ID: p.ID, Name: p.Name, Description: p.Description, PriceCents: p.PriceCents, Currency: p.Currency, Period: string(p.Period)}
}

// toWire shows sub as of now: a subscription past its cancel_at reads
// cancelled, a renewing one shows the period it is in.
func toWire(sub store.Subscription, now time.Time) Subscription {
	out := Subscription{
		ID: sub.ID, PlanID: sub.PlanID, Status: string(sub.StatusAt(now)),
		StartedAt: wireTime(sub.StartedAt), CurrentPeriodEnd: wireTime(sub.PeriodEndAt(now)),
	}
	if !sub.CancelAt.IsZero() {
		out.CancelAt = wireTime(sub.CancelAt)
	}
	return out
}

// Plans lists every plan.
func (s *Service) Plans(ctx context.Context, _ sdk.Call, _ PlansIn) (PlansOut, error) {
	ps, err := s.store.Plans(ctx)
	if err != nil {
		return PlansOut{}, err
	}
	out := PlansOut{Plans: make([]Plan, 0, len(ps))}
	for _, p := range ps {
		out.Plans = append(out.Plans, planToWire(p))
	}
	return out, nil
}

// userOf is the user a call acts for. The host refuses actions of unbound
// tokens already; reads reach here unbound, and "my subscriptions" of
// nobody is a mistake worth naming.
func userOf(call sdk.Call) (string, error) {
	if call.Principal.UserID == "" {
		return "", sdk.InvalidInput("this token is not bound to a user, so it has no subscriptions; use a token issued for a user")
	}
	return call.Principal.UserID, nil
}

// List returns the caller's own subscriptions.
func (s *Service) List(ctx context.Context, call sdk.Call, in ListIn) (ListOut, error) {
	user, err := userOf(call)
	if err != nil {
		return ListOut{}, err
	}
	now := s.clock()
	f := store.ListFilter{Status: store.Status(in.Status), Now: now}
	if in.Status != "" && !f.Status.Valid() {
		return ListOut{}, sdk.InvalidInput("status must be %q or %q, got %s", store.StatusActive, store.StatusCancelled, shortQuote(in.Status))
	}
	subs, err := s.store.ListSubscriptions(ctx, user, f)
	if err != nil {
		return ListOut{}, err
	}
	out := ListOut{Subscriptions: make([]Subscription, 0, len(subs))}
	for _, sub := range subs {
		out.Subscriptions = append(out.Subscriptions, toWire(sub, now))
	}
	return out, nil
}

// subscription loads the subscription a caller named, as a tool error
// when there is none.
func (s *Service) subscription(ctx context.Context, id string) (store.Subscription, error) {
	if id == "" {
		return store.Subscription{}, sdk.InvalidInput("id is required: a subscription id such as subscription.list returns")
	}
	// A malformed id cannot exist; say what ids look like instead of
	// asking the database.
	if !subscriptionIDPattern.MatchString(id) {
		return store.Subscription{}, sdk.NotFound("no subscription with id %s; subscription ids look like sub_ followed by 12 letters and digits", shortQuote(id))
	}
	sub, err := s.store.Subscription(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Subscription{}, sdk.NotFound("no subscription with id %s", shortQuote(id))
	}
	return sub, err
}

// Owner names the user who owns the subscription in names, for the
// host's ownership check of subscription.get.
func (s *Service) Owner(ctx context.Context, _ sdk.Call, in IDIn) (string, error) {
	return s.owner(ctx, in.ID)
}

// CancelOwner names the user who owns the subscription in names, for the
// host's ownership check of subscription.cancel.
func (s *Service) CancelOwner(ctx context.Context, _ sdk.Call, in CancelIn) (string, error) {
	return s.owner(ctx, in.ID)
}

func (s *Service) owner(ctx context.Context, id string) (string, error) {
	sub, err := s.subscription(ctx, id)
	if err != nil {
		return "", err
	}
	return sub.UserID, nil
}

// Get returns one subscription. The host has checked that it is the
// caller's.
func (s *Service) Get(ctx context.Context, _ sdk.Call, in IDIn) (Subscription, error) {
	sub, err := s.subscription(ctx, in.ID)
	if err != nil {
		return Subscription{}, err
	}
	return toWire(sub, s.clock()), nil
}

// Subscribe starts a subscription of the caller to a plan.
func (s *Service) Subscribe(ctx context.Context, call sdk.Call, in SubscribeIn) (Subscription, error) {
	user, err := userOf(call)
	if err != nil {
		return Subscription{}, err
	}
	if in.PlanID == "" {
		return Subscription{}, sdk.InvalidInput("plan_id is required; subscription.plans lists the plans")
	}
	p, err := s.store.Plan(ctx, in.PlanID)
	if errors.Is(err, store.ErrNotFound) {
		return Subscription{}, sdk.NotFound("no plan with id %s; subscription.plans lists the plans", shortQuote(in.PlanID))
	}
	if err != nil {
		return Subscription{}, err
	}
	now := s.clock()
	sub := store.Subscription{
		PlanID: p.ID, UserID: user, Period: p.Period, Status: store.StatusActive,
		StartedAt: now, CurrentPeriodEnd: p.Period.End(now, 1),
	}
	for attempt := 1; ; attempt++ {
		sub.ID = s.newID()
		err = s.store.Subscribe(ctx, sub)
		if !errors.Is(err, store.ErrDuplicateID) || attempt == idAttempts {
			break
		}
	}
	var already *store.AlreadySubscribedError
	switch {
	case errors.As(err, &already) && already.ExistingID != "":
		return Subscription{}, sdk.Conflict("you already have an active subscription to %s: %s; cancel it first or keep it", p.ID, already.ExistingID)
	case errors.Is(err, store.ErrAlreadySubscribed):
		return Subscription{}, sdk.Conflict("you already have an active subscription to %s; subscription.list shows it", p.ID)
	case errors.Is(err, store.ErrNotFound):
		// The plan went away between the look-up and the insert.
		return Subscription{}, sdk.NotFound("no plan with id %s; subscription.plans lists the plans", shortQuote(p.ID))
	case err != nil:
		return Subscription{}, fmt.Errorf("subscribe %s to %s: %w", user, p.ID, err)
	}
	s.log.Info("subscription started", "subscription", sub.ID, "plan", p.ID, "user", user, "call_id", call.ID)
	s.publish(ctx, sdk.Event{
		Type: "subscription.started", Entity: "subscription", ID: sub.ID, UserID: user,
		Data: startedData{PlanID: p.ID, StartedAt: wireTime(sub.StartedAt), CurrentPeriodEnd: wireTime(sub.CurrentPeriodEnd)},
	})
	return toWire(sub, now), nil
}

// Cancel cancels one of the caller's subscriptions, at the end of its
// period unless asked to end it now. Cancelling one that is already
// cancelled (or already set to end, when asked for the period end) changes
// nothing and is not an error, so a retried call is safe.
func (s *Service) Cancel(ctx context.Context, call sdk.Call, in CancelIn) (CancelOut, error) {
	sub, err := s.subscription(ctx, in.ID)
	if err != nil {
		return CancelOut{}, err
	}
	immediate := in.AtPeriodEnd != nil && !*in.AtPeriodEnd
	now := s.clock()
	// A shortcut for what the store's conditional update would also
	// refuse; racing cancels are settled there, not here.
	if sub.StatusAt(now) == store.StatusCancelled || (!immediate && !sub.CancelAt.IsZero()) {
		return cancelOut(sub, now, false), nil
	}
	sub, changed, err := s.store.Cancel(ctx, sub.ID, store.Cancellation{Now: now, Immediate: immediate, PeriodEnd: sub.PeriodEndAt(now)})
	if errors.Is(err, store.ErrNotFound) {
		return CancelOut{}, sdk.NotFound("no subscription with id %s", shortQuote(in.ID))
	}
	if err != nil {
		return CancelOut{}, fmt.Errorf("cancel subscription %s: %w", in.ID, err)
	}
	if changed {
		s.log.Info("subscription cancelled", "subscription", sub.ID, "plan", sub.PlanID, "immediate", immediate,
			"cancel_at", wireTime(sub.CancelAt), "by", call.Principal.UserID, "call_id", call.ID)
		s.publish(ctx, sdk.Event{
			Type: "subscription.cancelled", Entity: "subscription", ID: sub.ID, UserID: sub.UserID,
			Data: cancelledData{PlanID: sub.PlanID, CancelAt: wireTime(sub.CancelAt), Immediate: immediate},
		})
	}
	return cancelOut(sub, now, changed), nil
}

func cancelOut(sub store.Subscription, now time.Time, changed bool) CancelOut {
	w := toWire(sub, now)
	out := CancelOut{
		ID: w.ID, PlanID: w.PlanID, Status: w.Status, StartedAt: w.StartedAt,
		CurrentPeriodEnd: w.CurrentPeriodEnd, CancelAt: w.CancelAt, AlreadyCancelled: !changed,
	}
	switch {
	case !changed:
		out.Message = fmt.Sprintf("subscription %s to %s was already cancelled; it ends at %s (now %s); nothing changed", sub.ID, sub.PlanID, w.CancelAt, w.Status)
	case w.Status == string(store.StatusCancelled):
		out.Message = fmt.Sprintf("subscription %s to %s is cancelled as of %s", sub.ID, sub.PlanID, w.CancelAt)
	default:
		out.Message = fmt.Sprintf("subscription %s to %s will end at %s, the end of the paid period; it stays active until then", sub.ID, sub.PlanID, w.CancelAt)
	}
	return out
}
