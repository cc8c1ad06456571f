package idempotency

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// migrationFiles holds the schema history, one directory per
// sqlmigrate.Dialect under migrations/.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// HistoryTable records the store's applied migrations, apart from the
// verticals' tables, so it may share a PostgreSQL schema with them.
const HistoryTable = "capgate_idempotency_migrations"

// FileName is the SQLite file Open keeps in the data directory.
const FileName = "idempotency.db"

// schema is what both engines open their database with.
func schema(log *slog.Logger) (sqlstore.Schema, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return sqlstore.Schema{}, fmt.Errorf("idempotency migrations: %w", err)
	}
	return sqlstore.Schema{Name: "idempotency", Migrations: sub, HistoryTable: HistoryTable, Log: log}, nil
}

// Option configures a Store.
type Option func(*options)

type options struct {
	now func() time.Time
	log *slog.Logger
}

// WithClock makes the store read the time from now instead of time.Now;
// tests move it instead of sleeping.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLog logs applied migrations to log (default: discard).
func WithLog(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// dialect is what differs between the engines: the schema and statements
// are otherwise the same text.
type dialect struct {
	// time encodes an instant for a time column.
	time func(time.Time) any
	// purge deletes at most $2 records expired at $1.
	purge string
}

var (
	sqliteDialect = dialect{
		time: func(t time.Time) any { return sqlstore.FormatTime(t) },
		// SQLite holds the write lock for the whole statement, so the
		// subquery and the delete see the same rows.
		purge: `DELETE FROM idempotency_records WHERE rowid IN
			(SELECT rowid FROM idempotency_records WHERE expires_at <= $1 LIMIT $2)`,
	}
	postgresDialect = dialect{
		time: func(t time.Time) any { return sqlstore.PGTime(t) },
		// SKIP LOCKED: replicas purging at once take different rows instead
		// of queueing on each other. The outer expiry test is re-checked on
		// the latest row version, so a record a concurrent Claim has just
		// renewed survives.
		purge: `DELETE FROM idempotency_records WHERE (user_id, idempotency_key) IN
			(SELECT user_id, idempotency_key FROM idempotency_records WHERE expires_at <= $1
			 LIMIT $2 FOR UPDATE SKIP LOCKED)
			AND expires_at <= $1`,
	}
)

// purgeBatch bounds the records one purge statement deletes, so no purge
// holds SQLite's write lock or many PostgreSQL row locks for long.
const purgeBatch = 1000

// maxClaimTries bounds Claim's loop. Another round happens only when the
// record changed between Claim's two statements (released, purged or
// expired in between), so a second round almost always settles it.
const maxClaimTries = 8

// Store keeps idempotency records in SQLite or PostgreSQL. It is safe for
// concurrent use, and any number of Stores — processes, replicas — may
// share one database: every decision is one statement the database
// settles.
type Store struct {
	db *sql.DB
	// pool is the PostgreSQL pool under db; nil on SQLite.
	pool       *pgxpool.Pool
	d          dialect
	now        func() time.Time
	purgeBatch int
}

func newStore(db *sql.DB, pool *pgxpool.Pool, d dialect, opts []Option) *Store {
	return &Store{db: db, pool: pool, d: d, now: optionsOf(opts).now, purgeBatch: purgeBatch}
}

func optionsOf(opts []Option) options {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Open opens the store dsn selects, as a plugin's dsn key does
// (sqlstore.Engine): empty for SQLite in FileName under dataDir, a
// postgres:// or postgresql:// URL for PostgreSQL. Other values are an
// error that does not echo the dsn; no error holds a password.
func Open(ctx context.Context, dsn, dataDir string, opts ...Option) (*Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "idempotency", DSN: dsn, DataDir: dataDir, File: FileName},
		func(ctx context.Context, path string) (*Store, error) { return OpenSQLite(ctx, path, opts...) },
		func(ctx context.Context, dsn string) (*Store, error) { return OpenPostgres(ctx, dsn, opts...) })
}

// OpenSQLite opens (creating if needed) the SQLite file at path and
// migrates it to the latest schema.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (*Store, error) {
	sch, err := schema(optionsOf(opts).log)
	if err != nil {
		return nil, err
	}
	db, err := sqlstore.OpenSQLite(ctx, path, sch)
	if err != nil {
		return nil, err
	}
	return newStore(db, nil, sqliteDialect, opts), nil
}

// OpenPostgres connects a pool to the database at dsn, checks that it
// answers and migrates it to the latest schema. Errors never contain the
// password.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	sch, err := schema(optionsOf(opts).log)
	if err != nil {
		return nil, err
	}
	pool, err := sqlstore.OpenPostgres(ctx, dsn, sch)
	if err != nil {
		return nil, err
	}
	// One implementation over database/sql serves both engines; this
	// handle borrows the pool's connections.
	return newStore(stdlib.OpenDBFromPool(pool), pool, postgresDialect, opts), nil
}

