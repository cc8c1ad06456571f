package subscription

// The capabilities' inputs and outputs. Their JSON Schemas, inferred by the
// SDK, are what agents see: the jsonschema tags are written for them. The
// capgate tags bound every input to what its real values can be, so the
// host refuses anything longer before the plugin runs:
//
//   - a plan id has at most 63 characters (store.Plan.Validate);
//   - a subscription id has 16 ("sub_" and 12, newSubscriptionID): 32
//     leaves near misses to the plugin's own message, which says what ids
//     look like;
//   - a status is active or cancelled: 16 leaves misspellings to the
//     plugin's message, which names both.

// PlansIn is subscription.plans' input: it takes no arguments.
type PlansIn struct{}

// Plan is a plan of the catalogue as agents see it.
type Plan struct {
	ID          string `json:"id" jsonschema:"plan id, e.g. plus-monthly; pass it as plan_id to subscription.subscribe"`
	Name        string `json:"name"`
	Description string `json:"description"`
	PriceCents  int    `json:"price_cents" jsonschema:"price per period in the currency's minor unit (cents)"`
	Currency    string `json:"currency" jsonschema:"ISO 4217 code, e.g. EUR"`
	Period      string `json:"period" jsonschema:"month or year: how often it renews"`
}

// PlansOut is subscription.plans' output.
type PlansOut struct {
	Plans []Plan `json:"plans" jsonschema:"every plan, ordered by id"`
}

// ListIn is subscription.list's input.
type ListIn struct {
	Status string `json:"status,omitempty" capgate:"maxLength=16" jsonschema:"active or cancelled; both when omitted"`
}

// Subscription is a subscription as agents see it.
type Subscription struct {
	ID               string `json:"id" jsonschema:"subscription id, sub_ followed by 12 characters"`
	PlanID           string `json:"plan_id"`
	Status           string `json:"status" jsonschema:"active (also while set to end at cancel_at) or cancelled"`
	StartedAt        string `json:"started_at" jsonschema:"RFC 3339 UTC"`
	CurrentPeriodEnd string `json:"current_period_end" jsonschema:"end of the current (or last) period, RFC 3339 UTC; an active subscription without cancel_at renews then"`
	CancelAt         string `json:"cancel_at,omitempty" jsonschema:"when it ends or ended, RFC 3339 UTC; absent while it renews"`
}

// ListOut is subscription.list's output.
type ListOut struct {
	Subscriptions []Subscription `json:"subscriptions" jsonschema:"the caller's subscriptions, ordered by start"`
}

// IDIn names one subscription: subscription.get's input.
type IDIn struct {
	ID string `json:"id" capgate:"maxLength=32" jsonschema:"subscription id, as subscription.subscribe or subscription.list returned it"`
}

// SubscribeIn is subscription.subscribe's input.
type SubscribeIn struct {
	PlanID string `json:"plan_id" capgate:"maxLength=63" jsonschema:"plan id from subscription.plans"`
}

// CancelIn is subscription.cancel's input.
type CancelIn struct {
	ID string `json:"id" capgate:"maxLength=32" jsonschema:"subscription id, as subscription.subscribe or subscription.list returned it"`
	// A pointer, so that an omitted field is told apart from false.
	AtPeriodEnd *bool `json:"at_period_end,omitempty" jsonschema:"true (the default): it stays active until the end of the paid period, then ends; false: it ends now"`
}

// CancelOut is subscription.cancel's output: the subscription, now
// cancelled or set to end.
type CancelOut struct {
	ID               string `json:"id"`
	PlanID           string `json:"plan_id"`
	Status           string `json:"status" jsonschema:"active while set to end at cancel_at; cancelled once ended"`
	StartedAt        string `json:"started_at" jsonschema:"RFC 3339 UTC"`
	CurrentPeriodEnd string `json:"current_period_end" jsonschema:"RFC 3339 UTC"`
	CancelAt         string `json:"cancel_at" jsonschema:"when it ends or ended, RFC 3339 UTC"`
	AlreadyCancelled bool   `json:"already_cancelled" jsonschema:"true when the subscription had been cancelled (or set to end) before this call, which then changed nothing"`
	Message          string `json:"message"`
}
