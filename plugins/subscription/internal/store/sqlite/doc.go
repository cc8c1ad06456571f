// Package sqlite is the SQLite implementation of store.Store, on the pure-Go
// modernc.org/sqlite driver.
//
// The database runs in WAL mode with a busy timeout and foreign keys on, and
// every explicit transaction begins IMMEDIATE: it takes the write lock up
// front, so concurrent writers (also in other processes) queue behind the
// busy timeout instead of failing on a lock upgrade. Races between writers
// are settled by the schema (the partial unique index on active
// subscriptions, the conditional UPDATE of a cancel), never by a lock in
// this process.
package sqlite
