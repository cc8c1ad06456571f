// Package search is capgate's search plugin: platform.search,
// platform.get and platform.list over a full-text index (package index) of
// every catalogue entity type the other plugins provide.
//
// # Keeping the index in sync
//
// The index lives in <data_dir>/index and keeps, besides the documents, a
// stored version per entity type and the sync state: the id of the event
// bus and the cursor of the last event applied.
//
// On start the plugin reads the bus's state first (so nothing published
// during the sync is missed) and the catalogue. It resumes from its stored
// cursor only when that cursor belongs to the same bus and is still
// retained there; otherwise events may have been missed and every entity
// type is synced in full. An entity type whose provider now states another
// version is synced in full in either case; one no plugin provides any
// more is dropped. A full sync clears the type's version first, pages
// through the provider's documents, and sets the version last, so a sync
// cut short by a crash is redone on the next start. Rebuild (`capgate
// search reindex`) discards the whole index first.
//
// Once started, a goroutine follows the bus's "catalogue.upsert" and
// "catalogue.delete" events. For an upsert it fetches the document from
// its provider (a document gone since is deleted); a delete deletes. The
// document change and the event's cursor are written in one index batch,
// so across a crash or restart no event is applied twice and none is
// lost; events at or below the stored cursor are ignored. Events of types
// outside the catalogue only move the cursor. A subscription that fell
// behind the bus's retained window (sdk.ErrEventsLost) resyncs every type
// and continues from the bus's last cursor; other failures are retried
// with backoff (1 s doubling to 30 s).
//
// Searches run concurrently with all of this: bleve serves each search
// from a consistent snapshot.
//
// # Limits
//
// The capabilities' inputs and outputs are the contract package
// sdk/platform defines, the schemas agents see included. Every input is
// bounded in its schema, so agents read the limits in tools/list and the
// host refuses over-limit arguments before the plugin runs; the plugin
// checks the same bounds itself, for a caller that skipped the host. A query has at most 500 characters and 32 terms (the
// index's limits, which also cap the work of typo and prefix matching),
// and each search runs under the query_timeout config key (default 2s):
// a search still running then stops, and the agent is told to narrow the
// query. An over-limit query and a timed-out search are InvalidInput
// results; no error quotes more than the start of a caller's input.
package search
