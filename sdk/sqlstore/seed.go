package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Seed is named demo or starter data a store writes once, in one
// transaction, into an empty database: only when no seed of that name was
// applied before and the Guard table holds no rows. Its tables come from
// the store's own code, never from input.
type Seed struct {
	// Name is the seed's name, e.g. "demo".
	Name string
	// Table records applied seeds: (name TEXT PRIMARY KEY, applied_at).
	Table string
	// Guard is a table that must be empty for the seed to apply, so a
	// database that already holds real data is never seeded.
	Guard string
	// AppliedAt is stored in Table.applied_at, in the engine's format.
	AppliedAt any
}

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (s Seed) check() error {
	if !tableName.MatchString(s.Table) || !tableName.MatchString(s.Guard) {
		return fmt.Errorf("seed %q: table names %q and %q must be plain lower-case identifiers", s.Name, s.Table, s.Guard)
	}
	return nil
}

// SeedSQLite applies s to db, calling write for its rows inside the
// transaction. It reports whether it applied anything; on any error
// nothing is written. SQLite serialises writers, so two processes seeding
// at once apply it once.
func SeedSQLite(ctx context.Context, db *sql.DB, s Seed, write func(*sql.Tx) error) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("seed %q: begin: %w", s.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	var seeded, rows int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+s.Table+` WHERE name = $1`, s.Name).Scan(&seeded); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+s.Guard).Scan(&rows); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if seeded > 0 || rows > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+s.Table+` (name, applied_at) VALUES ($1, $2)`, s.Name, s.AppliedAt); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if err := write(tx); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("seed %q: commit: %w", s.Name, err)
	}
	return true, nil
}

// SeedPostgres is SeedSQLite on PostgreSQL. Seeds from several replicas
// queue on an exclusive lock of s.Table; each later one then reads what the
// earlier ones committed (READ COMMITTED takes a new snapshot per
// statement), so exactly one applies it.
func SeedPostgres(ctx context.Context, pool *pgxpool.Pool, s Seed, write func(pgx.Tx) error) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("seed %q: begin: %w", s.Name, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE `+s.Table+` IN EXCLUSIVE MODE`); err != nil {
		return false, fmt.Errorf("seed %q: lock: %w", s.Name, err)
	}
	var seeded, anyRow bool
	if err := tx.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM `+s.Table+` WHERE name = $1), EXISTS (SELECT 1 FROM `+s.Guard+`)`, s.Name,
	).Scan(&seeded, &anyRow); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if seeded || anyRow {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO `+s.Table+` (name, applied_at) VALUES ($1, $2)`, s.Name, s.AppliedAt); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if err := write(tx); err != nil {
		return false, fmt.Errorf("seed %q: %w", s.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("seed %q: commit: %w", s.Name, err)
	}
	return true, nil
}
