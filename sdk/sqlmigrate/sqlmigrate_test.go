package sqlmigrate_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
)

// engine opens fresh, empty databases of one dialect.
type engine struct {
	d sqlmigrate.Dialect
	// fresh returns a name for a new empty database; open opens it (again).
	fresh func(t *testing.T) string
	open  func(t *testing.T, name string) *sql.DB
}

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatalf("open %s: %v", pgtest.Redact(dsn), err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var engines = []engine{
	{
		d:     sqlmigrate.SQLite,
		fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "test.db") },
		open:  openSQLite,
	},
	{
		d:     sqlmigrate.Postgres,
		fresh: func(t *testing.T) string { return pgtest.SchemaDSN(t) },
		open:  openPostgres,
	},
}

// forEngines runs f once per engine, as subtests named after the dialect.
func forEngines(t *testing.T, f func(t *testing.T, e engine)) {
	for _, e := range engines {
		t.Run(string(e.d), func(t *testing.T) {
			t.Parallel()
			f(t, e)
		})
	}
}

func (e engine) newDB(t *testing.T) *sql.DB { return e.open(t, e.fresh(t)) }

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func mustLoad(t *testing.T, fsys fstest.MapFS) []sqlmigrate.Migration {
	t.Helper()
	ms, err := sqlmigrate.Load(fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return ms
}

func (e engine) tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	if e.d == sqlmigrate.Postgres {
		q = `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	}
	var n int
	if err := db.QueryRow(q, name).Scan(&n); err != nil {
		t.Fatalf("look up table %s: %v", name, err)
	}
	return n == 1
}

func version(t *testing.T, db *sql.DB, opts ...sqlmigrate.Option) int {
	t.Helper()
	v, err := sqlmigrate.Current(context.Background(), db, opts...)
	if err != nil {
		t.Fatalf("Current: %v", err)
	}
	return v
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name      string
		fsys      fstest.MapFS
		wantNames []string
		wantErr   string
	}{
		{"sorted by version, other files ignored", fstest.MapFS{
			"0002_b.sql": file("CREATE TABLE b (x INTEGER);"),
			"0001_a.sql": file("CREATE TABLE a (x INTEGER);"),
			"README.md":  file("not a migration"),
		}, []string{"0001_a.sql", "0002_b.sql"}, ""},
		{"no files", fstest.MapFS{"README.md": file("x")}, nil, "no migration files"},
		{"bad name", fstest.MapFS{"1_a.sql": file("SELECT 1;")}, nil, "name must look like"},
		{"upper-case name", fstest.MapFS{"0001_Add.sql": file("SELECT 1;")}, nil, "name must look like"},
		{"gap", fstest.MapFS{"0001_a.sql": file("SELECT 1;"), "0003_c.sql": file("SELECT 1;")}, nil, "expected version 0002"},
		{"not starting at one", fstest.MapFS{"0002_b.sql": file("SELECT 1;")}, nil, "expected version 0001"},
		{"duplicate version", fstest.MapFS{"0001_a.sql": file("SELECT 1;"), "0001_b.sql": file("SELECT 1;")}, nil, "without gaps or duplicates"},
		{"empty file", fstest.MapFS{"0001_a.sql": file("  \n")}, nil, "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := sqlmigrate.Load(tc.fsys)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load error = %v; want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var names []string
			for i, m := range ms {
				names = append(names, m.Name)
				if m.Version != i+1 {
					t.Fatalf("migration %s has version %d; want %d", m.Name, m.Version, i+1)
				}
			}
			if fmt.Sprint(names) != fmt.Sprint(tc.wantNames) {
				t.Fatalf("Load names = %v; want %v", names, tc.wantNames)
			}
		})
	}
}

func TestLoadDialect(t *testing.T) {
	both := fstest.MapFS{
		"sqlite/0001_a.sql":   file("CREATE TABLE a (t TEXT);"),
		"sqlite/0002_b.sql":   file("CREATE TABLE b (t TEXT);"),
		"postgres/0001_a.sql": file("CREATE TABLE a (t TIMESTAMPTZ);"),
		"postgres/0002_b.sql": file("CREATE TABLE b (t TIMESTAMPTZ);"),
	}
	for _, d := range sqlmigrate.Dialects {
		ms, err := sqlmigrate.LoadDialect(both, d)
		if err != nil || len(ms) != 2 {
			t.Fatalf("LoadDialect(%s) = %d migrations, %v; want 2", d, len(ms), err)
		}
		if want := "TEXT"; d == sqlmigrate.SQLite && !strings.Contains(ms[0].SQL, want) ||
			d == sqlmigrate.Postgres && !strings.Contains(ms[0].SQL, "TIMESTAMPTZ") {
			t.Fatalf("LoadDialect(%s) read %q, the other dialect's file", d, ms[0].SQL)
		}
	}
	// One dialect alone is fine.
	only := fstest.MapFS{"postgres/0001_a.sql": file("SELECT 1;")}
	if _, err := sqlmigrate.LoadDialect(only, sqlmigrate.Postgres); err != nil {
		t.Fatalf("LoadDialect with only postgres/: %v", err)
	}

	tests := []struct {
		name    string
		fsys    fstest.MapFS
		d       sqlmigrate.Dialect
		wantErr string
	}{
		{"dialect missing", only, sqlmigrate.SQLite, "sqlite migrations"},
		{"unknown dialect", both, "oracle", `unknown dialect "oracle"`},
		{"other dialect has an extra version", fstest.MapFS{
			"sqlite/0001_a.sql":   file("SELECT 1;"),
			"postgres/0001_a.sql": file("SELECT 1;"),
			"postgres/0002_b.sql": file("SELECT 1;"),
		}, sqlmigrate.SQLite, "version 0002 is (none) in sqlite/ but 0002_b.sql in postgres/"},
		{"same version, other name", fstest.MapFS{
			"sqlite/0001_a.sql":   file("SELECT 1;"),
			"postgres/0001_b.sql": file("SELECT 1;"),
		}, sqlmigrate.Postgres, "version 0001 is 0001_b.sql in postgres/ but 0001_a.sql in sqlite/"},
		{"other dialect broken", fstest.MapFS{
			"sqlite/0001_a.sql":   file("SELECT 1;"),
			"postgres/0001_a.sql": file(" "),
		}, sqlmigrate.SQLite, "postgres migrations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlmigrate.LoadDialect(tc.fsys, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("LoadDialect error = %v; want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

var good = fstest.MapFS{
	"0001_things.sql": file("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\nINSERT INTO things (id, name) VALUES (1, 'one');"),
	"0002_more.sql":   file("CREATE TABLE more (id INTEGER PRIMARY KEY);"),
}

func TestApplyIsIdempotent(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		db := e.newDB(t)
		ms := mustLoad(t, good)
		applied, err := sqlmigrate.Apply(context.Background(), db, e.d, ms)
		if err != nil || len(applied) != 2 {
			t.Fatalf("first Apply = %d applied, %v; want 2", len(applied), err)
		}
		applied, err = sqlmigrate.Apply(context.Background(), db, e.d, ms)
		if err != nil || len(applied) != 0 {
			t.Fatalf("second Apply = %d applied, %v; want none", len(applied), err)
		}
		if v := version(t, db); v != 2 {
			t.Fatalf("version = %d; want 2", v)
		}
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM things`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("things rows = %d, %v; want the one insert, run once", n, err)
		}
		var names []string
		rows, err := db.Query(`SELECT name FROM schema_migrations ORDER BY version`)
		if err != nil {
			t.Fatalf("read history: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatalf("read history: %v", err)
			}
			names = append(names, name)
		}
		if fmt.Sprint(names) != "[0001_things.sql 0002_more.sql]" {
			t.Fatalf("history = %v; want both files by name", names)
		}
	})
}

