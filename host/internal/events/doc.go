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
// Two implementations satisfy the same contract (package eventstest runs one
// suite against both):
//
//   - [InProcess], the embedded default: a ring buffer of the last N events
//     in memory. Nothing survives the process; a subscriber resumes from the
//     cursor it is given.
//   - [NATS], for scale-out: a JetStream stream whose sequence is the cursor,
//     with a durable pull consumer per subscriber name, so a restarted host or
//     a new replica resumes a subscription where its last acknowledgement
//     left it.
//
// Events outside the retained window are gone for both: a subscriber that
// falls further behind than the window resumes at the oldest retained event
// (and the skip is logged), and [Bus.Since] answers [ErrCursorTooOld].
package events
