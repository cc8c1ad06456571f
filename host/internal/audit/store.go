package audit

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// ApprovalID matches the records of one held call (Record.ApprovalID).
	ApprovalID string
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
		{"approval id", f.ApprovalID, MaxIDLen},
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

// deleteBlocks bounds the blocks one retention statement deletes, so no
// delete holds SQLite's write lock or many PostgreSQL row locks for long.
const deleteBlocks = 20

// queryBlocks is how many blocks a query reads at a time: a page of the
// default size from one append needs one.
const queryBlocks = 4

// dialect is what differs between the engines.
type dialect struct {
	// time encodes an instant for a time column.
	time func(time.Time) any
	// contains is the condition that keys contain the needle ?.
	contains string
	// skipLocked ends a retention select, so replicas deleting at once
	// take different blocks.
	skipLocked string
	// legacyExists says whether audit_records_v1 is still there.
	legacyExists string
}

// sqliteTimeLayout keeps instants to the microsecond in fixed width, so
// the text sorts as the time does.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

var (
	sqliteDialect = dialect{
		time:         func(t time.Time) any { return t.UTC().Format(sqliteTimeLayout) },
		contains:     "instr(keys, ?) > 0",
		legacyExists: `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'audit_records_v1'`,
	}
	postgresDialect = dialect{
		time:         func(t time.Time) any { return t.UTC() },
		contains:     "strpos(keys, ?) > 0",
		skipLocked:   " FOR UPDATE SKIP LOCKED",
		legacyExists: `SELECT to_regclass('audit_records_v1') IS NOT NULL`,
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
	return newStore(ctx, &sqlStore{db: db, d: sqliteDialect, now: o.now, deleteBlocks: deleteBlocks})
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
	return newStore(ctx, &sqlStore{db: stdlib.OpenDBFromPool(pool), pool: pool, d: postgresDialect, now: o.now, deleteBlocks: deleteBlocks})
}

// newStore finishes opening s: records still in the first schema's
// table move into blocks.
func newStore(ctx context.Context, s *sqlStore) (Store, error) {
	if err := s.convertLegacy(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// sqlStore is Store on either engine: the same statements on the same
// schema, with what differs in d.
type sqlStore struct {
	db *sql.DB
	// pool is the PostgreSQL pool under db; nil on SQLite.
	pool         *pgxpool.Pool
	d            dialect
	now          func() time.Time
	deleteBlocks int
	// stmtMu guards takeSeqs and insert, the statements of every append,
	// prepared by the first (see appendStmts).
	stmtMu           sync.Mutex
	takeSeqs, insert *sql.Stmt
}

// appendStmts returns the append statements, preparing them the first
// time: parsing them again for every batch cost SQLite about a third of
// an append. Only a store that writes prepares them, so a trail opened to
// be read fails, if its tables are gone, as it reads.
func (s *sqlStore) appendStmts(ctx context.Context) (takeSeqs, insert *sql.Stmt, err error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if s.insert != nil {
		return s.takeSeqs, s.insert, nil
	}
	if takeSeqs, err = s.db.PrepareContext(ctx, `UPDATE audit_sequence SET last = last + $1 RETURNING last`); err != nil {
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	if insert, err = s.db.PrepareContext(ctx, `INSERT INTO audit_blocks (first_seq, last_seq, records, min_time, max_time, keys, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`); err != nil {
		_ = takeSeqs.Close()
		return nil, nil, fmt.Errorf("prepare: %w", err)
	}
	s.takeSeqs, s.insert = takeSeqs, insert
	return takeSeqs, insert, nil
}

func (s *sqlStore) Close() error {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	for _, st := range []*sql.Stmt{s.takeSeqs, s.insert} {
		if st != nil {
			_ = st.Close()
		}
	}
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close audit database: %w", err)
	}
	return nil
}

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
	return s.appendBlocks(ctx, blocksOf(rs))
}

// blocksOf encodes prepared records into blocks whose seq deltas are 0,
// 1, ….
func blocksOf(rs []Record) []*builder {
	var bs []*builder
	for chunk := range slices.Chunk(rs, maxBlockRecords) {
		b := new(builder)
		for i := range chunk {
			b.add(uint64(i), &chunk[i], false)
		}
		bs = append(bs, b)
	}
	return bs
}

// appendBlocks stores built blocks, whose records' seq deltas are 0, 1,
// …, in one transaction, giving them the next seqs in order.
func (s *sqlStore) appendBlocks(ctx context.Context, bs []*builder) error {
	return s.appendBlocksThen(ctx, bs, nil)
}

// appendBlocksThen is appendBlocks with then run in the same transaction
// after the blocks are in (nil for nothing).
func (s *sqlStore) appendBlocksThen(ctx context.Context, bs []*builder, then func(*sql.Tx) error) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error { return s.appendInTx(ctx, tx, bs, then) })
	if err != nil {
		total := 0
		for _, b := range bs {
			total += b.count
		}
		return fmt.Errorf("append %d audit records: %w", total, err)
	}
	return nil
}

