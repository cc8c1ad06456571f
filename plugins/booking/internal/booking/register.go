package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/postgres"
	"github.com/capgate/capgate/plugins/booking/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// Permissions the capabilities require.
const (
	PermRead      = "booking.read"
	PermWrite     = "booking.write"
	PermCatalogue = "catalogue.read"
)

// EntityResource is the catalogue entity type of a bookable resource.
const EntityResource = "booking.resource"

// DBFile is the database's file name inside the plugin's data directory.
const DBFile = "booking.db"

// Config is the plugin's config block.
type Config struct {
	// Seed names data to load into an empty database on first start:
	// "demo", or empty for none.
	Seed string `json:"seed"`
	// DSN chooses the database: empty for SQLite in the data directory
	// (DBFile), or a postgres:// or postgresql:// URL for PostgreSQL, which
	// several replicas of the plugin may share.
	DSN string `json:"dsn"`
}

// Check refuses a block the plugin could not start with, opening nothing:
// the SDK runs it before the service is built, and capgate validate runs
// it alone.
func (c Config) Check() error {
	if c.Seed != "" && c.Seed != SeedDemo {
		return fmt.Errorf("booking config: seed %q is unknown; use %q or leave it out", c.Seed, SeedDemo)
	}
	if _, err := sqlstore.Engine(c.DSN); err != nil {
		return fmt.Errorf("booking config: %w", err)
	}
	return nil
}

// openStore opens the store cfg.DSN names; see Config.DSN.
func openStore(ctx context.Context, cfg Config, env sdk.Env) (store.Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "booking", DSN: cfg.DSN, DataDir: env.DataDir, File: DBFile},
		func(ctx context.Context, path string) (store.Store, error) { return sqlite.Open(ctx, path, env.Logger) },
		func(ctx context.Context, dsn string) (store.Store, error) { return postgres.Open(ctx, dsn, env.Logger) })
}

// Option adjusts Register.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the service read the time from now instead of time.Now,
// so tests can place slots in the past or future of a fixed instant.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Register adds the booking capabilities to p, all in p's pack (its
// name, booking, unless p.SetPack chose another). The service behind them
// is built when the host configures p: the store opens then, on the
// database the dsn config key names, by default SQLite in the data
// directory the host hands over.
func Register(p *sdk.Plugin, opts ...Option) {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	svc := sdk.Configure(p, func(ctx context.Context, env sdk.Env, cfg Config) (*Service, error) {
		st, err := openStore(ctx, cfg, env)
		if err != nil {
			return nil, err
		}
		s := NewService(namedFailures{st}, o.now, env.Logger)
		s.SetPublisher(env.Publish)
		if cfg.Seed != "" {
			if _, err := s.Seed(ctx, cfg.Seed); err != nil {
				st.Close()
				return nil, fmt.Errorf("booking: %w", err)
			}
		}
		p.OnClose(st.Close)
		return s, nil
	})

	// The bookable catalogue is searchable; individual bookings are not, as
	// they belong to a person. The Service is the catalogue's source.
	p.ProvideEntity(sdk.Entity{
		Name:        EntityResource,
		Description: "a bookable resource: room, desk, court, studio, …; book it with booking.create",
		Version:     ResourceDocVersion,
		Source:      svc,
	})

	sdk.Add(p, sdk.Tool[AddResourceIn, Resource]{
		Name: "booking.add_resource",
		Description: "Add a bookable resource to the catalogue (operators only). It becomes searchable with " +
			"platform.search and bookable with booking.create.",
		Kind: sdk.Action, Permission: PermAdmin,
		Handler: sdk.Method(svc, (*Service).AddResource),
	})
	sdk.Add(p, sdk.Tool[ResourcesIn, ResourcesOut]{
		Name:        "booking.resources",
		Description: "List the bookable resources (rooms, desks, courts, …) with their slot length and opening hours (UTC).",
		Kind:        sdk.Read, Permission: PermCatalogue,
		Handler: sdk.Method(svc, (*Service).Resources),
	})
	sdk.Add(p, sdk.Tool[AvailabilityIn, AvailabilityOut]{
		Name: "booking.availability",
		Description: "List the free future slots of one resource over 1 to 14 whole days (UTC), starting today or on a given date. " +
			"Pass a slot's start to booking.create to book it.",
		Kind: sdk.Read, Permission: PermCatalogue,
		Handler: sdk.Method(svc, (*Service).Availability),
	})
	sdk.Add(p, sdk.Tool[ListIn, ListOut]{
		Name:        "booking.list",
		Description: "List your own bookings, ordered by start, optionally only active or only cancelled ones.",
		Kind:        sdk.Read, Permission: PermRead,
		Handler: sdk.Method(svc, (*Service).List),
	})
	owner := sdk.Method(svc, (*Service).Owner)
	sdk.Add(p, sdk.Tool[IDIn, Booking]{
		Name:        "booking.get",
		Description: "Show one of your bookings by id.",
		Kind:        sdk.Read, Permission: PermRead,
		Handler: sdk.Method(svc, (*Service).Get),
		Owner:   owner,
	})
	sdk.Add(p, sdk.Tool[CreateIn, Booking]{
		Name: "booking.create",
		Description: "Book one slot of a resource for yourself. start must be the start of a free future slot, " +
			"as booking.availability lists them; a slot someone else booked first is a conflict.",
		Kind: sdk.Action, Permission: PermWrite,
		Handler: sdk.Method(svc, (*Service).Create),
	})
	sdk.Add(p, sdk.Tool[IDIn, CancelOut]{
		Name: "booking.cancel",
		Description: "Cancel one of your bookings that has not started yet; the slot becomes free for others. " +
			"Cancelling an already cancelled booking changes nothing and says so.",
		Kind: sdk.Action, Permission: PermWrite, Destructive: true,
		Handler: sdk.Method(svc, (*Service).Cancel),
		Owner:   owner,
	})
	sdk.AddPrompt(p, sdk.Prompt[PlanVisitIn]{
		Name:  "booking.plan_visit",
		Title: "Plan a visit",
		Description: "Plan the visit of one of your bookings: where the resource is, when to leave, what to prepare. " +
			"The booking argument completes from your own active bookings.",
		Permission: PermRead,
		Render:     sdk.Method(svc, (*Service).PlanVisit),
		Complete: map[string]sdk.Completer{"booking": func(ctx context.Context, call sdk.Call, partial string, given map[string]string) ([]string, error) {
			s, err := svc.Get()
			if err != nil {
				return nil, err
			}
			return s.CompleteBooking(ctx, call, partial, given)
		}},
	})
}
