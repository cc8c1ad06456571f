package sqlstore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
	"github.com/capgate/capgate/sdk/sqlstore"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

// history is two migrations, the same for both engines.
var history = fstest.MapFS{
	"sqlite/0001_a.sql":   file(`CREATE TABLE a (id INTEGER PRIMARY KEY);`),
	"sqlite/0002_b.sql":   file(`CREATE TABLE b (id INTEGER PRIMARY KEY);`),
	"postgres/0001_a.sql": file(`CREATE TABLE a (id INTEGER PRIMARY KEY);`),
	"postgres/0002_b.sql": file(`CREATE TABLE b (id INTEGER PRIMARY KEY);`),
}

// engine opens the database at a location: a SQLite file path or a
// PostgreSQL DSN.
type engine struct {
	name  string
	fresh func(t *testing.T) string
	open  func(loc string, s sqlstore.Schema) (*sql.DB, error)
}

var engines = []engine{
	{
		name:  "sqlite",
		fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "test.db") },
		open: func(path string, s sqlstore.Schema) (*sql.DB, error) {
			return sqlstore.OpenSQLite(context.Background(), path, s)
		},
	},
	{
		name:  "postgres",
		fresh: func(t *testing.T) string { return pgtest.SchemaDSN(t) },
		open: func(dsn string, s sqlstore.Schema) (*sql.DB, error) {
			pool, err := sqlstore.OpenPostgres(context.Background(), dsn, s)
			if err != nil {
				return nil, err
			}
			// Closing this handle leaves the pool open; the test ends
			// with the process, so the pool is not closed.
			return stdlib.OpenDBFromPool(pool), nil
		},
	},
}

func mustOpen(t *testing.T, e engine, loc string, s sqlstore.Schema) *sql.DB {
	t.Helper()
	db, err := e.open(loc, s)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestReopenAppliesNothing: the first open migrates and logs each
// migration, a second open of the same database finds it current, changes
// nothing and logs nothing; the history goes to the table asked for.
func TestReopenAppliesNothing(t *testing.T) {
	for _, e := range engines {
		for _, table := range []string{"", "my_history"} {
			t.Run(e.name+"/"+table, func(t *testing.T) {
				loc := e.fresh(t)
				open := func() string {
					var buf bytes.Buffer
					db, err := e.open(loc, sqlstore.Schema{Name: "test", Migrations: history, HistoryTable: table,
						Log: slog.New(slog.NewTextHandler(&buf, nil))})
					if err != nil {
						t.Fatalf("open: %v", err)
					}
					db.Close()
					return buf.String()
				}
				if first := open(); !strings.Contains(first, "0001_a.sql") || !strings.Contains(first, "0002_b.sql") {
					t.Fatalf("first open did not log both migrations:\n%s", first)
				}
				if second := open(); second != "" {
					t.Fatalf("second open applied something:\n%s", second)
				}
				db := mustOpen(t, e, loc, sqlstore.Schema{Name: "test", Migrations: history, HistoryTable: table})
				want := table
				if want == "" {
					want = sqlmigrate.DefaultTable
				}
				var n int
				if err := db.QueryRow(`SELECT COUNT(*) FROM ` + want).Scan(&n); err != nil || n != 2 {
					t.Fatalf("%s rows = %d, %v; want 2, each applied once", want, n, err)
				}
			})
		}
	}
}

func TestOpenSQLiteSetsPragmas(t *testing.T) {
	db := mustOpen(t, engines[0], engines[0].fresh(t), sqlstore.Schema{Name: "test", Migrations: history})
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "10000"},
		{"synchronous", "1"}, // NORMAL
	}
	for _, tc := range tests {
		t.Run(tc.pragma, func(t *testing.T) {
			var got string
			if err := db.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
				t.Fatalf("PRAGMA %s: %v", tc.pragma, err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA %s = %q; want %q", tc.pragma, got, tc.want)
			}
		})
	}
}