// Close releases the database.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close idempotency database: %w", err)
	}
	return nil
}

// clock is the store's now as the database keeps it: UTC, whole seconds.
func (s *Store) clock() time.Time { return sqlstore.PGTime(s.now()) }

// claimSQL inserts a pending record, or turns an existing one into a new
// claim when it no longer counts: expired, or pending for the same request
// with its lease run out. Otherwise it changes nothing and returns no row.
// The database serialises statements on one (user, key), so of racing
// claims exactly one returns a row.
const claimSQL = `
INSERT INTO idempotency_records AS r
	(user_id, idempotency_key, capability, fingerprint, state, token, attempt, created_at, expires_at, lease_until)
VALUES ($1, $2, $3, $4, 'pending', $5, 1, $6, $7, $8)
ON CONFLICT (user_id, idempotency_key) DO UPDATE SET
	capability   = excluded.capability,
	fingerprint  = excluded.fingerprint,
	state        = 'pending',
	token        = excluded.token,
	attempt      = CASE WHEN r.expires_at <= excluded.created_at THEN 1 ELSE r.attempt + 1 END,
	created_at   = excluded.created_at,
	expires_at   = excluded.expires_at,
	lease_until  = excluded.lease_until,
	outcome_kind = NULL,
	error_code   = NULL,
	outcome      = NULL
WHERE r.expires_at <= excluded.created_at
   OR (r.state = 'pending' AND r.lease_until <= excluded.created_at
       AND r.capability = excluded.capability AND r.fingerprint = excluded.fingerprint)
RETURNING attempt`

// Claim decides what to do with request r: run it (Claimed, with a Ticket
// for Complete or Release), answer an earlier outcome (Replay), wait for an
// attempt still running (InProgress), or refuse a key reused for another
// request (Mismatch). A record past its expiry counts as absent. A new
// claim holds the key for lease and keeps the record for retention, both
// from now; lease must be at least MinLease and retention at least lease.
//
// A Claim that returns an error may still have claimed the key; nobody
// then holds its ticket, and a retry of the same request takes it over
// once the lease runs out.
func (s *Store) Claim(ctx context.Context, r Request, lease, retention time.Duration) (ClaimResult, error) {
	if err := r.validate(); err != nil {
		return ClaimResult{}, fmt.Errorf("claim: %w", err)
	}
	if err := validateWindow(lease, retention); err != nil {
		return ClaimResult{}, fmt.Errorf("claim: %w", err)
	}
	what := describe(r.UserID, r.Key)
	now := s.clock()
	created, leaseUntil, expires := s.d.time(now), s.d.time(now.Add(lease)), s.d.time(now.Add(retention))
	for range maxClaimTries {
		token := rand.Text()
		var attempt int
		err := s.db.QueryRowContext(ctx, claimSQL,
			r.UserID, r.Key, r.Capability, r.Fingerprint[:], token, created, expires, leaseUntil).Scan(&attempt)
		if err == nil {
			return ClaimResult{Status: Claimed, Ticket: Ticket{UserID: r.UserID, Key: r.Key, Token: token}, Attempt: attempt}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return ClaimResult{}, fmt.Errorf("claim %s: %w", what, err)
		}
		// The record stands: read what it holds. This read decides no
		// write; when the record changed in between, the loop claims again.
		rec, found, err := s.lookup(ctx, r.UserID, r.Key)
		if err != nil {
			return ClaimResult{}, fmt.Errorf("claim %s: %w", what, err)
		}
		if !found {
			continue // released or purged in between
		}
		if res, settled := rec.decide(r, now); settled {
			return res, nil
		}
	}
	return ClaimResult{}, fmt.Errorf("claim %s: the record changed under each of %d tries", what, maxClaimTries)
}

func describe(userID, key string) string {
	return fmt.Sprintf("idempotency key %q of user %q", key, userID)
}

// record is a stored record as Claim needs it.
type record struct {
	capability string
	fp         Fingerprint
	done       bool
	expiresAt  time.Time
	leaseUntil time.Time
	outcome    Outcome
}

// decide answers r from rec at now. It reports false when rec no longer
// counts (expired, or a stale claim of r), so a new claim may take it.
func (rec record) decide(r Request, now time.Time) (ClaimResult, bool) {
	switch {
	case !rec.expiresAt.After(now):
		return ClaimResult{}, false
	case rec.capability != r.Capability:
		return ClaimResult{Status: Mismatch, Differs: DiffersCapability, Capability: rec.capability}, true
	case rec.fp != r.Fingerprint:
		return ClaimResult{Status: Mismatch, Differs: DiffersArguments, Capability: rec.capability}, true
	case rec.done:
		return ClaimResult{Status: Replay, Outcome: rec.outcome}, true
	case rec.leaseUntil.After(now):
		return ClaimResult{Status: InProgress, LeaseUntil: rec.leaseUntil}, true
	}
	return ClaimResult{}, false
}

