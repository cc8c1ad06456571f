package migrations

import (
	"embed"
	"log/slog"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// HistoryTable is where the applied migrations are recorded: a table of the
// vertical's own, so booking and subscription may share one PostgreSQL
// schema without reading each other's history.
const HistoryTable = "subscription_schema_migrations"

// FS holds the migration files, under a directory per sqlmigrate.Dialect.
//
//go:embed sqlite/*.sql postgres/*.sql
var FS embed.FS

// Schema is what the stores of both engines open their database with;
// applied migrations are logged to log (nil: discard).
func Schema(log *slog.Logger) sqlstore.Schema {
	return sqlstore.Schema{
		Name:         "subscription",
		Migrations:   FS,
		HistoryTable: HistoryTable,
		Log:          log,
	}
}
