// Package events is capgate's event bus: the seam through which plugins tell
// each other, and the agents, what happened ("booking.cancelled",
// "catalogue.upsert", ...).
//
// A [Bus] assigns every published [Event] a cursor that increases strictly
// within the bus, keeps a bounded window of the most recent events for
// polling ([Bus.Since], behind the events pack's events.poll), and delivers
// every event to named subscribers in order, at least once: a handler that
// returns an error gets the same event again after a backoff, and nothing
// after it is delivered first.
//
// One implementation, [NATS], serves every host: a JetStream stream whose
// sequence is the cursor, with a durable pull consumer per subscriber name.
// Its stream lives either
//
//   - in an embedded NATS server ([OpenEmbedded]), the default: started
//     inside the host process with its store in <data_dir>/events,
//     listening on no port, and locked against a second process; or
//   - on a NATS server of the operator's ([OpenNATS]), which replicas share.
//
// Either way the stream, its ID and its cursors outlive the host: a cursor
// kept before a restart (an agent's events.poll position, the search
// index's) stays valid after it, and a subscriber resumes where its last
// acknowledgement left it. Package eventstest runs one contract suite
// against both.
//
// What an acknowledged publish guarantees on the embedded store: JetStream
// writes a single-replica stream's message to its block file (write(2))
// before it acknowledges it, so once Publish has returned a cursor the
// event survives the host process dying in any way (kill -9, the OOM
// killer, a crash): the kernel holds it. The server fsyncs the store in
// the background every two minutes, and Close fsyncs it after stopping the
// server; a power loss or kernel crash before then can lose the events
// acknowledged since the last fsync, and a cursor kept beyond the stream's
// end then points past the newest event. [EmbeddedConfig.SyncAlways] fsyncs every
// event before acknowledging it, for that case too, at a cost per publish
// measured by BenchmarkEmbeddedPublish; the host does not set it.
// Subscribers' acknowledgements are written within about 100 ms, so after
// a kill a subscriber may get its last events again: at least once, never
// lost.
//
// On an operator's server the host gives the bus an outbox in its
// data_dir ([NATSConfig.OutboxDir]): an event the server has not
// acknowledged within a second is fsynced there instead, Publish returns
// cursor 0, and the outbox sends what it holds in order, deduplicated by
// message id, once the server answers, also after a restart of the host.
// A call that publishes never waits on an absent server, and an event it
// published is not lost with it.
//
// Events outside the retained window are gone: a subscriber that falls
// further behind than the window resumes at the oldest retained event, and
// [Bus.Since] answers [ErrCursorTooOld].
package events
