package approvals

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlmigrate"
)

// TestUpgradeKeepsRequests: a database at migration 3, holding a pending
// and a done request, upgrades to the redacted copies: the pending keeps
// its raw arguments to run and shows none, the done loses them.
func TestUpgradeKeepsRequests(t *testing.T) {
	ctx := context.Background()
	for _, engine := range []struct {
		name    string
		dialect sqlmigrate.Dialect
		open    func(t *testing.T) (*sql.DB, func(*testing.T) *Store)
	}{
		{"sqlite", sqlmigrate.SQLite, func(t *testing.T) (*sql.DB, func(*testing.T) *Store) {
			path := filepath.Join(t.TempDir(), FileName)
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			return db, func(t *testing.T) *Store {
				s, err := OpenSQLite(ctx, path, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
		{"postgres", sqlmigrate.Postgres, func(t *testing.T) (*sql.DB, func(*testing.T) *Store) {
			dsn := pgtest.SchemaDSN(t)
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			return stdlib.OpenDBFromPool(pool), func(t *testing.T) *Store {
				s, err := OpenPostgres(ctx, dsn, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			db, open := engine.open(t)
			defer db.Close()
			sub, err := fs.Sub(migrationFiles, "migrations")
			if err != nil {
				t.Fatal(err)
			}
			ms, err := sqlmigrate.LoadDialect(sub, engine.dialect)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sqlmigrate.Apply(ctx, db, engine.dialect, ms[:3], sqlmigrate.WithTable(HistoryTable)); err != nil {
				t.Fatal(err)
			}
			ts := func(s string) any {
				if engine.dialect == sqlmigrate.SQLite {
					return s
				}
				return strings.Replace(s, "T", " ", 1)
			}
			digest := make([]byte, 32)
			for _, row := range []struct{ id, status, kind string }{{"ap_pending", "pending", ""}, {"ap_done", "done", "result"}} {
				var kind, outcome any
				if row.kind != "" {
					kind, outcome = row.kind, []byte(`{}`)
				}
				if _, err := db.ExecContext(ctx, `INSERT INTO approvals (id, token_label, role, scope, user_id, capability, args, args_sha256,
					risk, status, created_at, expires_at, outcome_kind, outcome) VALUES ($1, 'shop', 'customer', 'action', 'alice', 'account.reset',
					$2, $3, 'dangerous', $4, $5, $6, $7, $8)`, row.id, []byte(`{"password":"hunter2"}`), digest, row.status,
					ts("2026-12-01T12:00:00Z"), ts("2099-12-01T12:00:00Z"), kind, outcome); err != nil {
					t.Fatal(err)
				}
			}
			s := open(t)
			defer s.Close()
			pending, err := s.Get(ctx, "ap_pending")
			if err != nil {
				t.Fatal(err)
			}
			if string(pending.Args) != `{"password":"hunter2"}` || string(pending.Shown) != Withheld {
				t.Errorf("pending after the upgrade: args %s, shown %s; want the raw kept to run and nothing shown", pending.Args, pending.Shown)
			}
			done, err := s.Get(ctx, "ap_done")
			if err != nil {
				t.Fatal(err)
			}
			if done.Args != nil || done.Status != Done || string(done.Shown) != Withheld {
				t.Errorf("done after the upgrade: args %s, status %s, shown %s; want the raw gone", done.Args, done.Status, done.Shown)
			}
		})
	}
}
