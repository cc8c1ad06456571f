package migrations

import (
	"embed"
	"log/slog"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// FS holds the migration files, one directory per sqlmigrate.Dialect.
//
//go:embed sqlite/*.sql postgres/*.sql
var FS embed.FS

// Schema is what the stores of both engines open their database with;
// applied migrations are logged to log (nil: discard).
func Schema(log *slog.Logger) sqlstore.Schema {
	return sqlstore.Schema{
		Name:       "booking",
		Migrations: FS,
		Log:        log,
	}
}
