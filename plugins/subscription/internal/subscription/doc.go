// Package subscription is the subscription service behind the subscription
// plugin: the capabilities subscription.plans, subscription.list,
// subscription.get, subscription.subscribe and subscription.cancel, on a
// store.Store.
//
// A subscription is born active and renews at the end of every period of
// its plan (there is no billing here: renewal only moves
// current_period_end on). Cancelling at the period end — the default —
// sets cancel_at to the end of the current period and keeps the status
// "active" until then, so the user keeps what they paid for; from cancel_at
// on it reads "cancelled". Cancelling immediately sets status "cancelled"
// and cancel_at to now. Cancelled subscriptions are kept.
//
// Whether a user already holds a plan is never checked here ahead of the
// write: the store's partial unique index decides, so two racing
// subscribes cannot both win; likewise the store's conditional update
// decides which of racing cancels made the change.
//
// Times on the wire are RFC 3339 UTC, to the second.
//
// Register wires the service into an sdk.Plugin: it reads the plugin's
// config block, opens <data_dir>/subscription.db and seeds the demo data on
// request.
package subscription
