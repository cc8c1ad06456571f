// Package sqlmigrate applies a plugin's versioned schema history to a
// database/sql database, SQLite or PostgreSQL.
//
// # Files
//
// Migrations are embedded SQL files named NNNN_name.sql, numbered 1, 2, 3, …
// without gaps. A file, once released, is never edited; a change is a new
// file.
//
// # One history, SQL per engine
//
// A plugin that supports both engines keeps one directory per engine at the
// root of its embedded file system, named after the Dialect:
//
//	migrations/
//	    sqlite/0001_create_things.sql
//	    sqlite/0002_add_index.sql
//	    postgres/0001_create_things.sql
//	    postgres/0002_add_index.sql
//
//	//go:embed sqlite/*.sql postgres/*.sql
//	var FS embed.FS
//
// Both directories hold the same versions under the same names: step N is
// one change of the schema, written once per dialect (TEXT times on SQLite,
// timestamptz on PostgreSQL, and so on). LoadDialect loads the directory of
// one dialect and refuses to return it when any other dialect directory
// present in the file system has a different list of versions or names, so
// the two histories cannot drift apart unnoticed: a plugin's start-up (and
// its tests) fail first. A plugin with one engine may keep its files at the
// root and use Load.
//
// # Applying
//
// Apply records each applied step (version, file name, time) in a history
// table, schema_migrations unless WithTable names another (two verticals
// sharing one PostgreSQL schema need different tables). Each step runs in
// its own transaction together with the row that records it, so a failing
// step leaves the database exactly at the previous version, and a database
// already up to date gets no change at all. A database whose recorded
// history differs from the files (an unknown version, a renamed file) is
// refused.
//
// Several processes may migrate one database at once — replicas starting
// together. On PostgreSQL every transaction of the run (creating the history
// table, each step) first takes a transaction-scoped advisory lock
// (pg_advisory_xact_lock) keyed by the history table and the current schema,
// and re-reads the version under it, so each step is applied exactly once;
// the lock is released by the commit or rollback, even when the connection
// is lost. SQLite serialises writers itself: open it so that transactions
// begin IMMEDIATE (modernc.org/sqlite: _txlock=immediate) with a busy
// timeout.
package sqlmigrate
