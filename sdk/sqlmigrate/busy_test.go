package sqlmigrate

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// A SQLite BEGIN that finds the file busy and is not made to wait (here: a
// pool without a busy timeout, as SQLite behaves while another connection
// switches a fresh file to WAL) is retried until the holder lets go, not
// failed: starters racing on one fresh file all get through.
func TestBeginRetriesABusyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	holder, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	ctx := context.Background()
	held, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waiter.BeginTx(ctx, nil); !isBusy(err) {
		t.Fatalf("a BEGIN on the held file without a busy timeout = %v, want SQLITE_BUSY", err)
	}
	time.AfterFunc(150*time.Millisecond, func() { _ = held.Rollback() })
	tx, err := runner{db: waiter, d: SQLite, table: "m"}.begin(ctx)
	if err != nil {
		t.Fatalf("begin while the file is held for 150ms: %v", err)
	}
	_ = tx.Rollback()

	// A context that ends stops the retrying.
	held, err = holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := (runner{db: waiter, d: SQLite, table: "m"}).begin(cctx); err == nil {
		t.Fatal("begin succeeded on a file held past the context's end")
	}
}