// TestApplyUpgradesInSteps: a database at version 1 gets only version 2.
func TestApplyUpgradesInSteps(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		db := e.newDB(t)
		all := mustLoad(t, good)
		if _, err := sqlmigrate.Apply(context.Background(), db, e.d, all[:1]); err != nil {
			t.Fatalf("Apply v1: %v", err)
		}
		applied, err := sqlmigrate.Apply(context.Background(), db, e.d, all)
		if err != nil || len(applied) != 1 || applied[0].Version != 2 {
			t.Fatalf("Apply to v2 = %+v, %v; want just version 2", applied, err)
		}
	})
}

// TestFailedMigrationKeepsPreviousVersion: whatever a failing migration did
// before its failing statement is rolled back with it.
func TestFailedMigrationKeepsPreviousVersion(t *testing.T) {
	tests := []struct {
		name string
		bad  string
	}{
		{"syntax error after a good statement", "CREATE TABLE half (x INTEGER);\nCREATE TABLE oops (;"},
		{"constraint failure after a good statement", "CREATE TABLE half (x INTEGER);\nINSERT INTO things (id, name) VALUES (2, NULL);"},
		{"unknown table", "CREATE TABLE half (x INTEGER);\nINSERT INTO nowhere VALUES (1);"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, e engine) {
				db := e.newDB(t)
				ms := mustLoad(t, fstest.MapFS{
					"0001_things.sql": good["0001_things.sql"],
					"0002_bad.sql":    file(tc.bad),
					"0003_after.sql":  file("CREATE TABLE after (x INTEGER);"),
				})
				applied, err := sqlmigrate.Apply(context.Background(), db, e.d, ms)
				if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") || !strings.Contains(err.Error(), "stays at version 1") {
					t.Fatalf("Apply error = %v; want it to name 0002_bad.sql and version 1", err)
				}
				if len(applied) != 1 || applied[0].Version != 1 {
					t.Fatalf("applied = %+v; want only version 1", applied)
				}
				if v := version(t, db); v != 1 {
					t.Fatalf("version after failure = %d; want 1", v)
				}
				if e.tableExists(t, db, "half") || e.tableExists(t, db, "after") {
					t.Fatal("the failed migration or a later one left a table behind")
				}
				var n int
				if err := db.QueryRow(`SELECT COUNT(*) FROM things`).Scan(&n); err != nil || n != 1 {
					t.Fatalf("version 1 data = %d rows, %v; want intact", n, err)
				}
				// Fixing the file lets the next start continue from version 1.
				fixed := mustLoad(t, fstest.MapFS{
					"0001_things.sql": good["0001_things.sql"],
					"0002_bad.sql":    file("CREATE TABLE half (x INTEGER);"),
					"0003_after.sql":  file("CREATE TABLE after (x INTEGER);"),
				})
				applied, err = sqlmigrate.Apply(context.Background(), db, e.d, fixed)
				if err != nil || len(applied) != 2 || version(t, db) != 3 {
					t.Fatalf("Apply after fix = %d applied, %v; want versions 2 and 3", len(applied), err)
				}
			})
		})
	}
}

