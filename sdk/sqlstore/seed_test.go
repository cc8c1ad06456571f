package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// seedHistory is a seeds table and a guard table, for both engines.
var seedHistory = fstest.MapFS{
	"sqlite/0001_seed.sql": file(`CREATE TABLE seeds (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL);
CREATE TABLE items (id TEXT PRIMARY KEY);`),
	"postgres/0001_seed.sql": file(`CREATE TABLE seeds (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL);
CREATE TABLE items (id TEXT PRIMARY KEY);`),
}

// seeder runs one engine's seed function with a writer of SQL statements.
type seeder struct {
	name string
	// open returns a seed function and a plain handle to count rows.
	open func(t *testing.T) (seed func(s sqlstore.Seed, stmts ...string) (bool, error), db *sql.DB)
	at   any
}

var seeders = []seeder{
	{
		name: "sqlite",
		at:   "2030-01-01T00:00:00Z",
		open: func(t *testing.T) (func(sqlstore.Seed, ...string) (bool, error), *sql.DB) {
			db, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlstore.Schema{Name: "test", Migrations: seedHistory})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return func(s sqlstore.Seed, stmts ...string) (bool, error) {
				return sqlstore.SeedSQLite(context.Background(), db, s, func(tx *sql.Tx) error {
					for _, q := range stmts {
						if _, err := tx.Exec(q); err != nil {
							return err
						}
					}
					return nil
				})
			}, db
		},
	},
	{
		name: "postgres",
		at:   time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		open: func(t *testing.T) (func(sqlstore.Seed, ...string) (bool, error), *sql.DB) {
			dsn := pgtest.SchemaDSN(t)
			pool, err := sqlstore.OpenPostgres(context.Background(), dsn, sqlstore.Schema{Name: "test", Migrations: seedHistory})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return func(s sqlstore.Seed, stmts ...string) (bool, error) {
				return sqlstore.SeedPostgres(context.Background(), pool, s, func(tx pgx.Tx) error {
					for _, q := range stmts {
						if _, err := tx.Exec(context.Background(), q); err != nil {
							return err
						}
					}
					return nil
				})
			}, db
		},
	},
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSeed: a seed applies once, never over existing data, and a failing
// writer leaves nothing behind.
func TestSeed(t *testing.T) {
	for _, e := range seeders {
		t.Run(e.name, func(t *testing.T) {
			demo := sqlstore.Seed{Name: "demo", Table: "seeds", Guard: "items", AppliedAt: e.at}

			t.Run("applies once", func(t *testing.T) {
				seed, db := e.open(t)
				if ok, err := seed(demo, `INSERT INTO items (id) VALUES ('a')`); !ok || err != nil {
					t.Fatalf("first seed = %v, %v; want applied", ok, err)
				}
				if ok, err := seed(demo, `INSERT INTO items (id) VALUES ('b')`); ok || err != nil {
					t.Fatalf("second seed = %v, %v; want not applied", ok, err)
				}
				if n := count(t, db, "items"); n != 1 {
					t.Errorf("%d items, want the first seed's 1", n)
				}
			})
			t.Run("never over existing data", func(t *testing.T) {
				seed, db := e.open(t)
				if _, err := db.Exec(`INSERT INTO items (id) VALUES ('real')`); err != nil {
					t.Fatal(err)
				}
				if ok, err := seed(demo, `INSERT INTO items (id) VALUES ('a')`); ok || err != nil {
					t.Fatalf("seed over data = %v, %v; want not applied", ok, err)
				}
				if n := count(t, db, "seeds"); n != 0 {
					t.Errorf("%d seeds recorded, want none", n)
				}
			})
			t.Run("a failing writer leaves nothing", func(t *testing.T) {
				seed, db := e.open(t)
				ok, err := seed(demo, `INSERT INTO items (id) VALUES ('a')`, `INSERT INTO nowhere (id) VALUES ('b')`)
				if ok || err == nil || !strings.Contains(err.Error(), `seed "demo"`) {
					t.Fatalf("failing seed = %v, %v; want an error naming the seed", ok, err)
				}
				if n := count(t, db, "items") + count(t, db, "seeds"); n != 0 {
					t.Errorf("%d rows left by a failed seed, want none", n)
				}
				if ok, err := seed(demo, `INSERT INTO items (id) VALUES ('a')`); !ok || err != nil {
					t.Errorf("seed after a failed one = %v, %v; want applied", ok, err)
				}
			})
			t.Run("table names are identifiers", func(t *testing.T) {
				seed, _ := e.open(t)
				bad := demo
				bad.Guard = "items; DROP TABLE seeds"
				if _, err := seed(bad); err == nil || !strings.Contains(err.Error(), "plain lower-case identifiers") {
					t.Errorf("seed with a bad table name: %v", err)
				}
			})
		})
	}
}
