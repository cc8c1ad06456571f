// Package approvals keeps the calls the gate held for a human's yes: who
// asked for what, with which arguments, at which risk, until when, and
// what became of it.
//
// The arguments are kept twice. The copy every view shows (the admin API,
// the console, the CLI, approvals.get) has each value the capability
// marks sensitive redacted, by the audit trail's own redaction. The
// arguments exactly as sent, which the run needs, are kept only while the
// call may still run, and cleared in the statement that settles it: run,
// rejected or expired.
//
// A user has at most Request.MaxPending requests pending, and the same
// call sent again while its request is pending joins that request rather
// than making another; both hold across replicas by unique indexes over
// the pending requests.
//
// A request moves one way. It is pending until an approver decides it
// (Decide) or it expires. An approved request is taken to run (Start) by
// exactly one caller, in any replica, which records the outcome (Finish).
// Every transition that must happen once is a single conditional UPDATE
// the database settles, so replicas sharing one PostgreSQL database agree
// without talking to each other.
//
// A host that stops between an approval and its run leaves the request
// approved: ApprovedIDs finds it at the next start, and the run happens
// then. A host that stops during a run leaves it running; once Lease has
// passed, Sweep records it as failed, saying the outcome is unknown. It
// is never run a second time: an approved call runs at most once, and,
// unless its host dies in the middle of it, exactly once.
package approvals
