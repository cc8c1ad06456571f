// Package migrations holds the subscription schema history as numbered SQL
// files (NNNN_name.sql), applied in order by sdk/sqlmigrate.
//
// There is one history, written once per engine: sqlite/ and postgres/ hold
// the same versions under the same names (sqlmigrate.LoadDialect refuses
// them otherwise). SQLite stores times as fixed-width RFC 3339 UTC text
// ("2006-01-02T15:04:05Z"), which sorts chronologically as plain text;
// PostgreSQL stores them as timestamptz. Constraints and the partial unique
// index on active subscriptions are the same in both. A file, once
// released, is never edited; a change is a new file in both directories.
package migrations
