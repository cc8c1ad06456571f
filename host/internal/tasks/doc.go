// Package tasks keeps the durable state of the MCP tasks extension
// (io.modelcontextprotocol/tasks, protocol revision 2026-07-28): a call the
// host answers with a task handle at once and runs in the background.
//
// The lifecycle as capgate implements it:
//
//   - A capability declares task support (forbidden, optional, required).
//     A tools/call for an optional or required one, from a request whose
//     _meta client capabilities name the extension, passes the gate
//     (dispatch.Invoke) exactly as a plain call does. Only when every step
//     has admitted it, just before the providing plugin is asked, is the
//     task created here (status working); then the CreateTaskResult goes
//     back and the call runs on in the background. A refused call or bad
//     arguments are answered as they would be without the extension, and
//     no task exists for them; a held call is the next point's.
//   - A call for a required one from a request without the extension is
//     refused with the extension's missing-capability error, after the
//     gate's own argument-free steps (a token that may not call it learns
//     nothing more than a plain call would tell it).
//   - The run ends the task once (Store.Finish): completed with the tool
//     result (a tool error too, with isError), or failed with the JSON-RPC
//     error a plain call would have got (a refusal at the ownership step,
//     an internal failure, a panic). An end that finds the task already
//     ended (cancelled) is dropped.
//   - tasks/get, tasks/update and tasks/cancel are answered from the store
//     by any replica, for the owner alone: the token label and user of the
//     principal who started it. Another principal, an unknown ID and an
//     expired one get the same not-found answer.
//   - tasks/cancel marks an unfinished task cancelled in the store at once
//     (the next tasks/get says so) and stops its run: at once on the
//     replica that runs it, and within a poll interval elsewhere, as the
//     running replica reads the status while the call runs.
//   - A call the gate holds for a human approver (risk review_required or
//     dangerous, host/internal/approvals) is a task too when the host reads
//     approvals for it: instead of the pending result, the client gets a
//     task, working, whose status message names the approval request, and
//     which follows the request (ApprovalID). Whichever replica answers
//     tasks/get reads the request and ends the task once it has ended: the
//     approved call's result (or tool error) completes it, a rejection, an
//     expiry or a refusal when it ran fails it with the gate's refusal, an
//     internal failure with its reference. Cancelling such a task does not
//     withdraw the request: an approver may still approve it, and the
//     call's outcome is then kept with the request (approvals.get), not
//     with the cancelled task.
//   - A task's call that asks its client mid-call (elicitation, sampling,
//     roots: the gate's *dispatch.NeedsInput, or its own confirmation
//     question) parks the task (Store.Park): input_required, with each
//     request under an ID the store mints from the round and the call's
//     key ("r1-confirm"), the round's sealed state and the call to run
//     again (its arguments and request metadata). The call's own keys
//     are not used as they are: an SDK handler asks under fixed keys, so
//     a second round would reuse one, and the extension wants a request's
//     ID unique over the task's life (a client dedupes by it). tasks/get
//     shows the requests not answered yet. tasks/update keeps the answers
//     to outstanding IDs (Store.Answer; others are ignored): while some
//     remain unanswered the task keeps waiting on those alone; the update
//     that answers the last one takes the resumption — the task is
//     working again — and the replica that received it runs the same
//     tools/call again in the background, through the whole gate as the
//     task's owner, with the answers under the call's keys and the sealed
//     state, as the client's retry of a plain call would be. That run
//     ends the task, or asks again (a new round, new IDs). Every change is
//     one conditional statement on the task's input version, so two
//     updates racing on two replicas resume the call once. The state is
//     in the row alone: any replica, or the same one restarted, resumes.
//     A cancel of a waiting task cancels it; a resumed call the gate now
//     holds for a human makes its task follow the approval request
//     (Store.Follow), as above. A call that runs only as a
//     task and asks at once, while its caller still waits for the
//     tools/call's answer, asks on the call itself instead (no task is
//     shown, and it is discarded): its client's retry with the answers
//     becomes the task.
//   - A task is kept for its TTL from creation, then swept; a working task
//     whose run began (its creation, or the answer that resumed it) long
//     before any run could still be under way (its replica went away) is
//     swept to failed. A held call's task is not: it waits for a human,
//     and its request says how it ended; nor is a task waiting on its
//     client, which runs nothing and waits until its TTL.
package tasks
