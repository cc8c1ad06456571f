package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/migrations"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// SQLSTATE codes this store maps.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeNotNullViolation    = "23502"
)

// Constraint names from migrations/postgres (PostgreSQL's defaults for the
// keys and the foreign key).
const (
	plansPkey         = "plans_pkey"
	subscriptionsPkey = "subscriptions_pkey"
	oneActivePerPlan  = "subscriptions_one_active_per_plan"
	subscriptionsPlan = "subscriptions_plan_id_fkey"
)

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at dsn (a pgx connection string), checks
// that it answers, and migrates it to the latest schema. Applied migrations
// are logged to log (nil: discard). Errors never contain the password.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Store, error) {
	pool, err := sqlstore.OpenPostgres(ctx, dsn, migrations.Schema(log))
	if err != nil {
		return nil, err
	}
	return &Store{pool: pool}, nil
}

// Pool exposes the pool for tests and diagnostics in this plugin.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// execer is what the pool and a transaction share, so inserts run alone or
// inside a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const planCols = `id, name, description, price_cents, currency, period`

func scanPlan(row pgx.Row) (store.Plan, error) {
	var (
		p      store.Plan
		period string
	)
	err := row.Scan(&p.ID, &p.Name, &p.Description, &p.PriceCents, &p.Currency, &period)
	p.Period = store.Period(period)
	return p, err
}

// Plans implements store.Store.
func (s *Store) Plans(ctx context.Context) ([]store.Plan, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+planCols+` FROM plans ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	defer rows.Close()
	var out []store.Plan
	for rows.Next() {
		p, err := scanPlan(rows)
		if err != nil {
			return nil, fmt.Errorf("list plans: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return out, nil
}

// Plan implements store.Store.
func (s *Store) Plan(ctx context.Context, id string) (store.Plan, error) {
	p, err := scanPlan(s.pool.QueryRow(ctx, `SELECT `+planCols+` FROM plans WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Plan{}, fmt.Errorf("plan %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Plan{}, fmt.Errorf("get plan %q: %w", id, err)
	}
	return p, nil
}

// CreatePlan implements store.Store.
func (s *Store) CreatePlan(ctx context.Context, p store.Plan) error {
	return insertPlan(ctx, s.pool, p)
}

