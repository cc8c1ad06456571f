// Package migrations holds the booking schema history as numbered SQL files
// (NNNN_name.sql), applied in order by package migrate.
//
// The files are shared by every storage engine, so they stick to SQL that
// SQLite and PostgreSQL both accept: TEXT, INTEGER, CHECK, foreign keys and
// partial indexes. Times are stored as fixed-width RFC 3339 UTC text
// ("2006-01-02T15:04:05Z"), which sorts chronologically as plain text.
// A file, once released, is never edited; a change is a new file.
package migrations