func TestApplyRefusesForeignHistory(t *testing.T) {
	tests := []struct {
		name    string
		later   fstest.MapFS
		wantErr string
	}{
		{"database newer than build", fstest.MapFS{"0001_things.sql": good["0001_things.sql"]}, "does not know"},
		{"renamed migration", fstest.MapFS{
			"0001_things.sql":  good["0001_things.sql"],
			"0002_renamed.sql": good["0002_more.sql"],
		}, "must not be renamed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEngines(t, func(t *testing.T, e engine) {
				db := e.newDB(t)
				if _, err := sqlmigrate.Apply(context.Background(), db, e.d, mustLoad(t, good)); err != nil {
					t.Fatalf("Apply: %v", err)
				}
				_, err := sqlmigrate.Apply(context.Background(), db, e.d, mustLoad(t, tc.later))
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Apply error = %v; want it to contain %q", err, tc.wantErr)
				}
				if v := version(t, db); v != 2 {
					t.Fatalf("version = %d; want 2, untouched", v)
				}
			})
		})
	}
}

// TestWithTable: two histories in one database keep separate tables and do
// not see each other's versions.
func TestWithTable(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		db := e.newDB(t)
		other := mustLoad(t, fstest.MapFS{"0001_other.sql": file("CREATE TABLE other (x INTEGER);")})
		if _, err := sqlmigrate.Apply(context.Background(), db, e.d, mustLoad(t, good)); err != nil {
			t.Fatalf("Apply default table: %v", err)
		}
		applied, err := sqlmigrate.Apply(context.Background(), db, e.d, other, sqlmigrate.WithTable("other_migrations"))
		if err != nil || len(applied) != 1 {
			t.Fatalf("Apply other table = %d applied, %v; want 1", len(applied), err)
		}
		if v := version(t, db, sqlmigrate.WithTable("other_migrations")); v != 1 {
			t.Fatalf("other history at %d; want 1", v)
		}
		if v := version(t, db); v != 2 {
			t.Fatalf("default history at %d; want 2", v)
		}
	})
}

