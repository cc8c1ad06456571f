package migrations_test

import (
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/store/migrations"
	"github.com/capgate/capgate/sdk/sqlstore/sqlstoretest"
)

// The shipped history must load for every engine, with the same versions
// and names in each, and apply, recording itself in the vertical's history
// table.
func TestShippedMigrationsApply(t *testing.T) {
	sqlstoretest.CheckSchema(t, migrations.Schema(nil), "resources", "bookings", "seeds", "schema_migrations")
}
