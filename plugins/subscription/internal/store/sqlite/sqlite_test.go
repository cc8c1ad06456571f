package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/plugins/subscription/internal/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.RunContract(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "subscription.db"), nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}
