// Package audit is the storage half of the gate's audit trail: every
// decision of the gate — admitted or refused, and how an admitted call
// ended — becomes a Record, written in the background by a Writer to a
// Store, and read back page by page with filters.
//
// # Records
//
// A Record holds the time, request id, protocol and version, the principal
// (the token's label from the config, never the token; role, scope, user
// id), the capability and plugin, the arguments, the decision (admitted,
// or the refusing step and reason), the outcome (ok, a tool error's code,
// or an internal error's reference), the latency, and the ID of the call
// it was made from (ParentID; nested calls such as llm.ask calling
// platform.search).
//
// Every field is bounded (MaxIDLen, MaxReasonLen, …, in bytes). A longer
// value is cut at a UTF-8 boundary and ends with Cut, invalid UTF-8 and
// NUL become U+FFFD, and arguments become a small placeholder object when
// they are not valid JSON or longer than MaxArgs: a record is never lost
// for what a field holds. What cannot be repaired — an unknown decision or
// outcome, a refusal without a step, an admitted call with one — is
// ErrInvalid, a fault of the caller. Redact prepares arguments: it
// replaces the values at sensitive paths with RedactedMarker and caps the
// size, and always returns valid JSON.
//
// # Identity and order
//
// ID (NewID) is time-ordered (ULID layout: milliseconds, then 80 bits
// counting up from a random start) and strictly increasing within a
// process. A call's ID is known
// before its record is written — the gate takes one from NewID when the
// call starts and hands it to nested calls as their ParentID, though their
// records are written first. Seq is the store's order: assigned on
// append, increasing in commit order and never reused: an append takes
// its range of numbers by updating one sequence row, whose lock it holds
// until it commits, so no batch commits before one holding lower numbers
// (SQLite serialises writers in any case). So a reader
// following the trail (Filter{Order: OldestFirst, After: last Seq seen},
// polled) meets every record exactly once, even as replicas append at
// once; records' own times may disagree with that order by the replicas'
// clock skew and flush delay.
//
// # Writing
//
// Writer.Write never blocks: it validates and bounds the record and puts
// it in a queue of WriterConfig.QueueSize records (default 10 000), or
// returns ErrQueueFull and counts a drop when the queue is at its bound. A
// background goroutine writes a batch as soon as BatchSize records
// (default 2048) are queued, and everything queued every FlushInterval
// (default 200 ms), one transaction per batch. The flush window: while
// the store accepts writes, a record Write accepted is committed within
// FlushInterval plus the time of one Append (bounded by AppendTimeout,
// default 5 s); a host that dies loses at most the records of that window.
//
// # Failures
//
// When an Append fails (or outlives AppendTimeout) the writer keeps the
// batch at the head of the queue, retries it with exponential backoff
// (DefaultBackoff: 100 ms doubling to 10 s) and reports Healthy() false
// until an Append succeeds again; records keep their order and none is
// lost while the queue has room. The gate refuses actions while the
// writer is unhealthy (refusing step "audit"), so no action runs without
// its record, and carries on with reads unless configured otherwise.
// Failures, recoveries and drops are logged with slog, by count, never
// with a record's contents. Close stops taking records, writes what is
// queued and returns; if its context ends first, it reports how many
// records were not written (Stats.Lost).
//
// # Retention and reading
//
// With WriterConfig.Retention set, the writer deletes records older than
// that at start and every RetentionInterval (default hourly), through
// Store.DeleteBefore, which deletes in batches of a thousand so it never
// holds a lock for long; replicas may run it at once. Store.Query serves
// the CLI and the admin API: filters on time (Since inclusive, Until
// exclusive), token label, user, capability, request id, decision and
// step, newest first by default, a page of DefaultLimit (at most
// MaxLimit) records and a cursor for the next.
//
// # Storage
//
// The records of one append are stored together as a block of at most
// 512, in a compact binary encoding, with the range of their seqs and
// times and the set of values the exact-match filters select. Writing a
// record costs its encoding rather than a row and an index entry per
// filter: on SQLite, about 2 µs of CPU a record instead of 36
// (BenchmarkAppendSQLite). A query reads only the blocks whose seqs,
// times and values can match, newest or oldest first, a few at a time,
// and filters their records exactly; a block that does not decode fails
// the query that meets it, naming its seq (FuzzDecodeBlock holds the
// decoder to that). Retention deletes whole blocks older than its
// cut-off and rewrites a block straddling it without its older records.
// Records written by an earlier version, a row each, are converted into
// blocks, with their seqs, the first time the store opens.
//
// # Engines
//
// SQLite (FileName in the host's data directory) is the default;
// PostgreSQL, for replicas sharing one trail, when a DSN is configured.
// Open picks one as the host's other stores do (sdk/sqlstore.Engine); the
// schema is migrated by sdk/sqlmigrate with its own history table
// (HistoryTable). Package audittest is the contract both engines pass.
package audit
