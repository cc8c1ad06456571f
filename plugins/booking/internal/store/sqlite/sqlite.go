package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/plugins/booking/internal/store/migrations"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// sqlstore.TimeLayout is fixed-width RFC 3339 UTC: stored as text it sorts in time
// order, which the range queries rely on.

// Store is a store.Store on one SQLite file.
type Store struct {
	db *sql.DB
	// bookingByID is prepared once: it serves booking.get and every owner
	// check, and parsing its SQL each time cost more than running it.
	bookingByID *sql.Stmt
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database at path and migrates it to
// the latest schema. Applied migrations are logged to log (nil: discard).
func Open(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	db, err := sqlstore.OpenSQLite(ctx, path, migrations.Schema(log))
	if err != nil {
		return nil, err
	}
	byID, err := db.PrepareContext(ctx, `SELECT `+bookingCols+` FROM bookings WHERE id = $1`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("booking database %q: prepare: %w", path, err)
	}
	return &Store{db: db, bookingByID: byID}, nil
}

// DB exposes the handle for tests and diagnostics in this plugin.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error {
	_ = s.bookingByID.Close() // closing the pool below reports any failure that matters
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close booking database: %w", err)
	}
	return nil
}

const resourceCols = `id, name, kind, description, location, capacity, slot_minutes, opens_minute, closes_minute`

type scanner interface{ Scan(dest ...any) error }

func scanResource(row scanner) (store.Resource, error) {
	var r store.Resource
	err := row.Scan(&r.ID, &r.Name, &r.Kind, &r.Description, &r.Location, &r.Capacity, &r.SlotMinutes, &r.OpensMinute, &r.ClosesMinute)
	return r, err
}

// Resources implements store.Store.
func (s *Store) Resources(ctx context.Context) ([]store.Resource, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+resourceCols+` FROM resources ORDER BY id`)
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
	r, err := scanResource(s.db.QueryRowContext(ctx, `SELECT `+resourceCols+` FROM resources WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Resource{}, fmt.Errorf("resource %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Resource{}, fmt.Errorf("get resource %q: %w", id, err)
	}
	return r, nil
}

// execer is what *sql.DB and *sql.Tx share, so inserts run alone or
// inside a seed's transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// CreateResource implements store.Store.
func (s *Store) CreateResource(ctx context.Context, r store.Resource) error {
	return insertResource(ctx, s.db, r)
}

func insertResource(ctx context.Context, db execer, r store.Resource) error {
	if err := r.Validate(); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `INSERT INTO resources (`+resourceCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		r.ID, r.Name, r.Kind, r.Description, r.Location, r.Capacity, r.SlotMinutes, r.OpensMinute, r.ClosesMinute)
	switch sqlstore.SQLiteCode(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("create resource %q: %w", r.ID, err)
		}
		return nil
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("create resource %q: %w", r.ID, store.ErrDuplicateID)
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("create resource %q: %w: %v", r.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create resource %q: %w", r.ID, err)
	}
}

const bookingCols = `id, resource_id, user_id, starts_at, ends_at, status, created_at, cancelled_at`

func scanBooking(row scanner) (store.Booking, error) {
	var (
		b                           store.Booking
		start, end, created, status string
		cancelled                   sql.NullString
	)
	if err := row.Scan(&b.ID, &b.ResourceID, &b.UserID, &start, &end, &status, &created, &cancelled); err != nil {
		return store.Booking{}, err
	}
	b.Status = store.Status(status)
	var err error
	if b.Start, err = sqlstore.ParseTime("starts_at", start); err != nil {
		return store.Booking{}, fmt.Errorf("booking %s: %w", b.ID, err)
	}
	if b.End, err = sqlstore.ParseTime("ends_at", end); err != nil {
		return store.Booking{}, fmt.Errorf("booking %s: %w", b.ID, err)
	}
	if b.CreatedAt, err = sqlstore.ParseTime("created_at", created); err != nil {
		return store.Booking{}, fmt.Errorf("booking %s: %w", b.ID, err)
	}
	if cancelled.Valid {
		if b.CancelledAt, err = sqlstore.ParseTime("cancelled_at", cancelled.String); err != nil {
			return store.Booking{}, fmt.Errorf("booking %s: %w", b.ID, err)
		}
	}
	return b, nil
}

// CreateBooking implements store.Store.
func (s *Store) CreateBooking(ctx context.Context, b store.Booking) error {
	return insertBooking(ctx, s.db, b)
}

func insertBooking(ctx context.Context, db execer, b store.Booking) error {
	if err := b.Validate(); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, `INSERT INTO bookings (`+bookingCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
		b.ID, b.ResourceID, b.UserID, sqlstore.FormatTime(b.Start), sqlstore.FormatTime(b.End), string(b.Status), sqlstore.FormatTime(b.CreatedAt))
	switch sqlstore.SQLiteCode(err) {
	case 0:
		if err != nil {
			return fmt.Errorf("create booking %s: %w", b.ID, err)
		}
		return nil
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("create booking %s: %w", b.ID, store.ErrDuplicateID)
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		// The only UNIQUE besides the key is the one-active-per-slot index.
		return fmt.Errorf("book %s at %s: %w", b.ResourceID, sqlstore.FormatTime(b.Start), store.ErrSlotTaken)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("resource %q: %w", b.ResourceID, store.ErrNotFound)
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL:
		return fmt.Errorf("create booking %s: %w: %v", b.ID, store.ErrInvalid, err)
	default:
		return fmt.Errorf("create booking %s: %w", b.ID, err)
	}
}

// Booking implements store.Store.
func (s *Store) Booking(ctx context.Context, id string) (store.Booking, error) {
	return getBooking(ctx, s.bookingByID, id)
}

func getBooking(ctx context.Context, byID *sql.Stmt, id string) (store.Booking, error) {
	b, err := scanBooking(byID.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
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
		resourceID, sqlstore.FormatTime(from), sqlstore.FormatTime(to))
}

func (s *Store) queryBookings(ctx context.Context, what, q string, args ...any) ([]store.Booking, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
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
// row, so of racing cancels exactly one changes it; the others read back a
// booking that is already cancelled.
func (s *Store) CancelBooking(ctx context.Context, id string, at time.Time) (store.Booking, bool, error) {
	if at.IsZero() {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: %w: cancel time is unset", id, store.ErrInvalid)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: begin: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx,
		`UPDATE bookings SET status = 'cancelled', cancelled_at = $1 WHERE id = $2 AND status = 'active'`,
		sqlstore.FormatTime(at), id)
	if err != nil {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: %w", id, err)
	}
	b, err := getBooking(ctx, tx.StmtContext(ctx, s.bookingByID), id)
	if err != nil {
		return store.Booking{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return store.Booking{}, false, fmt.Errorf("cancel booking %q: commit: %w", id, err)
	}
	return b, n == 1, nil
}

// Seed implements store.Store.
func (s *Store) Seed(ctx context.Context, name string, at time.Time, resources []store.Resource, bookings []store.Booking) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("seed: %w: empty seed name", store.ErrInvalid)
	}
	return sqlstore.SeedSQLite(ctx, s.db, sqlstore.Seed{Name: name, Table: "seeds", Guard: "resources", AppliedAt: sqlstore.FormatTime(at)},
		func(tx *sql.Tx) error { return insertSeed(ctx, tx, resources, bookings) })
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
