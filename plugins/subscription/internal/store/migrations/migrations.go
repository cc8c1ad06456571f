package migrations

import "embed"

// FS holds the migration files, under a directory per sqlmigrate.Dialect.
//
//go:embed sqlite/*.sql postgres/*.sql
var FS embed.FS
