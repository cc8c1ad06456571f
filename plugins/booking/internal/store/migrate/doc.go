// Package migrate applies a versioned schema history to a database/sql
// database.
//
// Migrations are SQL files named NNNN_name.sql, numbered 1, 2, 3, … without
// gaps. Each runs in its own transaction together with the row recording it
// in schema_migrations, so a failing migration leaves the database exactly
// at the previous version, and a database already up to date gets no
// change at all. The runner's own SQL is portable (SQLite and PostgreSQL).
package migrate
