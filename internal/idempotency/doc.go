// Package idempotency is the store behind idempotency keys: an action call
// that carries a key (MCP _meta "io.capgate/idempotency-key"), repeated by
// the same user with the same key and the same request within the
// retention window, gets the first call's outcome back instead of running
// again — on one host or across replicas sharing a database.
//
// # Records
//
// A record is keyed by (user id, key) and remembers the capability and the
// request's Fingerprint (FingerprintOf: SHA-256 over the capability and the
// canonical JSON of the arguments; the caller computes it with that helper
// and passes it in). It is pending while its claimer runs the action, for
// at most a lease, and done once the claimer records the outcome: a result
// (its JSON bytes) or a tool error (code and message). It lives until
// expires_at, the claim's time plus the retention; after that it counts as
// absent, and Purge deletes it.
//
// # Use
//
//	fp, err := idempotency.FingerprintOf(capability, args)
//	res, err := store.Claim(ctx, idempotency.Request{UserID: user, Key: key, Capability: capability, Fingerprint: fp}, lease, retention)
//	switch res.Status {
//	case idempotency.Claimed:    // run the action, then store.Complete(ctx, res.Ticket, outcome)
//	                             // or, when nothing ran, store.Release(ctx, res.Ticket)
//	case idempotency.Replay:     // answer res.Outcome; run nothing
//	case idempotency.InProgress: // the first attempt still runs; run nothing, retry after res.LeaseUntil
//	case idempotency.Mismatch:   // the key belongs to another request: refuse (res.Differs says what differs)
//	}
//
// # What the store guarantees
//
//   - Claim, Complete, Release and Purge are each one statement, settled by
//     the database (INSERT … ON CONFLICT … DO UPDATE … WHERE, conditional
//     UPDATE and DELETE). No record is ever half written, and no decision
//     rests on a read made earlier by this process.
//   - Of any number of concurrent claims of one (user, key) — goroutines,
//     processes on one SQLite file, replicas on one PostgreSQL — exactly one
//     is Claimed while a claim is live; the others see InProgress (same
//     request) or Mismatch (another one).
//   - Once Complete returns nil, every claim of the same request until
//     expiry is a Replay of exactly that outcome, byte for byte.
//   - A key is bound to its first request for the retention window, also
//     while pending and after a lease ran out: another capability or other
//     arguments are a Mismatch, never a takeover.
//   - A pending claim whose lease ran out (its host died mid-call) is taken
//     over by exactly one later claim of the same request, which gets a new
//     ticket and Attempt > 1; the old ticket can then neither Complete nor
//     Release (ErrNotHeld).
//
// # What it does not guarantee
//
//   - Exactly-once execution. A host killed after the plugin committed and
//     before Complete leaves a pending claim; once its lease runs out, a
//     retry is Claimed again (Attempt > 1) and the action runs a second
//     time. The caller should log such takeovers and rely on the plugin's
//     own checks for that rare case (a second booking.create then meets a
//     taken slot, as every retry did before idempotency keys).
//   - Leases are not renewed. A call that outlives its lease may still
//     Complete as long as no other claim took over; once one has, the two
//     attempts may run side by side and the first one's Complete is refused.
//     Choose a lease longer than the longest call the gate allows.
//   - Leases and expiry compare against each host's clock (kept to the
//     second): clock skew between replicas shortens or lengthens them by
//     the skew. Keep clocks synchronised and leases well above the skew.
//   - A Claim that fails with an error may have claimed the key anyway; the
//     claim is then held by nobody, and a retry is InProgress until the
//     lease runs out and then takes it over.
//   - Authorisation. The store scopes keys per user id and trusts the one
//     it is given; the gate authorises the call before it claims.
//   - Outcomes above MaxOutcomeSize are refused by Complete, not stored; the
//     claim stays held and the caller decides (see Store.Complete).
//
// # Engines
//
// SQLite (pure Go, modernc.org/sqlite) in a file of the host's data
// directory is the embedded default; PostgreSQL (pgx v5 pool) is for
// replicas. Open picks one from a DSN exactly as plugins do
// (sdk/sqlstore.Engine). Both run the same statements on the same schema,
// migrated by sdk/sqlmigrate with its own history table (HistoryTable) so
// the store can share a PostgreSQL schema with the verticals. Package
// idempotencytest is the contract both engines pass.
package idempotency
