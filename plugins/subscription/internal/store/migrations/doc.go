// Package migrations holds the subscription schema history as numbered SQL
// files, one directory per engine (sqlite/0001_….sql), applied in order by
// sdk/sqlmigrate.
//
// SQLite stores times as fixed-width RFC 3339 UTC text
// ("2006-01-02T15:04:05Z"), which sorts chronologically as plain text. A
// PostgreSQL store adds a postgres/ directory holding the same versions
// under the same names; sqlmigrate.LoadDialect refuses histories that
// drift apart. A file, once released, is never edited; a change is a new
// file.
package migrations
