// Package approvals keeps the calls the gate held for a human's yes: who
// asked for what, with which arguments (exactly as sent, and their
// SHA-256), at which risk, until when, and what became of it.
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
