package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/migrations"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// sqlstore.TimeLayout is fixed-width RFC 3339 UTC: stored as text it sorts in time
// order, which the comparisons in SQL rely on.

// Store is a store.Store on one SQLite file.
type Store struct {
	db *sql.DB
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and migrates it to
// the latest schema. Applied migrations are logged to log (nil: discard).
func Open(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	db, err := sqlstore.OpenSQLite(ctx, path, migrations.Schema(log))
	if err != nil {
		return nil, err
	}
	return &Store{db: db}, nil
}

// DB exposes the handle for tests and diagnostics in this plugin.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close subscription database: %w", err)
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

// execer is what *sql.DB and *sql.Tx share, so inserts run alone or
// inside a seed's transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const planCols = `id, name, description, price_cents, currency, period`

func scanPlan(row scanner) (store.Plan, error) {
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
	rows, err := s.db.QueryContext(ctx, `SELECT `+planCols+` FROM plans ORDER BY id`)
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
	p, err := scanPlan(s.db.QueryRowContext(ctx, `SELECT `+planCols+` FROM plans WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Plan{}, fmt.Errorf("plan %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Plan{}, fmt.Errorf("get plan %q: %w", id, err)
	}
	return p, nil
}

// CreatePlan implements store.Store.
func (s *Store) CreatePlan(ctx context.Context, p store.Plan) error {
	return insertPlan(ctx, s.db, p)
}

func insertPlan(ctx context.Context, db execer, p store.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `INSERT INTO plans (`+planCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		p.ID, p.Name, p.Description, p.PriceCents, p.Currency, string(p.Period))
	switch sqlstore.SQLiteCode(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("create plan %q: %w", p.ID, err)
		}
		return nil
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("create plan %q: %w", p.ID, store.ErrDuplicateID)
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("create plan %q: %w: %v", p.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create plan %q: %w", p.ID, err)
	}
}

const subCols = `id, plan_id, user_id, period, status, started_at, current_period_end, cancel_at`

func scanSubscription(row scanner) (store.Subscription, error) {
	var (
		sub                           store.Subscription
		period, status, started, pend string
		cancelAt                      sql.NullString
	)
	if err := row.Scan(&sub.ID, &sub.PlanID, &sub.UserID, &period, &status, &started, &pend, &cancelAt); err != nil {
		return store.Subscription{}, err
	}
	sub.Period, sub.Status = store.Period(period), store.Status(status)
	var err error
	if sub.StartedAt, err = sqlstore.ParseTime("started_at", started); err != nil {
		return store.Subscription{}, fmt.Errorf("subscription %s: %w", sub.ID, err)
	}
	if sub.CurrentPeriodEnd, err = sqlstore.ParseTime("current_period_end", pend); err != nil {
		return store.Subscription{}, fmt.Errorf("subscription %s: %w", sub.ID, err)
	}
	if cancelAt.Valid {
		if sub.CancelAt, err = sqlstore.ParseTime("cancel_at", cancelAt.String); err != nil {
			return store.Subscription{}, fmt.Errorf("subscription %s: %w", sub.ID, err)
		}
	}
	return sub, nil
}

// Subscribe implements store.Store. The insert runs in a transaction with
// the closing of a lapsed subscription to the same plan, so the partial
// unique index sees only subscriptions that still run.
func (s *Store) Subscribe(ctx context.Context, sub store.Subscription) error {
	if err := sub.Validate(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("subscribe %s to %q: begin: %w", sub.UserID, sub.PlanID, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx,
		`UPDATE subscriptions SET status = 'cancelled'
		 WHERE user_id = $1 AND plan_id = $2 AND status = 'active' AND cancel_at IS NOT NULL AND cancel_at <= $3`,
		sub.UserID, sub.PlanID, sqlstore.FormatTime(sub.StartedAt)); err != nil {
		return fmt.Errorf("subscribe %s to %q: close a lapsed subscription: %w", sub.UserID, sub.PlanID, err)
	}
	if err := insertSubscription(ctx, tx, sub); err != nil {
		if errors.Is(err, store.ErrAlreadySubscribed) {
			// Name the winner. Read outside the failed transaction: on
			// other engines a failed statement aborts it.
			_ = tx.Rollback()
			return s.alreadySubscribed(ctx, sub, err)
		}
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("subscribe %s to %q: commit: %w", sub.UserID, sub.PlanID, err)
	}
	return nil
}

func (s *Store) alreadySubscribed(ctx context.Context, sub store.Subscription, cause error) error {
	var id string
	err := s.db.QueryRowContext(ctx,
		`SELECT id FROM subscriptions WHERE user_id = $1 AND plan_id = $2 AND status = 'active'`,
		sub.UserID, sub.PlanID).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (and naming the active subscription failed: %v)", cause, err)
	}
	return fmt.Errorf("subscribe %s to %q: %w", sub.UserID, sub.PlanID, &store.AlreadySubscribedError{ExistingID: id})
}

func insertSubscription(ctx context.Context, db execer, sub store.Subscription) error {
	if err := sub.Validate(); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `INSERT INTO subscriptions (`+subCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
		sub.ID, sub.PlanID, sub.UserID, string(sub.Period), string(sub.Status), sqlstore.FormatTime(sub.StartedAt), sqlstore.FormatTime(sub.CurrentPeriodEnd))
	switch sqlstore.SQLiteCode(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("create subscription %s: %w", sub.ID, err)
		}
		return nil
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("create subscription %s: %w", sub.ID, store.ErrDuplicateID)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		// The only UNIQUE besides the key is the one-active-per-plan index.
		return fmt.Errorf("subscribe %s to %q: %w", sub.UserID, sub.PlanID, store.ErrAlreadySubscribed)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("plan %q: %w", sub.PlanID, store.ErrNotFound)
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("create subscription %s: %w: %v", sub.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create subscription %s: %w", sub.ID, err)
	}
}

// Subscription implements store.Store.
func (s *Store) Subscription(ctx context.Context, id string) (store.Subscription, error) {
	return getSubscription(ctx, s.db, id)
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func getSubscription(ctx context.Context, db querier, id string) (store.Subscription, error) {
	sub, err := scanSubscription(db.QueryRowContext(ctx, `SELECT `+subCols+` FROM subscriptions WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
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
		args = append(args, sqlstore.FormatTime(f.Now))
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
	rows, err := s.db.QueryContext(ctx, q, args...)
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
// the state the cancel changes, so of racing identical cancels exactly one
// changes it; the others read back the record it wrote.
func (s *Store) Cancel(ctx context.Context, id string, c store.Cancellation) (store.Subscription, bool, error) {
	switch {
	case c.Now.IsZero():
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w: cancel time is unset", id, store.ErrInvalid)
	case !c.PeriodEnd.After(c.Now):
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w: period end %s is not after %s", id, store.ErrInvalid, c.PeriodEnd, c.Now)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: begin: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	var res sql.Result
	if c.Immediate {
		// current_period_end keeps the end of the period it was cancelled
		// in, or the stored one when that is later (a scheduled end).
		res, err = tx.ExecContext(ctx,
			`UPDATE subscriptions SET status = 'cancelled', cancel_at = $1,
			     current_period_end = CASE WHEN cancel_at IS NULL THEN $3 ELSE current_period_end END
			 WHERE id = $4 AND `+running,
			sqlstore.FormatTime(c.Now), sqlstore.FormatTime(c.Now), sqlstore.FormatTime(c.PeriodEnd), id)
	} else {
		res, err = tx.ExecContext(ctx,
			`UPDATE subscriptions SET cancel_at = $1, current_period_end = $1
			 WHERE id = $2 AND status = 'active' AND cancel_at IS NULL`,
			sqlstore.FormatTime(c.PeriodEnd), id)
	}
	if err != nil {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: %w", id, err)
	}
	sub, err := getSubscription(ctx, tx, id)
	if err != nil {
		return store.Subscription{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return store.Subscription{}, false, fmt.Errorf("cancel subscription %q: commit: %w", id, err)
	}
	return sub, n == 1, nil
}

// Seed implements store.Store.
func (s *Store) Seed(ctx context.Context, name string, at time.Time, plans []store.Plan, subs []store.Subscription) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("seed: %w: empty seed name", store.ErrInvalid)
	}
	return sqlstore.SeedSQLite(ctx, s.db, sqlstore.Seed{Name: name, Table: "subscription_seeds", Guard: "plans", AppliedAt: sqlstore.FormatTime(at)},
		func(tx *sql.Tx) error { return insertSeed(ctx, tx, plans, subs) })
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
