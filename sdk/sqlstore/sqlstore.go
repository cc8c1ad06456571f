package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/capgate/capgate/sdk/sqlmigrate"
)

// Schema is what a plugin's store hands the openers.
type Schema struct {
	// Name is the plugin's name in messages: "open <Name> database: …".
	Name string
	// Migrations holds the schema history, a directory per
	// sqlmigrate.Dialect (see sqlmigrate.LoadDialect).
	Migrations fs.FS
	// HistoryTable records the applied migrations; empty for
	// sqlmigrate.DefaultTable.
	HistoryTable string
	// Log receives a line per applied migration; nil discards them.
	Log *slog.Logger
}

func (s Schema) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// migrate applies s.Migrations of dialect d to db. logDB names the database
// in log lines, where (empty or ` "path"`) in errors.
func (s Schema) migrate(ctx context.Context, db *sql.DB, d sqlmigrate.Dialect, logDB, where string) error {
	ms, err := sqlmigrate.LoadDialect(s.Migrations, d)
	if err != nil {
		return fmt.Errorf("%s database%s: %w", s.Name, where, err)
	}
	var opts []sqlmigrate.Option
	if s.HistoryTable != "" {
		opts = append(opts, sqlmigrate.WithTable(s.HistoryTable))
	}
	applied, err := sqlmigrate.Apply(ctx, db, d, ms, opts...)
	log := s.log()
	for _, m := range applied {
		log.Info("applied migration", "db", logDB, "version", m.Version, "name", m.Name)
	}
	if err != nil {
		return fmt.Errorf("migrate %s database%s: %w", s.Name, where, err)
	}
	return nil
}

// BusyTimeout is how long a SQLite writer waits for another to finish.
// Writes are single small transactions, so a long wait means something is
// stuck, not busy.
const BusyTimeout = 10 * time.Second

// MaxSQLiteConns bounds a SQLite pool: enough readers for a few cores, few
// enough that writers waiting on the lock do not pile up.
const MaxSQLiteConns = 8

// OpenSQLite opens (creating if needed) the SQLite file at path with
// foreign keys on, WAL journaling, synchronous NORMAL, BusyTimeout and
// immediate transactions, and migrates it to the latest schema.
func OpenSQLite(ctx context.Context, path string, s Schema) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("open %s database: empty path", s.Name)
	}
	// The driver splits its options off at the first '?', so a path with
	// one would be silently cut.
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open %s database %q: path must not contain '?' or '#'", s.Name, path)
	}
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate",
		path, BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s database %q: %w", s.Name, path, err)
	}
	// Keep connections open: database/sql keeps only two idle ones by
	// default, and under concurrent calls every extra one would be reopened
	// (file open, pragmas, schema parse) for each query. Writers still take
	// turns on SQLite's write lock; readers run in parallel under WAL.
	db.SetMaxOpenConns(MaxSQLiteConns)
	db.SetMaxIdleConns(MaxSQLiteConns)
	if err := pingSQLite(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s database %q: %w", s.Name, path, err)
	}
	if err := s.migrate(ctx, db, sqlmigrate.SQLite, path, fmt.Sprintf(" %q", path)); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// pingSQLite opens db's first connection, whose pragmas turn a new file to
// WAL. Two connections turning one file to WAL at once (a host creating
// its store while a command of the operator's opens it) can meet in a lock
// SQLite will not wait on, whatever the busy timeout: the one refused
// SQLITE_BUSY tries again, for as long as a writer would wait, and then
// finds the file turned.
func pingSQLite(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || SQLiteCode(err)&0xff != sqliteBusy || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// sqliteBusy is SQLITE_BUSY, the primary result code of every busy one.
const sqliteBusy = 5

// DefaultConnectTimeout bounds the first PostgreSQL connection when the DSN
// sets no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// OpenPostgres connects a pool to the database at dsn (a pgx connection
// string), checks that it answers, and migrates it to the latest schema.
// Errors never contain the password.
func OpenPostgres(ctx context.Context, dsn string, s Schema) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse error redacts the password.
		return nil, fmt.Errorf("open %s database: %w", s.Name, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", s.Name, err)
	}
	pingCtx := ctx
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A server that drops packets would otherwise hold start-up until
		// the host gives up on configure, with a less useful message.
		var cancel context.CancelFunc
		pingCtx, cancel = context.WithTimeout(ctx, DefaultConnectTimeout)
		defer cancel()
	}
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open %s database: %w", s.Name, err)
	}
	// The runner works on database/sql; this handle borrows the pool's
	// connections and closing it leaves the pool open.
	db := stdlib.OpenDBFromPool(pool)
	err = s.migrate(ctx, db, sqlmigrate.Postgres, "postgres", "")
	db.Close()
	if err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Engine returns the engine dsn (the value of a plugin's dsn config key)
// selects: SQLite when empty, PostgreSQL for a postgres:// or postgresql://
// URL. Any other value is an error that does not echo it, as it may hold a
// password.
func Engine(dsn string) (sqlmigrate.Dialect, error) {
	switch {
	case dsn == "":
		return sqlmigrate.SQLite, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return sqlmigrate.Postgres, nil
	}
	return "", errors.New("dsn must be a postgres:// or postgresql:// URL (PostgreSQL), " +
		"or left out for SQLite in the data directory; other schemes and key=value strings are not accepted")
}

// Target says where a plugin keeps its data.
type Target struct {
	// Name is the plugin's name in messages: "<Name> config: dsn …".
	Name string
	// DSN is the plugin's dsn config value; see Engine.
	DSN string
	// DataDir is the data directory the host hands the plugin, and File the
	// SQLite file's name in it.
	DataDir, File string
}

// SQLitePath returns the SQLite file of t after checking its data
// directory exists.
func (t Target) SQLitePath() (string, error) {
	if t.DataDir == "" {
		return "", fmt.Errorf("%s: the host gave no data directory", t.Name)
	}
	fi, err := os.Stat(t.DataDir)
	if err != nil {
		return "", fmt.Errorf("%s: data directory: %w", t.Name, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s: data directory %q is not a directory", t.Name, t.DataDir)
	}
	return filepath.Join(t.DataDir, t.File), nil
}

// Open opens the store t names with the opener for its engine: sqlite with
// the file's path, or postgres with the DSN. Errors say which config value
// is at fault and never contain a password.
func Open[S any](ctx context.Context, t Target,
	sqlite func(ctx context.Context, path string) (S, error),
	postgres func(ctx context.Context, dsn string) (S, error),
) (S, error) {
	var zero S
	engine, err := Engine(t.DSN)
	if err != nil {
		return zero, fmt.Errorf("%s config: %w", t.Name, err)
	}
	if engine == sqlmigrate.Postgres {
		st, err := postgres(ctx, t.DSN)
		if err != nil {
			return zero, fmt.Errorf("%s config: dsn %s: %w", t.Name, Redact(t.DSN), err)
		}
		return st, nil
	}
	path, err := t.SQLitePath()
	if err != nil {
		return zero, err
	}
	st, err := sqlite(ctx, path)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", t.Name, err)
	}
	return st, nil
}

// kvPassword finds the password of a key=value DSN.
var kvPassword = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)

// Redact returns dsn fit for a message: a URL with any password replaced by
// "xxxxx" (only the scheme when it does not parse), a key=value string with
// its password value replaced.
func Redact(dsn string) string {
	if scheme, _, isURL := strings.Cut(dsn, "://"); isURL {
		u, err := url.Parse(dsn)
		if err != nil {
			return scheme + "://(unparsable URL)"
		}
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}
