package sqlstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// TestOpenSQLiteConcurrently: processes that open one fresh file at the
// same moment (a host creating its store while an operator's command
// reads it) all get it, migrated once: the first open of a file turns it
// to WAL, which a second one meeting it half-way would otherwise be
// refused with SQLITE_BUSY, whatever the busy timeout.
func TestOpenSQLiteConcurrently(t *testing.T) {
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "test.db")
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				db, err := sqlstore.OpenSQLite(context.Background(), path, sqlstore.Schema{Name: "test", Migrations: history})
				if err != nil {
					errs <- err
					return
				}
				db.Close()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
