package migrate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/plugins/booking/internal/store/migrate"
	"github.com/capgate/capgate/plugins/booking/internal/store/migrations"
)

func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newDB(t *testing.T) *sql.DB {
	t.Helper()
	return openDB(t, filepath.Join(t.TempDir(), "test.db"))
}

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func mustLoad(t *testing.T, fsys fstest.MapFS) []migrate.Migration {
	t.Helper()
	ms, err := migrate.Load(fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return ms
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`, name).Scan(&n); err != nil {
		t.Fatalf("look up table %s: %v", name, err)
	}
	return n == 1
}

func version(t *testing.T, db *sql.DB) int {
	t.Helper()
	v, err := migrate.Current(context.Background(), db)
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
			ms, err := migrate.Load(tc.fsys)
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

// The shipped history must load, so a misnamed file fails here and not at
// a user's start-up.
func TestShippedMigrationsApply(t *testing.T) {
	ms, err := migrate.Load(migrations.FS)
	if err != nil {
		t.Fatalf("Load(shipped): %v", err)
	}
	db := newDB(t)
	applied, err := migrate.Apply(context.Background(), db, ms, nil)
	if err != nil || len(applied) != len(ms) {
		t.Fatalf("Apply(shipped) = %d applied, %v; want %d", len(applied), err, len(ms))
	}
	for _, table := range []string{"resources", "bookings", "seeds", "schema_migrations"} {
		if !tableExists(t, db, table) {
			t.Errorf("table %s missing after migrating", table)
		}
	}
}

var good = fstest.MapFS{
	"0001_things.sql": file("CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\nINSERT INTO things (id, name) VALUES (1, 'one');"),
	"0002_more.sql":   file("CREATE TABLE more (id INTEGER PRIMARY KEY);"),
}

func TestApplyIsIdempotent(t *testing.T) {
	db := newDB(t)
	ms := mustLoad(t, good)
	applied, err := migrate.Apply(context.Background(), db, ms, nil)
	if err != nil || len(applied) != 2 {
		t.Fatalf("first Apply = %d applied, %v; want 2", len(applied), err)
	}
	applied, err = migrate.Apply(context.Background(), db, ms, nil)
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
}

// TestApplyUpgradesInSteps: a database at version 1 gets only version 2.
func TestApplyUpgradesInSteps(t *testing.T) {
	db := newDB(t)
	all := mustLoad(t, good)
	if _, err := migrate.Apply(context.Background(), db, all[:1], nil); err != nil {
		t.Fatalf("Apply v1: %v", err)
	}
	applied, err := migrate.Apply(context.Background(), db, all, nil)
	if err != nil || len(applied) != 1 || applied[0].Version != 2 {
		t.Fatalf("Apply to v2 = %+v, %v; want just version 2", applied, err)
	}
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
			db := newDB(t)
			ms := mustLoad(t, fstest.MapFS{
				"0001_things.sql": good["0001_things.sql"],
				"0002_bad.sql":    file(tc.bad),
				"0003_after.sql":  file("CREATE TABLE after (x INTEGER);"),
			})
			applied, err := migrate.Apply(context.Background(), db, ms, nil)
			if err == nil || !strings.Contains(err.Error(), "0002_bad.sql") || !strings.Contains(err.Error(), "stays at version 1") {
				t.Fatalf("Apply error = %v; want it to name 0002_bad.sql and version 1", err)
			}
			if len(applied) != 1 || applied[0].Version != 1 {
				t.Fatalf("applied = %+v; want only version 1", applied)
			}
			if v := version(t, db); v != 1 {
				t.Fatalf("version after failure = %d; want 1", v)
			}
			if tableExists(t, db, "half") || tableExists(t, db, "after") {
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
			applied, err = migrate.Apply(context.Background(), db, fixed, nil)
			if err != nil || len(applied) != 2 || version(t, db) != 3 {
				t.Fatalf("Apply after fix = %d applied, %v; want versions 2 and 3", len(applied), err)
			}
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
			db := newDB(t)
			if _, err := migrate.Apply(context.Background(), db, mustLoad(t, good), nil); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			_, err := migrate.Apply(context.Background(), db, mustLoad(t, tc.later), nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Apply error = %v; want it to contain %q", err, tc.wantErr)
			}
			if v := version(t, db); v != 2 {
				t.Fatalf("version = %d; want 2, untouched", v)
			}
		})
	}
}

func TestApplyLockFailureAppliesNothing(t *testing.T) {
	db := newDB(t)
	lock := func(ctx context.Context, tx *sql.Tx) error { return errors.New("lock unavailable") }
	applied, err := migrate.Apply(context.Background(), db, mustLoad(t, good), lock)
	if err == nil || !strings.Contains(err.Error(), "lock unavailable") || len(applied) != 0 {
		t.Fatalf("Apply = %d applied, %v; want none and the lock error", len(applied), err)
	}
	if v := version(t, db); v != 0 {
		t.Fatalf("version = %d; want 0", v)
	}
}

func TestApplyRunsLockInEveryTransaction(t *testing.T) {
	db := newDB(t)
	var calls int
	lock := func(ctx context.Context, tx *sql.Tx) error {
		calls++
		_, err := tx.ExecContext(ctx, `SELECT 1`)
		return err
	}
	if _, err := migrate.Apply(context.Background(), db, mustLoad(t, good), lock); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if calls != 2 {
		t.Fatalf("lock ran %d times; want once per migration (2)", calls)
	}
}

// TestConcurrentApply: starters racing on one fresh file apply each
// migration exactly once between them.
func TestConcurrentApply(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.db")
	ms := mustLoad(t, good)
	const n = 8
	dbs := make([]*sql.DB, n)
	for i := range dbs {
		dbs[i] = openDB(t, path)
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
			applied, err := migrate.Apply(context.Background(), dbs[i], ms, nil)
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
	var rows int
	if err := dbs[0].QueryRow(`SELECT COUNT(*) FROM things`).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("things rows = %d, %v; want 1", rows, err)
	}
}

func TestCurrentWithoutTable(t *testing.T) {
	if _, err := migrate.Current(context.Background(), newDB(t)); err == nil {
		t.Fatal("Current on a database never migrated succeeded; want an error")
	}
}

func TestApplyOnClosedDatabase(t *testing.T) {
	db := newDB(t)
	db.Close()
	if _, err := migrate.Apply(context.Background(), db, mustLoad(t, good), nil); err == nil || !strings.Contains(err.Error(), "schema_migrations") {
		t.Fatalf("Apply on a closed database error = %v; want it to name schema_migrations", err)
	}
}
