// Package sqlstore is the storage plumbing a plugin with a SQL store shares
// with the others: choosing the engine from the plugin's dsn config key,
// opening SQLite in the plugin's data directory or a PostgreSQL pool, and
// migrating either to the latest schema with sdk/sqlmigrate.
//
// A plugin keeps its own SQL and store type; it hands this package its
// migrations and names, and gets back an open, migrated handle:
//
//	sch := sqlstore.Schema{Name: "booking", Migrations: migrations.FS, Log: log}
//	db, err := sqlstore.OpenSQLite(ctx, path, sch)      // *sql.DB
//	pool, err := sqlstore.OpenPostgres(ctx, dsn, sch)   // *pgxpool.Pool
//
// Open picks between the two from the dsn value (empty: SQLite file in the
// data directory; postgres:// or postgresql:// URL: PostgreSQL; anything
// else: an error naming the dsn key). No error or log line of this package
// holds a password: DSNs in messages pass through Redact.
package sqlstore
