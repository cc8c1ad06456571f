// Package store is the subscription plugin's storage contract.
//
// Store is what the subscription service needs from a database: a plan
// catalogue, users' subscriptions, and a one-time seed. Every rule that must
// hold across processes (one active subscription per plan and user, a
// subscription cancelled at most once, a seed applied once) is decided by the
// database inside a single statement or transaction, never by a lock in this
// process, so several plugin processes may share one database.
//
// Implementations live in sub-packages (sqlite, postgres). They share the schema
// history in package migrations and must pass storetest.RunContract.
package store
