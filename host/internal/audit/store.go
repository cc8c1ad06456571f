package audit

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
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

// HistoryTable records the store's applied migrations, apart from other
// stores' tables, so it may share a PostgreSQL schema with them.
const HistoryTable = "capgate_audit_migrations"

// FileName is the SQLite file Open keeps in the data directory.
const FileName = "audit.db"

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// deleteBatch bounds the records one retention statement deletes, so no
// delete holds SQLite's write lock or many PostgreSQL row locks for long.
const deleteBatch = 1000

// insertRows bounds the rows of one INSERT statement: 21 parameters a
// row stay far below either engine's limit on parameters.
const insertRows = 50

// Store keeps audit records. Implementations are safe for concurrent use;
// any number of Stores (replicas) may share one PostgreSQL database.
type Store interface {
	// Append stores records in one transaction: all of them or, with an
	// error, none. Each record is validated (ErrInvalid names the first
	// one at fault, and nothing is written) and brought within its bounds
	// (see Record); Seq is assigned, ID and Time filled in when empty.
	Append(ctx context.Context, records []Record) error
	// Query returns a page of the records f selects, in f.Order.
	Query(ctx context.Context, f Filter) (Page, error)
	// DeleteBefore deletes the records older than t, in short batches,
	// and returns how many.
	DeleteBefore(ctx context.Context, t time.Time) (int64, error)
	// Close releases the database.
	Close() error
}

// Order is the direction of a query.
type Order string

const (
	// NewestFirst (the default) lists the latest records first; After
	// continues to older ones.
	NewestFirst Order = "newest"
	// OldestFirst lists in append order; After continues to newer ones.
	// Following the trail is OldestFirst with After set to the last Seq
	// seen: no record committed later is ever skipped.
	OldestFirst Order = "oldest"
)

// Filter selects records. Zero fields select everything.
type Filter struct {
	// Since (inclusive) and Until (exclusive) bound the record's Time.
	Since, Until time.Time
	// TokenLabel, UserID, Capability, RequestID and Step match exactly.
	TokenLabel string
	UserID     string
	Capability string
	RequestID  string
	Decision   Decision // Admitted, Refused or empty
	Step       string
	// After is a cursor: only records past this Seq in Order are listed.
	// Page.Next gives the cursor of the next page.
	After int64
	Order Order // NewestFirst when empty
	// Limit is the most records on a page: DefaultLimit when 0, at most
	// MaxLimit.
	Limit int
}

func (f *Filter) validate() error {
	switch {
	case f.Limit < 0 || f.Limit > MaxLimit:
		return fmt.Errorf("%w: limit %d is not between 1 and %d (0 for %d)", ErrInvalid, f.Limit, MaxLimit, DefaultLimit)
	case f.After < 0:
		return fmt.Errorf("%w: cursor %d is negative", ErrInvalid, f.After)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since):
		return fmt.Errorf("%w: until %s is not after since %s", ErrInvalid, f.Until.UTC().Format(time.RFC3339Nano), f.Since.UTC().Format(time.RFC3339Nano))
	case f.Decision != "" && f.Decision != Admitted && f.Decision != Refused:
		return fmt.Errorf("%w: decision %q is not admitted or refused", ErrInvalid, clip(string(f.Decision)))
	case f.Order != "" && f.Order != NewestFirst && f.Order != OldestFirst:
		return fmt.Errorf("%w: order %q is not newest or oldest", ErrInvalid, clip(string(f.Order)))
	}
	for _, v := range []struct {
		name, value string
		max         int
	}{
		{"token label", f.TokenLabel, MaxLabelLen},
		{"user id", f.UserID, MaxNameLen},
		{"capability", f.Capability, MaxNameLen},
		{"request id", f.RequestID, MaxRequestIDLen},
		{"step", f.Step, MaxProtocolLen},
	} {
		if len(v.value) > v.max {
			return fmt.Errorf("%w: %s is %d bytes, more than the %d any record holds", ErrInvalid, v.name, len(v.value), v.max)
		}
	}
	return nil
}

