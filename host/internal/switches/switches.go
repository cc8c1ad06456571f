// Package switches keeps the operator's runtime switches — today the kill
// switch that turns every action off — in the host's database, so every
// replica on that database sees a change within a poll interval, and
// `capgate actions off` works against a host that is running.
package switches

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/capgate/capgate/sdk/sqlstore"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// HistoryTable records the store's applied migrations.
const HistoryTable = "capgate_switches_migrations"

// FileName is the SQLite file Open keeps in the data directory.
const FileName = "switches.db"

// actions is the row of the kill switch.
const actions = "actions"

// MaxChangedBy bounds who a change is attributed to.
const MaxChangedBy = 128

// State is the kill switch as last set. The zero State (never set) leaves
// actions on.
type State struct {
	ActionsOff bool
	// ChangedAt and ChangedBy say when and by whom (a token label, or
	// "cli" and the operating system user); zero when never set.
	ChangedAt time.Time
	ChangedBy string
}

// Store keeps the switches in SQLite or PostgreSQL. Any number of Stores
// (replicas, the command line) may share one database.
type Store struct {
	db   *sql.DB
	pool *pgxpool.Pool // under db on PostgreSQL; nil on SQLite
	now  func() time.Time
}

func schema(log *slog.Logger) (sqlstore.Schema, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return sqlstore.Schema{}, fmt.Errorf("switches migrations: %w", err)
	}
	return sqlstore.Schema{Name: "switches", Migrations: sub, HistoryTable: HistoryTable, Log: log}, nil
}

// Open opens the store dsn selects: empty for SQLite in FileName under
// dataDir, a postgres:// URL for PostgreSQL. No error holds a password.
func Open(ctx context.Context, dsn, dataDir string, log *slog.Logger) (*Store, error) {
	sch, err := schema(log)
	if err != nil {
		return nil, err
	}
	return sqlstore.Open(ctx, sqlstore.Target{Name: "switches", DSN: dsn, DataDir: dataDir, File: FileName},
		func(ctx context.Context, path string) (*Store, error) {
			db, err := sqlstore.OpenSQLite(ctx, path, sch)
			if err != nil {
				return nil, err
			}
			return &Store{db: db, now: time.Now}, nil
		},
		func(ctx context.Context, dsn string) (*Store, error) {
			pool, err := sqlstore.OpenPostgres(ctx, dsn, sch)
			if err != nil {
				return nil, err
			}
			return &Store{db: stdlib.OpenDBFromPool(pool), pool: pool, now: time.Now}, nil
		})
}

// Close releases the database.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close switches database: %w", err)
	}
	return nil
}

// Get reads the kill switch.
func (s *Store) Get(ctx context.Context) (State, error) {
	var (
		st      State
		off     int
		changed int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT off, changed_at, changed_by FROM capgate_switches WHERE name = $1`, actions).
		Scan(&off, &changed, &st.ChangedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read the kill switch: %w", err)
	}
	st.ActionsOff, st.ChangedAt = off == 1, time.UnixMilli(changed).UTC()
	return st, nil
}

// SetActionsOff throws the kill switch (off true) or releases it, saying
// who did. who is cut to MaxChangedBy bytes.
func (s *Store) SetActionsOff(ctx context.Context, off bool, who string) (State, error) {
	if len(who) > MaxChangedBy {
		who = who[:MaxChangedBy]
		for !utf8.ValidString(who) {
			who = who[:len(who)-1]
		}
	}
	st := State{ActionsOff: off, ChangedAt: s.now().UTC().Truncate(time.Millisecond), ChangedBy: who}
	v := 0
	if off {
		v = 1
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO capgate_switches (name, off, changed_at, changed_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET off = excluded.off, changed_at = excluded.changed_at, changed_by = excluded.changed_by`,
		actions, v, st.ChangedAt.UnixMilli(), who)
	if err != nil {
		return State{}, fmt.Errorf("set the kill switch: %w", err)
	}
	return st, nil
}

// PollInterval is how often Watch reads the switch: a change made on one
// replica (or from the command line) holds on every other within it.
const PollInterval = time.Second

// Watch reads the switch every interval until ctx ends, calling changed
// with the first state read and after every change. A failed read is
// logged (once until reads succeed again) and keeps the last state known:
// a database hiccup neither throws nor releases the switch.
func (s *Store) Watch(ctx context.Context, interval time.Duration, log *slog.Logger, changed func(State)) {
	var (
		last    State
		known   bool
		failing bool
	)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		st, err := s.Get(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				log.Warn("kill switch: cannot read its state; keeping the last one known", "err", err)
				failing = true
			}
		default:
			if failing {
				log.Info("kill switch: its state can be read again")
				failing = false
			}
			if !known || st.ActionsOff != last.ActionsOff {
				changed(st)
			}
			last, known = st, true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