func insertPlan(ctx context.Context, db execer, p store.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO plans (`+planCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.ID, p.Name, p.Description, p.PriceCents, p.Currency, string(p.Period))
	if err == nil {
		return nil
	}
	switch code, constraint := sqlstore.PGError(err); {
	case code == codeUniqueViolation && constraint == plansPkey:
		return fmt.Errorf("create plan %q: %w", p.ID, store.ErrDuplicateID)
	case code == codeCheckViolation || code == codeNotNullViolation:
		return fmt.Errorf("create plan %q: %w: %v", p.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create plan %q: %w", p.ID, err)
	}
}

const subCols = `id, plan_id, user_id, period, status, started_at, current_period_end, cancel_at`

func scanSubscription(row pgx.Row) (store.Subscription, error) {
	var (
		sub            store.Subscription
		period, status string
		started, pend  time.Time
		cancelAt       *time.Time
	)
	if err := row.Scan(&sub.ID, &sub.PlanID, &sub.UserID, &period, &status, &started, &pend, &cancelAt); err != nil {
		return store.Subscription{}, err
	}
	sub.Period, sub.Status = store.Period(period), store.Status(status)
	sub.StartedAt, sub.CurrentPeriodEnd = started.UTC(), pend.UTC()
	if cancelAt != nil {
		sub.CancelAt = cancelAt.UTC()
	}
	return sub, nil
}

// Subscribe implements store.Store. The insert runs in a transaction with
// the closing of a lapsed subscription to the same plan, so the partial
// unique index sees only subscriptions that still run. Of racing
// subscribes, the later insert waits on the index entry of the earlier one
// and fails once that commits; a racing close of the same lapsed row waits
// on its row lock and then no longer matches.
func (s *Store) Subscribe(ctx context.Context, sub store.Subscription) error {
	if err := sub.Validate(); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("subscribe %s to %q: begin: %w", sub.UserID, sub.PlanID, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx,
		`UPDATE subscriptions SET status = 'cancelled'
		 WHERE user_id = $1 AND plan_id = $2 AND status = 'active' AND cancel_at IS NOT NULL AND cancel_at <= $3`,
		sub.UserID, sub.PlanID, sqlstore.PGTime(sub.StartedAt)); err != nil {
		return fmt.Errorf("subscribe %s to %q: close a lapsed subscription: %w", sub.UserID, sub.PlanID, err)
	}
	if err := insertSubscription(ctx, tx, sub); err != nil {
		if errors.Is(err, store.ErrAlreadySubscribed) {
			// Name the winner, outside the transaction: the failed
			// statement aborted it.
			_ = tx.Rollback(ctx)
			return s.alreadySubscribed(ctx, sub, err)
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("subscribe %s to %q: commit: %w", sub.UserID, sub.PlanID, err)
	}
	return nil
}

func (s *Store) alreadySubscribed(ctx context.Context, sub store.Subscription, cause error) error {
	var id string
	err := s.pool.QueryRow(ctx,
		`SELECT id FROM subscriptions WHERE user_id = $1 AND plan_id = $2 AND status = 'active'`,
		sub.UserID, sub.PlanID).Scan(&id)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w (and naming the active subscription failed: %v)", cause, err)
	}
	return fmt.Errorf("subscribe %s to %q: %w", sub.UserID, sub.PlanID, &store.AlreadySubscribedError{ExistingID: id})
}

func insertSubscription(ctx context.Context, db execer, sub store.Subscription) error {
	if err := sub.Validate(); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO subscriptions (`+subCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
		sub.ID, sub.PlanID, sub.UserID, string(sub.Period), string(sub.Status), sqlstore.PGTime(sub.StartedAt), sqlstore.PGTime(sub.CurrentPeriodEnd))
	if err == nil {
		return nil
	}
	switch code, constraint := sqlstore.PGError(err); {
	case code == codeUniqueViolation && constraint == subscriptionsPkey:
		return fmt.Errorf("create subscription %s: %w", sub.ID, store.ErrDuplicateID)
	case code == codeUniqueViolation && constraint == oneActivePerPlan:
		return fmt.Errorf("subscribe %s to %q: %w", sub.UserID, sub.PlanID, store.ErrAlreadySubscribed)
	case code == codeForeignKeyViolation && constraint == subscriptionsPlan:
		return fmt.Errorf("plan %q: %w", sub.PlanID, store.ErrNotFound)
	case code == codeCheckViolation || code == codeNotNullViolation:
		return fmt.Errorf("create subscription %s: %w: %v", sub.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create subscription %s: %w", sub.ID, err)
	}
}

// Subscription implements store.Store.
func (s *Store) Subscription(ctx context.Context, id string) (store.Subscription, error) {
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `SELECT `+subCols+` FROM subscriptions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Subscription{}, fmt.Errorf("subscription %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Subscription{}, fmt.Errorf("get subscription %q: %w", id, err)
	}
	return sub, nil
}

// running is the SQL form of StatusAt(now) == active; $2 is now.
const running = `(status = 'active' AND (cancel_at IS NULL OR cancel_at > $2))`

// ListSubscriptions implements store.Store.
func (s *Store) ListSubscriptions(ctx context.Context, userID string, f store.ListFilter) ([]store.Subscription, error) {
	q := `SELECT ` + subCols + ` FROM subscriptions WHERE user_id = $1`
	args := []any{userID}
	switch f.Status {
	case "":
	case store.StatusActive, store.StatusCancelled:
		if f.Now.IsZero() {
			return nil, fmt.Errorf("list subscriptions: %w: a status filter needs the time", store.ErrInvalid)
		}
		args = append(args, sqlstore.PGTime(f.Now))
		if f.Status == store.StatusActive {
			q += ` AND ` + running
		} else {
			q += ` AND NOT ` + running
		}
	default:
		return nil, fmt.Errorf("list subscriptions: %w: unknown status %q", store.ErrInvalid, f.Status)
	}
	q += ` ORDER BY started_at, id`
	what := "list subscriptions of " + userID
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Subscription
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, sub)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Cancel implements store.Store. The UPDATE only matches a subscription in
// the state the cancel changes; a concurrent UPDATE of the same row waits
// for this one to commit and then re-checks its WHERE, so of racing
// identical cancels exactly one changes it and the others read back the
// record it wrote.
func (s *Store) Cancel(ctx context.Context, id string, c store.Cancellation) (store.Subscription, bool, error) {
	switch {
	case c.Now.IsZero():
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w: cancel time is unset", id, store.ErrInvalid)
	case !c.PeriodEnd.After(c.Now):
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w: period end %s is not after %s", id, store.ErrInvalid, c.PeriodEnd, c.Now)
	}
	var row pgx.Row
	if c.Immediate {
		// current_period_end keeps the end of the period it was cancelled
		// in, or the stored one when that is later (a scheduled end).
		row = s.pool.QueryRow(ctx,
			`UPDATE subscriptions SET status = 'cancelled', cancel_at = $1::timestamptz,
			     current_period_end = CASE WHEN cancel_at IS NULL THEN $3::timestamptz ELSE current_period_end END
			 WHERE id = $4 AND `+running+`
			 RETURNING `+subCols,
			sqlstore.PGTime(c.Now), sqlstore.PGTime(c.Now), sqlstore.PGTime(c.PeriodEnd), id)
	} else {
		row = s.pool.QueryRow(ctx,
			`UPDATE subscriptions SET cancel_at = $1, current_period_end = $1
			 WHERE id = $2 AND status = 'active' AND cancel_at IS NULL
			 RETURNING `+subCols,
			sqlstore.PGTime(c.PeriodEnd), id)
	}
	sub, err := scanSubscription(row)
	if err == nil {
		return sub, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w", id, err)
	}
	// Nothing to change: unknown, or past the state this cancel changes (a
	// subscription never goes back, so this read cannot disagree).
	sub, err = s.Subscription(ctx, id)
	if err != nil {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription: %w", err)
	}
	return sub, false, nil
}

// Seed implements store.Store.
func (s *Store) Seed(ctx context.Context, name string, at time.Time, plans []store.Plan, subs []store.Subscription) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("seed: %w: empty seed name", store.ErrInvalid)
	}
	return sqlstore.SeedPostgres(ctx, s.pool, sqlstore.Seed{Name: name, Table: "subscription_seeds", Guard: "plans", AppliedAt: sqlstore.PGTime(at)},
		func(tx pgx.Tx) error { return insertSeed(ctx, tx, plans, subs) })
}

// insertSeed writes a seed's rows.
func insertSeed(ctx context.Context, db execer, plans []store.Plan, subs []store.Subscription) error {
	for _, p := range plans {
		if err := insertPlan(ctx, db, p); err != nil {
			return err
		}
	}
	for _, sub := range subs {
		if err := insertSubscription(ctx, db, sub); err != nil {
			return err
		}
	}
	return nil
}