// Page is one page of a query.
type Page struct {
	Records []Record
	// Next is the cursor for the next page (Filter.After): the last
	// record's Seq, or the query's own cursor when the page is empty, so a
	// follower keeps its place.
	Next int64
	// More reports that more records matched past this page.
	More bool
}

// dialect is what differs between the engines.
type dialect struct {
	// time encodes an instant for a time column.
	time func(time.Time) any
	// lock, when set, runs first in an append's transaction.
	lock string
	// deleteBefore deletes at most $2 records older than $1.
	deleteBefore string
	// oneRowInserts appends a batch as one prepared single-row INSERT run
	// per record. SQLite resolves each $N of a statement by a linear
	// search over the names before it, so parsing a multi-row INSERT of a
	// 500-record batch (10,000 parameters) took more CPU than the calls it
	// recorded; a prepared row is parsed once. PostgreSQL, a round trip
	// away, takes the batch in few statements instead.
	oneRowInserts bool
}

// sqliteTimeLayout keeps instants to the microsecond in fixed width, so
// the text sorts as the time does.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

var (
	sqliteDialect = dialect{
		time:          func(t time.Time) any { return t.UTC().Format(sqliteTimeLayout) },
		oneRowInserts: true,
		// SQLite holds the write lock for the whole statement.
		deleteBefore: `DELETE FROM audit_records WHERE seq IN
			(SELECT seq FROM audit_records WHERE time < $1 LIMIT $2)`,
	}
	postgresDialect = dialect{
		time: func(t time.Time) any { return t.UTC() },
		// Appends take turns, so seq order is commit order: a follower
		// that has read seq N never later meets a smaller one committing.
		// The lock is scoped to the schema's table; readers do not take it.
		lock: `SELECT pg_advisory_xact_lock(hashtext('capgate.audit.append'), hashtext(coalesce(current_schema(), '')))`,
		// SKIP LOCKED: replicas deleting at once take different rows.
		deleteBefore: `DELETE FROM audit_records WHERE seq IN
			(SELECT seq FROM audit_records WHERE time < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
)

func schema(log *slog.Logger) (sqlstore.Schema, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return sqlstore.Schema{}, fmt.Errorf("audit migrations: %w", err)
	}
	return sqlstore.Schema{Name: "audit", Migrations: sub, HistoryTable: HistoryTable, Log: log}, nil
}

// Option configures a store.
type Option func(*options)

type options struct {
	now func() time.Time
	log *slog.Logger
}

// WithClock makes the store read the time (for records appended without
// one) from now instead of time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLog logs applied migrations to log (default: discard).
func WithLog(log *slog.Logger) Option { return func(o *options) { o.log = log } }

func optionsOf(opts []Option) options {
	o := options{now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Open opens the store dsn selects, as the host's other stores do
// (sqlstore.Engine): empty for SQLite in FileName under dataDir, a
// postgres:// or postgresql:// URL for PostgreSQL. No error holds a
// password.
func Open(ctx context.Context, dsn, dataDir string, opts ...Option) (Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "audit", DSN: dsn, DataDir: dataDir, File: FileName},
		func(ctx context.Context, path string) (Store, error) { return OpenSQLite(ctx, path, opts...) },
		func(ctx context.Context, dsn string) (Store, error) { return OpenPostgres(ctx, dsn, opts...) })
}

// OpenSQLite opens (creating if needed) the SQLite file at path and
// migrates it to the latest schema.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (Store, error) {
	o := optionsOf(opts)
	sch, err := schema(o.log)
	if err != nil {
		return nil, err
	}
	db, err := sqlstore.OpenSQLite(ctx, path, sch)
	if err != nil {
		return nil, err
	}
	return &sqlStore{db: db, d: sqliteDialect, now: o.now, deleteBatch: deleteBatch}, nil
}

// OpenPostgres connects a pool to the database at dsn, checks that it
// answers and migrates it to the latest schema. Errors never contain the
// password.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (Store, error) {
	o := optionsOf(opts)
	sch, err := schema(o.log)
	if err != nil {
		return nil, err
	}
	pool, err := sqlstore.OpenPostgres(ctx, dsn, sch)
	if err != nil {
		return nil, err
	}
	return &sqlStore{db: stdlib.OpenDBFromPool(pool), pool: pool, d: postgresDialect, now: o.now, deleteBatch: deleteBatch}, nil
}

// sqlStore is Store on either engine: the same statements on the same
// schema, with what differs in d.
type sqlStore struct {
	db *sql.DB
	// pool is the PostgreSQL pool under db; nil on SQLite.
	pool        *pgxpool.Pool
	d           dialect
	now         func() time.Time
	deleteBatch int
}

func (s *sqlStore) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close audit database: %w", err)
	}
	return nil
}

// columns are the stored fields in the order of every statement.
const columns = `id, parent_id, time, request_id, protocol, protocol_version, token_label, role, scope,
	user_id, capability, plugin, args, decision, step, reason, outcome, error_code, error_ref, latency_ns`

const numColumns = 20

// prepare validates and normalises records into a copy, filling in ID and
// Time when empty.
func prepare(records []Record, now func() time.Time) ([]Record, error) {
	out := make([]Record, len(records))
	for i, r := range records {
		if err := r.validate(); err != nil {
			return nil, fmt.Errorf("record %d of %d: %w", i+1, len(records), err)
		}
		if r.Time.IsZero() {
			r.Time = now()
		}
		if r.ID == "" {
			r.ID = NewID(r.Time)
		}
		r.Seq = 0
		r.normalize()
		out[i] = r
	}
	return out, nil
}

func (s *sqlStore) Append(ctx context.Context, records []Record) error {
	if len(records) == 0 {
		return nil
	}
	rs, err := prepare(records, s.now)
	if err != nil {
		return fmt.Errorf("append audit records: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append %d audit records: %w", len(rs), err)
	}
	if err := s.insert(ctx, tx, rs); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("append %d audit records: %w", len(rs), err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append %d audit records: commit: %w", len(rs), err)
	}
	return nil
}

func (s *sqlStore) insert(ctx context.Context, tx *sql.Tx, rs []Record) error {
	if s.d.lock != "" {
		if _, err := tx.ExecContext(ctx, s.d.lock); err != nil {
			return fmt.Errorf("take append lock: %w", err)
		}
	}
	if s.d.oneRowInserts {
		stmt, err := tx.PrepareContext(ctx, insertOneRow)
		if err != nil {
			return err
		}
		defer stmt.Close()
		// Each row's statement runs without the batch's deadline: the
		// SQLite driver starts a goroutine per statement to watch a
		// context that can end, which cost more than the insert. The
		// transaction's begin and commit keep the deadline, and SQLite's
		// busy timeout bounds any wait for its lock in between.
		rowCtx := context.WithoutCancel(ctx)
		for _, r := range rs {
			if _, err := stmt.ExecContext(rowCtx, s.rowArgs(r)...); err != nil {
				return err
			}
		}
		return nil
	}
	for len(rs) > 0 {
		n := min(len(rs), insertRows)
		var q strings.Builder
		q.WriteString("INSERT INTO audit_records (" + columns + ") VALUES ")
		args := make([]any, 0, n*numColumns)
		for i, r := range rs[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteByte('(')
			for c := range numColumns {
				if c > 0 {
					q.WriteString(", ")
				}
				q.WriteString("$" + strconv.Itoa(i*numColumns+c+1))
			}
			q.WriteByte(')')
			args = append(args, s.rowArgs(r)...)
		}
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		rs = rs[n:]
	}
	return nil
}

// insertOneRow is the single-row INSERT of oneRowInserts, with positional
// parameters, which the SQLite driver binds without a name to look up.
var insertOneRow = func() string {
	var q strings.Builder
	q.WriteString("INSERT INTO audit_records (" + columns + ") VALUES (")
	for c := range numColumns {
		if c > 0 {
			q.WriteString(", ")
		}
		q.WriteString("?")
	}
	q.WriteByte(')')
	return q.String()
}()

// rowArgs are r's values in the order of columns.
func (s *sqlStore) rowArgs(r Record) []any {
	var a any
	if len(r.Args) > 0 {
		a = string(r.Args)
	}
	return []any{r.ID, r.ParentID, s.d.time(r.Time), r.RequestID, r.Protocol, r.ProtocolVersion,
		r.TokenLabel, r.Role, r.Scope, r.UserID, r.Capability, r.Plugin, a, string(r.Decision), r.Step,
		r.Reason, string(r.Outcome), r.ErrorCode, r.ErrorRef, int64(r.Latency)}
}

func (s *sqlStore) Query(ctx context.Context, f Filter) (Page, error) {
	if err := f.validate(); err != nil {
		return Page{}, fmt.Errorf("query audit records: %w", err)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if !f.Since.IsZero() {
		add("time >= ?", s.d.time(f.Since.Truncate(time.Microsecond)))
	}
	if !f.Until.IsZero() {
		add("time < ?", s.d.time(f.Until.Truncate(time.Microsecond)))
	}
	for _, eq := range []struct{ col, v string }{
		{"token_label", f.TokenLabel}, {"user_id", f.UserID}, {"capability", f.Capability},
		{"request_id", f.RequestID}, {"decision", string(f.Decision)}, {"step", f.Step},
	} {
		if eq.v != "" {
			add(eq.col+" = ?", eq.v)
		}
	}
	order := "DESC"
	if f.Order == OldestFirst {
		order = "ASC"
		if f.After > 0 {
			add("seq > ?", f.After)
		}
	} else if f.After > 0 {
		add("seq < ?", f.After)
	}
	q := "SELECT seq, " + columns + " FROM audit_records"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	q += " ORDER BY seq " + order + " LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return Page{}, fmt.Errorf("query audit records: %w", err)
	}
	defer rows.Close()
	page := Page{Next: f.After}
	for rows.Next() {
		if len(page.Records) == limit {
			page.More = true
			break
		}
		r, err := scan(rows)
		if err != nil {
			return Page{}, fmt.Errorf("query audit records: %w", err)
		}
		page.Records = append(page.Records, r)
		page.Next = r.Seq
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("query audit records: %w", err)
	}
	return page, nil
}

func scan(rows *sql.Rows) (Record, error) {
	var (
		r                 Record
		t                 any
		args              sql.NullString
		decision, outcome string
		latency           int64
	)
	if err := rows.Scan(&r.Seq, &r.ID, &r.ParentID, &t, &r.RequestID, &r.Protocol, &r.ProtocolVersion,
		&r.TokenLabel, &r.Role, &r.Scope, &r.UserID, &r.Capability, &r.Plugin, &args, &decision, &r.Step,
		&r.Reason, &outcome, &r.ErrorCode, &r.ErrorRef, &latency); err != nil {
		return Record{}, err
	}
	switch v := t.(type) {
	case time.Time:
		r.Time = v.UTC()
	case string:
		pt, err := time.Parse(sqliteTimeLayout, v)
		if err != nil {
			return Record{}, fmt.Errorf("record %d: stored time %q is not a valid time: %w", r.Seq, clip(v), err)
		}
		r.Time = pt
	default:
		return Record{}, fmt.Errorf("record %d: stored time is a %T", r.Seq, t)
	}
	if args.Valid {
		r.Args = []byte(args.String)
	}
	r.Decision, r.Outcome, r.Latency = Decision(decision), Outcome(outcome), time.Duration(latency)
	return r, nil
}

func (s *sqlStore) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, fmt.Errorf("delete audit records: %w: time is unset", ErrInvalid)
	}
	at := s.d.time(t.Truncate(time.Microsecond))
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, s.d.deleteBefore, at, s.deleteBatch)
		if err != nil {
			return total, fmt.Errorf("delete audit records: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("delete audit records: %w", err)
		}
		total += n
		if n < int64(s.deleteBatch) {
			return total, nil
		}
	}
}