func (s *Store) lookup(ctx context.Context, userID, key string) (record, bool, error) {
	var (
		rec              record
		fp, payload      []byte
		state            string
		expires, leaseTo any
		kind             sql.NullString
		code             sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, `
		SELECT capability, fingerprint, state, expires_at, lease_until, outcome_kind, error_code, outcome
		FROM idempotency_records WHERE user_id = $1 AND idempotency_key = $2`, userID, key,
	).Scan(&rec.capability, &fp, &state, &expires, &leaseTo, &kind, &code, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, false, nil
	}
	if err != nil {
		return record{}, false, fmt.Errorf("read record: %w", err)
	}
	if len(fp) != len(rec.fp) {
		return record{}, false, fmt.Errorf("stored fingerprint has %d bytes, want %d", len(fp), len(rec.fp))
	}
	copy(rec.fp[:], fp)
	if rec.expiresAt, err = decodeTime("expires_at", expires); err != nil {
		return record{}, false, err
	}
	if rec.leaseUntil, err = decodeTime("lease_until", leaseTo); err != nil {
		return record{}, false, err
	}
	switch state {
	case "pending":
	case "done":
		rec.done = true
		switch OutcomeKind(kind.String) {
		case OutcomeResult:
			rec.outcome = Outcome{Kind: OutcomeResult, Result: payload}
		case OutcomeToolError:
			rec.outcome = Outcome{Kind: OutcomeToolError, Code: uint8(code.Int64), Message: string(payload)}
		default:
			return record{}, false, fmt.Errorf("stored outcome kind %q is unknown", kind.String)
		}
	default:
		return record{}, false, fmt.Errorf("stored state %q is unknown", state)
	}
	return rec, true, nil
}

// decodeTime reads a time column of either engine: text on SQLite, a
// time.Time from PostgreSQL, nil for NULL.
func decodeTime(col string, v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return v.UTC(), nil
	case string:
		return sqlstore.ParseTime(col, v)
	case []byte:
		return sqlstore.ParseTime(col, string(v))
	}
	return time.Time{}, fmt.Errorf("stored %s has unexpected type %T", col, v)
}

// Complete records the outcome of the claim t holds; later claims of the
// same request replay it until the record expires. It returns ErrNotHeld
// when t no longer holds the claim (nothing is written), ErrInvalid for a
// malformed outcome and ErrOutcomeTooLarge for one over MaxOutcomeSize; in
// those two cases the claim is still held, and the caller chooses: Complete
// with an outcome that fits (say, a tool error telling that the answer was
// too large to keep), or Release, so that a retry runs the action again.
func (s *Store) Complete(ctx context.Context, t Ticket, o Outcome) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if err := o.validate(); err != nil {
		return fmt.Errorf("complete %s: %w", describe(t.UserID, t.Key), err)
	}
	var (
		code    any
		payload []byte
	)
	switch o.Kind {
	case OutcomeResult:
		payload = o.Result
	case OutcomeToolError:
		code = int64(o.Code)
		if o.Message != "" {
			payload = []byte(o.Message)
		}
	}
	res, err := s.db.ExecContext(ctx, `
		UPDATE idempotency_records
		SET state = 'done', lease_until = NULL, outcome_kind = $4, error_code = $5, outcome = $6
		WHERE user_id = $1 AND idempotency_key = $2 AND token = $3 AND state = 'pending'`,
		t.UserID, t.Key, t.Token, string(o.Kind), code, payload)
	return held(res, err, "complete "+describe(t.UserID, t.Key))
}

// Release gives up the claim t holds and frees the key: the next claim of
// it runs the action. Release only when the action ran nothing. It returns
// ErrNotHeld when t no longer holds the claim.
func (s *Store) Release(ctx context.Context, t Ticket) error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `
		DELETE FROM idempotency_records
		WHERE user_id = $1 AND idempotency_key = $2 AND token = $3 AND state = 'pending'`,
		t.UserID, t.Key, t.Token)
	return held(res, err, "release "+describe(t.UserID, t.Key))
}

// held turns the result of a ticket's statement into its error.
func held(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotHeld)
	}
	return nil
}

// Purge deletes the records expired at now and returns how many. Expired
// records already count as absent, so Purge only reclaims space; it runs
// in small batches and replicas may run it at once. Pass the current time:
// a now ahead of the claimers' clocks deletes records they still hold.
func (s *Store) Purge(ctx context.Context, now time.Time) (int64, error) {
	if now.IsZero() {
		return 0, fmt.Errorf("purge: %w: time is unset", ErrInvalid)
	}
	at := s.d.time(sqlstore.PGTime(now))
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, s.d.purge, at, s.purgeBatch)
		if err != nil {
			return total, fmt.Errorf("purge idempotency records: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("purge idempotency records: %w", err)
		}
		total += n
		if n < int64(s.purgeBatch) {
			return total, nil
		}
	}
}