// appendInTx stores bs in tx, giving them the next seqs in order, then
// runs then (when set).
func (s *sqlStore) appendInTx(ctx context.Context, tx *sql.Tx, bs []*builder, then func(*sql.Tx) error) error {
	total := 0
	for _, b := range bs {
		total += b.count
	}
	takeSeqs, _, err := s.appendStmts(ctx)
	if err != nil {
		return err
	}
	// Taking the range locks the sequence row until commit, so appends
	// commit in the order of their seqs.
	var last int64
	if err := tx.StmtContext(ctx, takeSeqs).QueryRowContext(ctx, total).Scan(&last); err != nil {
		return fmt.Errorf("take seqs: %w", err)
	}
	first := last - int64(total) + 1
	for _, b := range bs {
		if err := s.insertBlock(ctx, tx, b.block(first, first+int64(b.count)-1)); err != nil {
			return err
		}
		first += int64(b.count)
	}
	if then != nil {
		return then(tx)
	}
	return nil
}

// inTx runs f in a transaction, committed when f succeeds.
func (s *sqlStore) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *sqlStore) insertBlock(ctx context.Context, tx *sql.Tx, b block) error {
	_, insert, err := s.appendStmts(ctx)
	if err != nil {
		return err
	}
	_, err = tx.StmtContext(ctx, insert).ExecContext(ctx,
		b.first, b.last, b.count, s.d.time(b.minTime), s.d.time(b.maxTime), b.keys, b.body)
	return err
}

func (s *sqlStore) Query(ctx context.Context, f Filter) (Page, error) {
	if err := f.validate(); err != nil {
		return Page{}, fmt.Errorf("query audit records: %w", err)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	since, until := f.Since.Truncate(time.Microsecond), f.Until.Truncate(time.Microsecond)
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if !f.Since.IsZero() {
		add("max_time >= ?", s.d.time(since))
	}
	if !f.Until.IsZero() {
		add("min_time < ?", s.d.time(until))
	}
	for _, k := range []key{{keyToken, f.TokenLabel}, {keyUser, f.UserID}, {keyCapability, f.Capability},
		{keyRequest, f.RequestID}, {keyDecision, string(f.Decision)}, {keyStep, f.Step}, {keyApproval, f.ApprovalID}} {
		if k.value != "" {
			add(s.d.contains, needle(k.kind, k.value))
		}
	}
	newest := f.Order != OldestFirst
	// The cursor moves from block to block; records are filtered by it
	// exactly below.
	cursor, cond, order := f.After, "first_seq < ?", " DESC"
	if !newest {
		cond, order = "last_seq > ?", " ASC"
	}
	matches := func(r *Record) bool {
		switch {
		case f.After > 0 && newest && r.Seq >= f.After, f.After > 0 && !newest && r.Seq <= f.After,
			!f.Since.IsZero() && r.Time.Before(since), !f.Until.IsZero() && !r.Time.Before(until),
			f.TokenLabel != "" && r.TokenLabel != f.TokenLabel, f.UserID != "" && r.UserID != f.UserID,
			f.Capability != "" && r.Capability != f.Capability, f.RequestID != "" && r.RequestID != f.RequestID,
			f.Decision != "" && r.Decision != f.Decision, f.Step != "" && r.Step != f.Step,
			f.ApprovalID != "" && r.ApprovalID != f.ApprovalID:
			return false
		}
		return true
	}
	page := Page{Next: f.After}
	for {
		q := "SELECT first_seq, body FROM audit_blocks"
		bargs := args
		bwhere := where
		if cursor > 0 {
			bargs = append(slices.Clip(args), cursor)
			bwhere = append(slices.Clip(where), strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(bargs))))
		}
		if len(bwhere) > 0 {
			q += " WHERE " + strings.Join(bwhere, " AND ")
		}
		q += " ORDER BY first_seq" + order + " LIMIT " + strconv.Itoa(queryBlocks)
		blocks, err := readBlocks(ctx, s.db, q, bargs...)
		if err != nil {
			return Page{}, fmt.Errorf("query audit records: %w", err)
		}
		for _, rs := range blocks {
			if newest {
				slices.Reverse(rs)
			}
			for i := range rs {
				if !matches(&rs[i]) {
					continue
				}
				if len(page.Records) == limit {
					page.More = true
					return page, nil
				}
				page.Records = append(page.Records, rs[i])
				page.Next = rs[i].Seq
			}
		}
		if len(blocks) < queryBlocks {
			return page, nil
		}
		last := blocks[len(blocks)-1]
		// The next round starts past this block: by its first seq going
		// back, by its last going forward.
		if newest {
			cursor, cond = last[len(last)-1].Seq, "first_seq < ?"
		} else {
			cursor, cond = last[len(last)-1].Seq, "first_seq > ?"
		}
	}
}