func TestOpenErrors(t *testing.T) {
	schema := sqlstore.Schema{Name: "test", Migrations: history}
	// A database one version ahead of the history.
	newer := func(e engine) func(t *testing.T) string {
		return func(t *testing.T) string {
			loc := e.fresh(t)
			db := mustOpen(t, e, loc, schema)
			if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (3, '0003_future.sql', '2030-01-01T00:00:00Z')`); err != nil {
				t.Fatalf("insert future version: %v", err)
			}
			return loc
		}
	}
	at := func(loc string) func(t *testing.T) string { return func(*testing.T) string { return loc } }
	sqliteFile := func(name string, content []byte) func(t *testing.T) string {
		return func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), name)
			if content != nil {
				if err := os.WriteFile(path, content, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			return path
		}
	}
	sqlite, postgres := engines[0], engines[1]
	tests := []struct {
		name   string
		engine engine
		loc    func(t *testing.T) string
		schema sqlstore.Schema
		want   []string
	}{
		{"empty path", sqlite, at(""), schema, []string{"open test database: empty path"}},
		{"question mark", sqlite, sqliteFile("a?b.db", nil), schema, []string{"open test database", "must not contain '?'"}},
		{"missing directory", sqlite, sqliteFile("gone/x.db", nil), schema, []string{"open test database", "x.db"}},
		{"not a database", sqlite, sqliteFile("garbage.db", bytes.Repeat([]byte("not a database "), 512)), schema,
			[]string{"test database", "garbage.db"}},
		{"sqlite newer than build", sqlite, newer(sqlite), schema, []string{"migrate test database", "does not know"}},
		{"misnamed migration", sqlite, sqliteFile("x.db", nil),
			sqlstore.Schema{Name: "test", Migrations: fstest.MapFS{"sqlite/1_a.sql": file(`SELECT 1;`)}},
			[]string{"test database"}},
		{"failing migration", sqlite, sqliteFile("x.db", nil),
			sqlstore.Schema{Name: "test", Migrations: fstest.MapFS{"sqlite/0001_a.sql": file(`CREATE TABLE (;`)}},
			[]string{"migrate test database", "x.db"}},
		{"unparsable", postgres, at("postgres://user:s3cret@127.0.0.1:notaport/db"), schema,
			[]string{"open test database", "cannot parse"}},
		{"nobody listening", postgres, at("postgres://user:s3cret@127.0.0.1:1/db?connect_timeout=2"), schema,
			[]string{"open test database", "127.0.0.1"}},
		{"postgres newer than build", postgres, newer(postgres), schema, []string{"migrate test database", "does not know"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, err := tc.engine.open(tc.loc(t), tc.schema)
			if err == nil {
				db.Close()
				t.Fatalf("open succeeded; want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("open error = %v; want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("open error = %v; it leaks the password", err)
			}
		})
	}
}

func TestEngine(t *testing.T) {
	tests := []struct {
		dsn  string
		want sqlmigrate.Dialect
	}{
		{"", sqlmigrate.SQLite},
		{"postgres://u@db/x", sqlmigrate.Postgres},
		{"postgresql://u@db/x", sqlmigrate.Postgres},
		{"mysql://u:s3cret@db/x", ""},
		{"host=db password=s3cret", ""},
		{"sqlite:///tmp/x.db", ""},
	}
	for _, tc := range tests {
		got, err := sqlstore.Engine(tc.dsn)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("Engine(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "dsn must be a postgres:// or postgresql:// URL")) {
			t.Errorf("Engine(%q) error = %v; want the accepted forms and no password", tc.dsn, err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"postgres://u:s3cret@db:5432/x?sslmode=disable", "postgres://u:xxxxx@db:5432/x?sslmode=disable"},
		{"postgres://u@db/x", "postgres://u@db/x"},
		{"postgresql://u:s3cret@db:port/x", "postgresql://(unparsable URL)"},
		{"host=db password=s3cret user=u", "host=db password=xxxxx user=u"},
		{"host=db password = 's3 cret' user=u", "host=db password = xxxxx user=u"},
		{"host=db user=u", "host=db user=u"},
	}
	for _, tc := range tests {
		if got := sqlstore.Redact(tc.dsn); got != tc.want {
			t.Errorf("Redact(%q) = %q; want %q", tc.dsn, got, tc.want)
		}
	}
}

// TestOpen: the dsn picks the opener, and each error names the config value
// at fault without a password.
func TestOpen(t *testing.T) {
	dataDir := t.TempDir()
	aFile := filepath.Join(dataDir, "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	failed := errors.New("opener failed")
	tests := []struct {
		name        string
		target      sqlstore.Target
		openerFails bool
		want        string // the store opened, or the error's text
	}{
		{"sqlite", sqlstore.Target{Name: "x", DataDir: dataDir, File: "x.db"}, false, "sqlite " + filepath.Join(dataDir, "x.db")},
		{"postgres", sqlstore.Target{Name: "x", DSN: "postgres://u:s3cret@db/x"}, false, "postgres postgres://u:s3cret@db/x"},
		{"postgresql", sqlstore.Target{Name: "x", DSN: "postgresql://db/x"}, false, "postgres postgresql://db/x"},
		{"other scheme", sqlstore.Target{Name: "x", DSN: "mysql://u:s3cret@db/x"}, false,
			"x config: dsn must be a postgres:// or postgresql:// URL (PostgreSQL), or left out for SQLite in the data directory; " +
				"other schemes and key=value strings are not accepted"},
		{"key=value", sqlstore.Target{Name: "x", DSN: "host=db password=s3cret"}, false, "x config: dsn must be"},
		{"postgres fails", sqlstore.Target{Name: "x", DSN: "postgres://u:s3cret@db/x"}, true,
			"x config: dsn postgres://u:xxxxx@db/x: opener failed"},
		{"postgres unparsable fails", sqlstore.Target{Name: "x", DSN: "postgresql://u:s3cret@db:port/x"}, true,
			"x config: dsn postgresql://(unparsable URL): opener failed"},
		{"no data dir", sqlstore.Target{Name: "x", File: "x.db"}, false, "x: the host gave no data directory"},
		{"data dir missing", sqlstore.Target{Name: "x", DataDir: filepath.Join(dataDir, "gone"), File: "x.db"}, false, "x: data directory: "},
		{"data dir a file", sqlstore.Target{Name: "x", DataDir: aFile, File: "x.db"}, false,
			`x: data directory "` + aFile + `" is not a directory`},
		{"sqlite fails", sqlstore.Target{Name: "x", DataDir: dataDir, File: "x.db"}, true, "x: opener failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opener := func(engine string) func(context.Context, string) (string, error) {
				return func(_ context.Context, loc string) (string, error) {
					if tc.openerFails {
						return "", failed
					}
					return engine + " " + loc, nil
				}
			}
			got, err := sqlstore.Open(context.Background(), tc.target, opener("sqlite"), opener("postgres"))
			if err != nil {
				got = err.Error()
				if got == "" || strings.Contains(got, "s3cret") {
					t.Fatalf("Open error = %q; want one without the password", got)
				}
				if tc.openerFails && !errors.Is(err, failed) {
					t.Errorf("Open error = %v; want it to wrap the opener's", err)
				}
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Open = %q; want %q", got, tc.want)
			}
		})
	}
}
