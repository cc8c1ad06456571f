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

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/migrations"
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
	resourcesPkey    = "resources_pkey"
	bookingsPkey     = "bookings_pkey"
	oneActivePerSlot = "bookings_one_active_per_slot"
	bookingsResource = "bookings_resource_id_fkey"
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

const resourceCols = `id, name, kind, description, location, capacity, slot_minutes, opens_minute, closes_minute`

func scanResource(row pgx.Row) (store.Resource, error) {
	var r store.Resource
	err := row.Scan(&r.ID, &r.Name, &r.Kind, &r.Description, &r.Location, &r.Capacity, &r.SlotMinutes, &r.OpensMinute, &r.ClosesMinute)
	return r, err
}

// Resources implements store.Store.
func (s *Store) Resources(ctx context.Context) ([]store.Resource, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+resourceCols+` FROM resources ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	defer rows.Close()
	var out []store.Resource
	for rows.Next() {
		r, err := scanResource(rows)
		if err != nil {
			return nil, fmt.Errorf("list resources: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	return out, nil
}

// Resource implements store.Store.
func (s *Store) Resource(ctx context.Context, id string) (store.Resource, error) {
	r, err := scanResource(s.pool.QueryRow(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Resource{}, fmt.Errorf("resource %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Resource{}, fmt.Errorf("get resource %q: %w", id, err)
	}
	return r, nil
}

// execer is what the pool and a transaction share, so inserts run alone or
// inside a seed's transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateResource implements store.Store.
func (s *Store) CreateResource(ctx context.Context, r store.Resource) error {
	return insertResource(ctx, s.pool, r)
}

func insertResource(ctx context.Context, db execer, r store.Resource) error {
	if err := r.Validate(); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO resources (`+resourceCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		r.ID, r.Name, r.Kind, r.Description, r.Location, r.Capacity, r.SlotMinutes, r.OpensMinute, r.ClosesMinute)
	if err == nil {
		return nil
	}
	switch code, constraint := sqlstore.PGError(err); {
	case code == codeUniqueViolation && constraint == resourcesPkey:
		return fmt.Errorf("create resource %q: %w", r.ID, store.ErrDuplicateID)
	case code == codeCheckViolation || code == codeNotNullViolation:
		return fmt.Errorf("create resource %q: %w: %v", r.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create resource %q: %w", r.ID, err)
	}
}

const bookingCols = `id, resource_id, user_id, starts_at, ends_at, status, created_at, cancelled_at`

func scanBooking(row pgx.Row) (store.Booking, error) {
	var (
		b                   store.Booking
		status              string
		start, end, created time.Time
		cancelled           *time.Time
	)
	if err := row.Scan(&b.ID, &b.ResourceID, &b.UserID, &start, &end, &status, &created, &cancelled); err != nil {
		return store.Booking{}, err
	}
	b.Status = store.Status(status)
	b.Start, b.End, b.CreatedAt = start.UTC(), end.UTC(), created.UTC()
	if cancelled != nil {
		b.CancelledAt = cancelled.UTC()
	}
	return b, nil
}

// CreateBooking implements store.Store.
func (s *Store) CreateBooking(ctx context.Context, b store.Booking) error {
	return insertBooking(ctx, s.pool, b)
}