// querier is a database or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readBlocks runs q, which selects first_seq and body, and decodes the
// blocks.
func readBlocks(ctx context.Context, db querier, q string, args ...any) ([][]Record, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var blocks [][]Record
	for rows.Next() {
		var (
			first int64
			body  []byte
		)
		if err := rows.Scan(&first, &body); err != nil {
			return nil, err
		}
		rs, err := decodeBlock(first, body)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, rs)
	}
	return blocks, rows.Err()
}

func (s *sqlStore) DeleteBefore(ctx context.Context, t time.Time) (int64, error) {
	if t.IsZero() {
		return 0, fmt.Errorf("delete audit records: %w: time is unset", ErrInvalid)
	}
	t = t.Truncate(time.Microsecond)
	at := s.d.time(t)
	var total int64
	// Blocks wholly older than t, a few at a time.
	for {
		var n, deleted int64
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `DELETE FROM audit_blocks WHERE first_seq IN
				(SELECT first_seq FROM audit_blocks WHERE max_time < $1 LIMIT $2`+s.d.skipLocked+`) RETURNING records`, at, s.deleteBlocks)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var c int64
				if err := rows.Scan(&c); err != nil {
					return err
				}
				n, deleted = n+1, deleted+c
			}
			return rows.Err()
		})
		if err != nil {
			return total, fmt.Errorf("delete audit records: %w", err)
		}
		total += deleted
		if n < int64(s.deleteBlocks) {
			break
		}
	}
	// Blocks holding records on both sides of t keep the newer ones.
	for {
		var n, deleted int64
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			blocks, err := readBlocks(ctx, tx, `SELECT first_seq, body FROM audit_blocks
				WHERE min_time < $1 AND max_time >= $1 ORDER BY first_seq LIMIT $2`+s.d.skipLocked, at, s.deleteBlocks)
			if err != nil {
				return err
			}
			n = int64(len(blocks))
			for _, rs := range blocks {
				first := rs[0].Seq
				kept := slices.DeleteFunc(slices.Clone(rs), func(r Record) bool { return r.Time.Before(t) })
				deleted += int64(len(rs) - len(kept))
				if _, err := tx.ExecContext(ctx, `DELETE FROM audit_blocks WHERE first_seq = $1`, first); err != nil {
					return err
				}
				if err := s.insertBlock(ctx, tx, encodeBlock(kept)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("delete audit records: %w", err)
		}
		total += deleted
		if n < int64(s.deleteBlocks) {
			return total, nil
		}
	}
}

// legacyColumns are audit_records_v1's, in the order scanLegacy reads.
const legacyColumns = `seq, id, parent_id, time, request_id, protocol, protocol_version, token_label, role, scope,
	user_id, capability, plugin, args, decision, step, reason, outcome, error_code, error_ref, latency_ns`

// convertLegacy moves the records left in the first schema's table into
// blocks, a block a transaction, keeping their seqs, and drops the table
// once it is empty. Replicas opening at once take turns on the sequence
// row.
func (s *sqlStore) convertLegacy(ctx context.Context) error {
	for done := false; !done; {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			var last int64
			if err := tx.QueryRowContext(ctx, `UPDATE audit_sequence SET last = last RETURNING last`).Scan(&last); err != nil {
				return fmt.Errorf("lock the sequence: %w", err)
			}
			var exists bool
			if err := tx.QueryRowContext(ctx, s.d.legacyExists).Scan(&exists); err != nil || !exists {
				done = true
				return err
			}
			rows, err := tx.QueryContext(ctx, `SELECT `+legacyColumns+` FROM audit_records_v1 ORDER BY seq LIMIT $1`, maxBlockRecords)
			if err != nil {
				return err
			}
			var rs []Record
			for rows.Next() {
				r, err := scanLegacy(rows)
				if err != nil {
					rows.Close()
					return err
				}
				rs = append(rs, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if len(rs) == 0 {
				done = true
				_, err := tx.ExecContext(ctx, `DROP TABLE audit_records_v1`)
				return err
			}
			if err := s.insertBlock(ctx, tx, encodeBlock(rs)); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM audit_records_v1 WHERE seq <= $1`, rs[len(rs)-1].Seq)
			return err
		})
		if err != nil {
			return fmt.Errorf("convert audit records to blocks: %w", err)
		}
	}
	return nil
}

// scanLegacy reads a row of legacyColumns.
func scanLegacy(rows *sql.Rows) (Record, error) {
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
