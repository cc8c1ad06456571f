package subscription

import (
	"context"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/sdk"
)

// dbName is how an agent's error names the store while it is away.
const dbName = "the subscription database"

// namedFailures is st with its connection failures named for the agent
// (sdk.DatabaseUnreachable): each method knows whether it writes, which
// decides whether "nothing was changed" is true.
type namedFailures struct{ st store.Store }

var _ store.Store = namedFailures{}

func read[T any](v T, err error) (T, error) { return v, sdk.DatabaseUnreachable(dbName, err, false) }

func (n namedFailures) Plans(ctx context.Context) ([]store.Plan, error) { return read(n.st.Plans(ctx)) }

func (n namedFailures) Plan(ctx context.Context, id string) (store.Plan, error) {
	return read(n.st.Plan(ctx, id))
}

func (n namedFailures) CreatePlan(ctx context.Context, p store.Plan) error {
	return sdk.DatabaseUnreachable(dbName, n.st.CreatePlan(ctx, p), true)
}

func (n namedFailures) Subscribe(ctx context.Context, sub store.Subscription) error {
	return sdk.DatabaseUnreachable(dbName, n.st.Subscribe(ctx, sub), true)
}

func (n namedFailures) Subscription(ctx context.Context, id string) (store.Subscription, error) {
	return read(n.st.Subscription(ctx, id))
}

func (n namedFailures) ListSubscriptions(ctx context.Context, userID string, f store.ListFilter) ([]store.Subscription, error) {
	return read(n.st.ListSubscriptions(ctx, userID, f))
}

func (n namedFailures) Cancel(ctx context.Context, id string, c store.Cancellation) (store.Subscription, bool, error) {
	sub, changed, err := n.st.Cancel(ctx, id, c)
	return sub, changed, sdk.DatabaseUnreachable(dbName, err, true)
}

func (n namedFailures) Seed(ctx context.Context, name string, at time.Time, plans []store.Plan, subs []store.Subscription) (bool, error) {
	applied, err := n.st.Seed(ctx, name, at, plans, subs)
	return applied, sdk.DatabaseUnreachable(dbName, err, true)
}

func (n namedFailures) Close() error { return n.st.Close() }
