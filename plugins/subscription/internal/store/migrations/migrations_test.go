package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/plugins/subscription/internal/store/migrations"
	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
)

// The shipped history must load for every engine, with the same versions
// and names in each, and apply; a misnamed or missing file fails here and
// not at a user's start-up.
func TestShippedMigrationsApply(t *testing.T) {
	open := map[sqlmigrate.Dialect]func(t *testing.T) (*sql.DB, string){
		sqlmigrate.SQLite: func(t *testing.T) (*sql.DB, string) {
			db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "subscription.db")+"?_txlock=immediate")
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return db, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1`
		},
		sqlmigrate.Postgres: func(t *testing.T) (*sql.DB, string) {
			db, err := sql.Open("pgx", pgtest.SchemaDSN(t))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return db, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
		},
	}
	for _, d := range sqlmigrate.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ms, err := sqlmigrate.LoadDialect(migrations.FS, d)
			if err != nil {
				t.Fatalf("LoadDialect(shipped, %s): %v", d, err)
			}
			db, tableQuery := open[d](t)
			defer db.Close()
			applied, err := sqlmigrate.Apply(context.Background(), db, d, ms, sqlmigrate.WithTable(migrations.HistoryTable))
			if err != nil || len(applied) != len(ms) {
				t.Fatalf("Apply(shipped) = %d applied, %v; want %d", len(applied), err, len(ms))
			}
			for _, table := range []string{"plans", "subscriptions", "subscription_seeds", "subscription_schema_migrations"} {
				var n int
				if err := db.QueryRow(tableQuery, table).Scan(&n); err != nil || n != 1 {
					t.Errorf("table %s missing after migrating (%v)", table, err)
				}
			}
		})
	}
}
