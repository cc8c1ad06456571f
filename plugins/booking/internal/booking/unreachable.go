package booking

import (
	"context"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/sdk"
)

// dbName is how an agent's error names the store while it is away.
const dbName = "the booking database"

// namedFailures is st with its connection failures named for the agent
// (sdk.DatabaseUnreachable): each method knows whether it writes, which
// decides whether "nothing was changed" is true.
type namedFailures struct{ st store.Store }

var _ store.Store = namedFailures{}

func read[T any](v T, err error) (T, error) { return v, sdk.DatabaseUnreachable(dbName, err, false) }

func (n namedFailures) Resources(ctx context.Context) ([]store.Resource, error) {
	return read(n.st.Resources(ctx))
}

func (n namedFailures) Resource(ctx context.Context, id string) (store.Resource, error) {
	return read(n.st.Resource(ctx, id))
}

func (n namedFailures) CreateResource(ctx context.Context, r store.Resource) error {
	return sdk.DatabaseUnreachable(dbName, n.st.CreateResource(ctx, r), true)
}

func (n namedFailures) CreateBooking(ctx context.Context, b store.Booking) error {
	return sdk.DatabaseUnreachable(dbName, n.st.CreateBooking(ctx, b), true)
}

func (n namedFailures) Booking(ctx context.Context, id string) (store.Booking, error) {
	return read(n.st.Booking(ctx, id))
}

func (n namedFailures) ListBookings(ctx context.Context, userID string, f store.ListFilter) ([]store.Booking, error) {
	return read(n.st.ListBookings(ctx, userID, f))
}

func (n namedFailures) ActiveBookings(ctx context.Context, resourceID string, from, to time.Time) ([]store.Booking, error) {
	return read(n.st.ActiveBookings(ctx, resourceID, from, to))
}

func (n namedFailures) CancelBooking(ctx context.Context, id string, at time.Time) (store.Booking, bool, error) {
	b, cancelled, err := n.st.CancelBooking(ctx, id, at)
	return b, cancelled, sdk.DatabaseUnreachable(dbName, err, true)
}

func (n namedFailures) Seed(ctx context.Context, name string, at time.Time, resources []store.Resource, bookings []store.Booking) (bool, error) {
	applied, err := n.st.Seed(ctx, name, at, resources, bookings)
	return applied, sdk.DatabaseUnreachable(dbName, err, true)
}

func (n namedFailures) Close() error { return n.st.Close() }
