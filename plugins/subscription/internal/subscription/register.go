package subscription

import (
	"context"
	"fmt"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/postgres"
	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// Permissions the capabilities require.
const (
	PermRead      = "subscription.read"
	PermWrite     = "subscription.write"
	PermCatalogue = "catalogue.read"
)

// EntityPlan is the catalogue entity type of a plan.
const EntityPlan = "subscription.plan"

// DBFile is the database's file name inside the plugin's data directory.
const DBFile = "subscription.db"

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
		return fmt.Errorf("subscription config: seed %q is unknown; use %q or leave it out", c.Seed, SeedDemo)
	}
	if _, err := sqlstore.Engine(c.DSN); err != nil {
		return fmt.Errorf("subscription config: %w", err)
	}
	return nil
}

// openStore opens the store cfg.DSN names; see Config.DSN.
func openStore(ctx context.Context, cfg Config, env sdk.Env) (store.Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "subscription", DSN: cfg.DSN, DataDir: env.DataDir, File: DBFile},
		func(ctx context.Context, path string) (store.Store, error) { return sqlite.Open(ctx, path, env.Logger) },
		func(ctx context.Context, dsn string) (store.Store, error) { return postgres.Open(ctx, dsn, env.Logger) })
}

// Option adjusts Register.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the service read the time from now instead of time.Now,
// so tests can move past period ends and renewals.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// Register adds the subscription capabilities to p, all in p's pack (its
// name, subscription, unless p.SetPack chose another). The service behind
// them is built when the host configures p: the store opens then, on the
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
				return nil, fmt.Errorf("subscription: %w", err)
			}
		}
		p.OnClose(st.Close)
		return s, nil
	})

	// Plans are a public catalogue and searchable; subscriptions are not,
	// as they belong to a person. The Service is the catalogue's source.
	p.ProvideEntity(sdk.Entity{
		Name:        EntityPlan,
		Description: "a subscription plan: what it includes, its price and period; subscribe with subscription.subscribe",
		Version:     PlanDocVersion,
		Source:      svc,
	})

	sdk.Add(p, sdk.Tool[PlansIn, PlansOut]{
		Name:        "subscription.plans",
		Description: "List the subscription plans with what they include, their price (in cents) and period (month or year).",
		Kind:        sdk.Read, Permission: PermCatalogue,
		Handler: sdk.Method(svc, (*Service).Plans),
	})
	sdk.Add(p, sdk.Tool[ListIn, ListOut]{
		Name:        "subscription.list",
		Description: "List your own subscriptions, ordered by start, optionally only active or only cancelled ones.",
		Kind:        sdk.Read, Permission: PermRead,
		Handler: sdk.Method(svc, (*Service).List),
	})
	sdk.Add(p, sdk.Tool[IDIn, Subscription]{
		Name:        "subscription.get",
		Description: "Show one of your subscriptions by id.",
		Kind:        sdk.Read, Permission: PermRead,
		Handler: sdk.Method(svc, (*Service).Get),
		Owner:   sdk.Method(svc, (*Service).Owner),
	})
	sdk.Add(p, sdk.Tool[SubscribeIn, Subscription]{
		Name: "subscription.subscribe",
		Description: "Subscribe yourself to a plan from subscription.plans; it starts now and renews every period until cancelled. " +
			"You can hold one active subscription per plan: a second is a conflict naming the one you have.",
		Kind: sdk.Action, Permission: PermWrite,
		Handler: sdk.Method(svc, (*Service).Subscribe),
	})
	sdk.Add(p, sdk.Tool[CancelIn, CancelOut]{
		Name: "subscription.cancel",
		Description: "Cancel one of your subscriptions. By default it stays active until the end of the paid period and then ends " +
			"(at_period_end true); at_period_end false ends it now. Cancelling again changes nothing and says so.",
		Kind: sdk.Action, Permission: PermWrite, Destructive: true,
		Handler: sdk.Method(svc, (*Service).Cancel),
		Owner:   sdk.Method(svc, (*Service).CancelOwner),
	})
}
