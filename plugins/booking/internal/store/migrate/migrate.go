package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

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

// LockFunc runs first in every migration transaction. An engine whose
// BEGIN does not already serialize writers (PostgreSQL) takes a lock here,
// e.g. pg_advisory_xact_lock, so concurrent starters apply each migration
// once. SQLite opened with _txlock=immediate needs none.
type LockFunc func(ctx context.Context, tx *sql.Tx) error

const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
)`

// Apply brings db up to the last of ms and returns the migrations it
// applied (none when the database was current). It refuses a database whose
// history differs from ms: a version it does not know or a different file
// name at a known version.
func Apply(ctx context.Context, db *sql.DB, ms []Migration, lock LockFunc) ([]Migration, error) {
	if _, err := db.ExecContext(ctx, createTable); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	if err := checkHistory(ctx, db, ms); err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range ms {
		did, err := applyOne(ctx, db, m, lock)
		if err != nil {
			return applied, err
		}
		if did {
			applied = append(applied, m)
		}
	}
	return applied, nil
}

// applyOne runs m unless the database already has it. The version check is
// inside the transaction so a concurrent starter that got there first is
// seen and m is not run twice.
func applyOne(ctx context.Context, db *sql.DB, m Migration, lock LockFunc) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	// After Commit this is a no-op; before it, it undoes a failed step.
	defer func() { _ = tx.Rollback() }()
	if lock != nil {
		if err := lock(ctx, tx); err != nil {
			return false, fmt.Errorf("migration %s: lock: %w", m.Name, err)
		}
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
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
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
		m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
		return false, fmt.Errorf("migration %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s failed at commit, database stays at version %d: %w", m.Name, cur, err)
	}
	return true, nil
}

func checkHistory(ctx context.Context, db *sql.DB, ms []Migration) error {
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		if v < 1 || v > len(ms) {
			return fmt.Errorf("database has migration %d (%s), which this build does not know (it knows 1..%d); is it newer than this build?", v, name, len(ms))
		}
		if want := ms[v-1].Name; name != want {
			return fmt.Errorf("database recorded migration %d as %q but this build has %q; released migrations must not be renamed or replaced", v, name, want)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	return nil
}

// Current returns the highest applied version, 0 for a fresh database.
func Current(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
