package sqlmigrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dialect is a database engine. Its value is also the name of the
// directory that holds its migrations (see LoadDialect).
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Dialects lists the dialects Apply supports.
var Dialects = []Dialect{SQLite, Postgres}

func (d Dialect) valid() bool { return slices.Contains(Dialects, d) }

// Migration is one step of the schema history.
type Migration struct {
	Version int
	// Name is the file name, recorded so an edited history is noticed.
	Name string
	SQL  string
}

var fileName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// Load reads the migrations in the root of fsys. Every *.sql file must be
// named NNNN_name.sql and the versions must run 1..n without gaps or
// duplicates, so a misnamed or missing file stops start-up instead of being
// skipped.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q: name must look like 0001_create_things.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1]) // four digits always parse
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", e.Name(), err)
		}
		if strings.TrimSpace(string(body)) == "" {
			return nil, fmt.Errorf("migration file %q is empty", e.Name())
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(body)})
	}
	if len(ms) == 0 {
		return nil, errors.New("no migration files found")
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: expected version %04d; versions must run 1, 2, 3, … without gaps or duplicates", m.Name, i+1)
		}
	}
	return ms, nil
}

// LoadDialect reads the migrations of dialect d from the directory named d
// in the root of fsys (e.g. "postgres/0001_init.sql"). Every other dialect
// directory present in fsys is loaded too and must hold the same versions
// under the same names: one history, written once per engine.
func LoadDialect(fsys fs.FS, d Dialect) ([]Migration, error) {
	if !d.valid() {
		return nil, fmt.Errorf("migrations: unknown dialect %q; use one of %v", d, Dialects)
	}
	load := func(d Dialect) ([]Migration, error) {
		sub, err := fs.Sub(fsys, string(d))
		if err != nil {
			return nil, fmt.Errorf("%s migrations: %w", d, err)
		}
		ms, err := Load(sub)
		if err != nil {
			return nil, fmt.Errorf("%s migrations: %w", d, err)
		}
		return ms, nil
	}
	ms, err := load(d)
	if err != nil {
		return nil, err
	}
	for _, other := range Dialects {
		if other == d {
			continue
		}
		if fi, err := fs.Stat(fsys, string(other)); err != nil || !fi.IsDir() {
			continue
		}
		oms, err := load(other)
		if err != nil {
			return nil, err
		}
		if err := sameHistory(d, ms, other, oms); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

func sameHistory(a Dialect, ams []Migration, b Dialect, bms []Migration) error {
	for i := range max(len(ams), len(bms)) {
		an, bn := "(none)", "(none)"
		if i < len(ams) {
			an = ams[i].Name
		}
		if i < len(bms) {
			bn = bms[i].Name
		}
		if an != bn {
			return fmt.Errorf("migrations: version %04d is %s in %s/ but %s in %s/; every dialect must have the same versions under the same names",
				i+1, an, a, bn, b)
		}
	}
	return nil
}

// DefaultTable is the history table Apply uses unless WithTable names another.
const DefaultTable = "schema_migrations"

// Option adjusts Apply and Current.
type Option func(*options)

type options struct{ table string }

// WithTable makes Apply and Current keep the history in table instead of
// DefaultTable; it must be a plain lower-case SQL identifier.
func WithTable(table string) Option { return func(o *options) { o.table = table } }

var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func newOptions(opts []Option) (options, error) {
	o := options{table: DefaultTable}
	for _, f := range opts {
		f(&o)
	}
	if !identifier.MatchString(o.table) {
		return o, fmt.Errorf("migrations: history table %q must be a lower-case SQL identifier", o.table)
	}
	return o, nil
}

// Apply brings db, an engine of dialect d, up to the last of ms and returns
// the migrations it applied (none when the database was current). It
// refuses a database whose history differs from ms: a version it does not
// know or a different file name at a known version. Concurrent Apply calls
// on one database, from any number of processes, apply each step once.
func Apply(ctx context.Context, db *sql.DB, d Dialect, ms []Migration, opts ...Option) ([]Migration, error) {
	if !d.valid() {
		return nil, fmt.Errorf("migrate: unknown dialect %q; use one of %v", d, Dialects)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	r := runner{db: db, d: d, table: o.table}
	if err := r.prepare(ctx, ms); err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range ms {
		did, err := r.applyOne(ctx, m)
		if err != nil {
			return applied, err
		}
		if did {
			applied = append(applied, m)
		}
	}
	return applied, nil
}

type runner struct {
	db    *sql.DB
	d     Dialect
	table string
}

// sqliteBusyFor bounds how long a SQLite BEGIN is retried while it finds
// the file busy without waiting: on a fresh file, while another starter's
// connection switches it to WAL, SQLite answers SQLITE_BUSY at once instead
// of calling the busy handler.
const sqliteBusyFor = 10 * time.Second

// begin starts a transaction that, on PostgreSQL, holds the migration lock
// of this history until it ends.
func (r runner) begin(ctx context.Context) (*sql.Tx, error) {
	tx, err := r.db.BeginTx(ctx, nil)
	for wait, until := 5*time.Millisecond, time.Now().Add(sqliteBusyFor); r.d == SQLite && isBusy(err) && time.Now().Before(until); wait = min(2*wait, 200*time.Millisecond) {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("begin: %w", ctx.Err())
		case <-time.After(wait):
		}
		tx, err = r.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	if r.d == Postgres {
		// Two int4 keys: the history table and the schema it lives in, so
		// unrelated histories (other verticals, other schemas) do not wait
		// for each other.
		if _, err := tx.ExecContext(ctx,
			`SELECT pg_advisory_xact_lock(hashtext($1), hashtext(coalesce(current_schema(), '')))`,
			"capgate.sqlmigrate."+r.table); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
	}
	return tx, nil
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code),
// as the driver's errors say through a Code method.
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5
}

// prepare creates the history table if need be and checks the recorded
// history against ms, under the lock.
func (r runner) prepare(ctx context.Context, ms []Migration) error {
	tx, err := r.begin(ctx)
	if err != nil {
		return fmt.Errorf("create %s: %w", r.table, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+r.table+` (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
)`); err != nil {
		return fmt.Errorf("create %s: %w", r.table, err)
	}
	if err := r.checkHistory(ctx, tx, ms); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create %s: commit: %w", r.table, err)
	}
	return nil
}

// applyOne runs m unless the database already has it. The version check is
// inside the transaction (after the lock, on PostgreSQL; after SQLite's
// immediate BEGIN) so a concurrent starter that got there first is seen and
// m is not run twice.
func (r runner) applyOne(ctx context.Context, m Migration) (bool, error) {
	tx, err := r.begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	// After Commit this is a no-op; before it, it undoes a failed step.
	defer func() { _ = tx.Rollback() }()
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+r.table).Scan(&cur); err != nil {
		return false, fmt.Errorf("migration %s: read version: %w", m.Name, err)
	}
	if cur >= m.Version {
		return false, nil
	}
	if cur != m.Version-1 {
		return false, fmt.Errorf("migration %s: database is at version %d, cannot skip to %d", m.Name, cur, m.Version)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migration %s failed, database stays at version %d: %w", m.Name, cur, err)
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO `+r.table+` (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return false, fmt.Errorf("migration %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s failed at commit, database stays at version %d: %w", m.Name, cur, err)
	}
	return true, nil
}

func (r runner) checkHistory(ctx context.Context, tx *sql.Tx, ms []Migration) error {
	rows, err := tx.QueryContext(ctx, `SELECT version, name FROM `+r.table+` ORDER BY version`)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return fmt.Errorf("read %s: %w", r.table, err)
		}
		if v < 1 || v > len(ms) {
			return fmt.Errorf("database has migration %d (%s), which this build does not know (it knows 1..%d); is it newer than this build?", v, name, len(ms))
		}
		if want := ms[v-1].Name; name != want {
			return fmt.Errorf("database recorded migration %d as %q but this build has %q; released migrations must not be renamed or replaced", v, name, want)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", r.table, err)
	}
	return nil
}

// Current returns the highest applied version, 0 for a database whose
// history table exists but is empty. A database never migrated is an error.
func Current(ctx context.Context, db *sql.DB, opts ...Option) (int, error) {
	o, err := newOptions(opts)
	if err != nil {
		return 0, err
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+o.table).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version from %s: %w", o.table, err)
	}
	return v, nil
}
