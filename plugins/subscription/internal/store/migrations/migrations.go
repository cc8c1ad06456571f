package migrations

import "embed"

// HistoryTable is where the applied migrations are recorded: a table of the
// vertical's own, so booking and subscription may share one PostgreSQL
// schema without reading each other's history.
const HistoryTable = "subscription_schema_migrations"

// FS holds the migration files, under a directory per sqlmigrate.Dialect.
//
//go:embed sqlite/*.sql postgres/*.sql
var FS embed.FS