func TestApplyBadArguments(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "test.db"))
	ms := mustLoad(t, good)
	if _, err := sqlmigrate.Apply(context.Background(), db, "mysql", ms); err == nil || !strings.Contains(err.Error(), `unknown dialect "mysql"`) {
		t.Fatalf("Apply with unknown dialect error = %v", err)
	}
	if _, err := sqlmigrate.Apply(context.Background(), db, sqlmigrate.SQLite, ms, sqlmigrate.WithTable("x; DROP TABLE y")); err == nil || !strings.Contains(err.Error(), "SQL identifier") {
		t.Fatalf("Apply with a bad table name error = %v", err)
	}
}

// TestConcurrentApply: starters racing on one fresh database, each with
// its own pool as separate processes or replicas would have, apply each
// migration exactly once between them.
func TestConcurrentApply(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		name := e.fresh(t)
		ms := mustLoad(t, good)
		const n = 8
		dbs := make([]*sql.DB, n)
		for i := range dbs {
			dbs[i] = e.open(t, name)
		}
		counts := make([]int, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				applied, err := sqlmigrate.Apply(context.Background(), dbs[i], e.d, ms)
				counts[i], errs[i] = len(applied), err
			}()
		}
		close(start)
		wg.Wait()
		total := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("starter %d: %v", i, errs[i])
			}
			total += counts[i]
		}
		if total != len(ms) {
			t.Fatalf("starters applied %d migrations between them; want %d", total, len(ms))
		}
		var rows, history int
		if err := dbs[0].QueryRow(`SELECT COUNT(*) FROM things`).Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("things rows = %d, %v; want 1", rows, err)
		}
		if err := dbs[0].QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&history); err != nil || history != len(ms) {
			t.Fatalf("history rows = %d, %v; want %d", history, err, len(ms))
		}
	})
}

func TestCurrentWithoutTable(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		if _, err := sqlmigrate.Current(context.Background(), e.newDB(t)); err == nil || !strings.Contains(err.Error(), "schema_migrations") {
			t.Fatalf("Current on a database never migrated = %v; want an error naming schema_migrations", err)
		}
	})
}

func TestApplyOnClosedDatabase(t *testing.T) {
	forEngines(t, func(t *testing.T, e engine) {
		db := e.newDB(t)
		db.Close()
		if _, err := sqlmigrate.Apply(context.Background(), db, e.d, mustLoad(t, good)); err == nil || !strings.Contains(err.Error(), "schema_migrations") {
			t.Fatalf("Apply on a closed database error = %v; want it to name schema_migrations", err)
		}
	})
}
