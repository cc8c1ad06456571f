// Package store is the booking plugin's storage contract.
//
// Store is what the booking service needs from a database: resources,
// bookings, and a one-time seed. Every rule that must hold across processes
// (one active booking per slot, a booking cancelled at most once, a seed
// applied once) is decided by the database inside a single statement or
// transaction, never by a lock in this process, so several plugin processes
// may share one database.
//
// Implementations live in sub-packages (sqlite, postgres). They share the schema
// history in package migrations (one directory per engine, applied by
// sdk/sqlmigrate) and must pass storetest.RunContract.
package store
