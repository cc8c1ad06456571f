// Package sqlstoretest checks a plugin's shipped migrations on every engine
// sqlstore opens, so a misnamed or missing migration file fails in the
// plugin's tests and not at a user's start-up.
//
// PostgreSQL comes from sdk/pgtest, with its rules for skipping.
package sqlstoretest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// open opens a fresh database of one engine with s, closed at the test's
// cleanup, and returns it with the query counting the tables of a name.
var open = map[sqlmigrate.Dialect]func(t *testing.T, s sqlstore.Schema) (*sql.DB, string){
	sqlmigrate.SQLite: func(t *testing.T, s sqlstore.Schema) (*sql.DB, string) {
		db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), s.Name+".db"), s)
		if err != nil {
			t.Fatalf("OpenSQLite: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
	},
	sqlmigrate.Postgres: func(t *testing.T, s sqlstore.Schema) (*sql.DB, string) {
		pool, err := sqlstore.OpenPostgres(context.Background(), pgtest.SchemaDSN(t), s)
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		db := stdlib.OpenDBFromPool(pool)
		t.Cleanup(func() { db.Close(); pool.Close() })
		return db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	},
}

// CheckSchema opens a fresh database of every engine with s (so migrates
// it with the shipped history) and checks that it then holds every one of
// tables.
func CheckSchema(t *testing.T, s sqlstore.Schema, tables ...string) {
	t.Helper()
	for _, d := range sqlmigrate.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			db, tableQuery := open[d](t, s)
			for _, table := range tables {
				var n int
				if err := db.QueryRow(tableQuery, table).Scan(&n); err != nil || n != 1 {
					t.Errorf("table %s missing after migrating (%v)", table, err)
				}
			}
		})
	}
}