func insertBooking(ctx context.Context, db execer, b store.Booking) error {
	if err := b.Validate(); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO bookings (`+bookingCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
		b.ID, b.ResourceID, b.UserID, sqlstore.PGTime(b.Start), sqlstore.PGTime(b.End), string(b.Status), sqlstore.PGTime(b.CreatedAt))
	if err == nil {
		return nil
	}
	switch code, constraint := sqlstore.PGError(err); {
	case code == codeUniqueViolation && constraint == bookingsPkey:
		return fmt.Errorf("create booking %s: %w", b.ID, store.ErrDuplicateID)
	case code == codeUniqueViolation && constraint == oneActivePerSlot:
		return fmt.Errorf("book %s at %s: %w", b.ResourceID, sqlstore.PGTime(b.Start).Format(time.RFC3339), store.ErrSlotTaken)
	case code == codeForeignKeyViolation && constraint == bookingsResource:
		return fmt.Errorf("resource %q: %w", b.ResourceID, store.ErrNotFound)
	case code == codeCheckViolation || code == codeNotNullViolation:
		return fmt.Errorf("create booking %s: %w: %v", b.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create booking %s: %w", b.ID, err)
	}
}

// Booking implements store.Store.
func (s *Store) Booking(ctx context.Context, id string) (store.Booking, error) {
	b, err := scanBooking(s.pool.QueryRow(ctx, `SELECT `+bookingCols+` FROM bookings WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Booking{}, fmt.Errorf("booking %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Booking{}, fmt.Errorf("get booking %q: %w", id, err)
	}
	return b, nil
}

// ListBookings implements store.Store.
func (s *Store) ListBookings(ctx context.Context, userID string, f store.ListFilter) ([]store.Booking, error) {
	q := `SELECT ` + bookingCols + ` FROM bookings WHERE user_id = $1`
	args := []any{userID}
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, fmt.Errorf("list bookings: %w: unknown status %q", store.ErrInvalid, f.Status)
		}
		args = append(args, string(f.Status))
		q += fmt.Sprintf(` AND status = $%d`, len(args))
	}
	q += ` ORDER BY starts_at, id`
	if f.Limit < 0 {
		return nil, fmt.Errorf("list bookings: %w: negative limit %d", store.ErrInvalid, f.Limit)
	}
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(` LIMIT $%d`, len(args))
	}
	return s.queryBookings(ctx, "list bookings of "+userID, q, args...)
}

// ActiveBookings implements store.Store.
func (s *Store) ActiveBookings(ctx context.Context, resourceID string, from, to time.Time) ([]store.Booking, error) {
	return s.queryBookings(ctx, "list active bookings of "+resourceID,
		`SELECT `+bookingCols+` FROM bookings
		 WHERE resource_id = $1 AND status = 'active' AND starts_at >= $2 AND starts_at < $3
		 ORDER BY starts_at`,
		resourceID, sqlstore.PGTime(from), sqlstore.PGTime(to))
}

func (s *Store) queryBookings(ctx context.Context, what, q string, args ...any) ([]store.Booking, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []store.Booking
	for rows.Next() {
		b, err := scanBooking(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// CancelBooking implements store.Store. The UPDATE only matches an active
// row; a concurrent UPDATE of the same row waits for this one to commit and
// then re-checks status, so of racing cancels exactly one changes it and
// the others read back a booking that is already cancelled.
func (s *Store) CancelBooking(ctx context.Context, id string, at time.Time) (store.Booking, bool, error) {
	if at.IsZero() {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: %w: cancel time is unset", id, store.ErrInvalid)
	}
	b, err := scanBooking(s.pool.QueryRow(ctx,
		`UPDATE bookings SET status = 'cancelled', cancelled_at = $1 WHERE id = $2 AND status = 'active'
		 RETURNING `+bookingCols, sqlstore.PGTime(at), id))
	if err == nil {
		return b, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: %w", id, err)
	}
	// Nothing active to cancel: unknown, or cancelled already (a booking
	// never becomes active again, so this read cannot disagree).
	b, err = s.Booking(ctx, id)
	if err != nil {
		return store.Booking{}, false, fmt.Errorf("cancel booking: %w", err)
	}
	return b, false, nil
}

// Seed implements store.Store.
func (s *Store) Seed(ctx context.Context, name string, at time.Time, resources []store.Resource, bookings []store.Booking) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("seed: %w: empty seed name", store.ErrInvalid)
	}
	return sqlstore.SeedPostgres(ctx, s.pool, sqlstore.Seed{Name: name, Table: "seeds", Guard: "resources", AppliedAt: sqlstore.PGTime(at)},
		func(tx pgx.Tx) error { return insertSeed(ctx, tx, resources, bookings) })
}

// insertSeed writes a seed's rows.
func insertSeed(ctx context.Context, db execer, resources []store.Resource, bookings []store.Booking) error {
	for _, r := range resources {
		if err := insertResource(ctx, db, r); err != nil {
			return err
		}
	}
	for _, b := range bookings {
		if err := insertBooking(ctx, db, b); err != nil {
			return err
		}
	}
	return nil
}
