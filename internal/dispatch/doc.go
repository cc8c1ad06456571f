// Package dispatch is the one authorization gate.
//
// Every capability call, whatever protocol carried it, goes through
// Dispatcher.Invoke, which checks in a fixed order:
//
//  1. kill switch: the operator has not switched the capability off
//     (Policy.DisabledCapabilities) nor, for an action, every action
//     (Policy.ActionsOff); these refusals name step kill_switch and bind
//     every scope, admin included;
//  2. pack: the capability's pack is enabled;
//  3. user binding: an action needs a principal bound to a user;
//  4. scope: a read token calls only read capabilities (action and admin
//     tokens call all); a principal whose scope is none of read, action and
//     admin calls nothing;
//  5. permission: the principal's role holds the capability's permission
//     ("*" holds every permission, "booking.*" every one starting with
//     "booking."); a capability that declares no permission needs none;
//  6. risk: a capability at registry.RiskBlocked never runs (the level is
//     the operator's for the capability, else for its pack, else its
//     plugin's: Policy.Risk);
//  7. audit: an action is refused while the audit trail cannot be
//     written, when the operator asked for that (UseAuditor); reads carry
//     on;
//  8. rate limit: the token has calls left (Policy.Limits, counted by the
//     Limiter given to UseLimiter): its rate for this capability, then its
//     rate over all capabilities. A refusal says when to retry
//     (Refusal.RetryAfter); a counter that cannot count refuses;
//  9. ownership: for owner-guarded capabilities, the target belongs to the
//     caller (admin-scope principals bypass this step). Only the providing
//     plugin knows who owns its records, so this step travels with the call
//     (Request.CheckOwner): the plugin resolves the owner and refuses, with
//     a *Refusal at this step, before anything runs — one round trip, not
//     two. A target without an owner belongs to no one, and a missing one
//     is the plugin's NotFound. A provider's refusal at any other step, or
//     when it was not asked, is a provider bug, never a refusal.
//
// An action called with an idempotency key (WithIdempotencyKey; MCP carries
// it in _meta "io.capgate/idempotency-key") passes one more step between
// the argument checks and ownership, once the dispatcher has a store
// (UseIdempotency): the first call with a key runs and its outcome (result
// or tool error) is kept; a repeat by the same user with the same key and
// arguments gets that outcome and runs nothing, a repeat while the outcome
// is unknown is told to wait, and a key reused for another call is
// refused. A replay still passes steps 1 to 8; ownership is not asked again,
// as the first call changed the target (a cancelled booking).
//
// Arguments are validated against the input schema after the steps that do
// not need them and before any plugin sees them; a result is checked
// against the output schema before the caller sees it (a mismatch is the
// plugin's bug: an error wrapping ErrResultMismatch, never a result). An
// absent body (empty or null) is the empty object. A refusal is a *Refusal
// naming its step; a failure the caller can fix (bad arguments, a missing
// entity) is a *ToolError. Protocol adapters translate these and check
// nothing themselves.
//
// A call whose capability is at registry.RiskReviewRequired or
// registry.RiskDangerous needs a human's yes before it runs. It is held at
// step risk once its arguments are valid, before the idempotency step and
// the call, and after the ownership step asked of its provider alone when
// the provider is an OwnerChecker: with an Approver (UseApprover) it is
// stored for a decision
// and the caller gets the approver's pending result, not an error;
// without one, or for a token bound to no user, it is refused at step
// risk. The host runs an approved call through Invoke again, with the
// Grant of exactly that call (WithGrant): it passes every step again at
// that moment, ownership included, and the risk step lets it through.
//
// An adapter that answers before a call ends (a task of the MCP tasks
// extension) learns from the gate that the call passed every step, after
// the risk step and just before it runs (WithAdmit): a refused, invalid
// or held call never reaches that point.
//
// A call may ask its caller's client mid-call (input.go): its provider
// answers *InputRequired, the gate seals the provider's state to exactly
// that call (principal, capability, arguments) with its InputSealer and
// answers *NeedsInput, and the client's answers come back with the same
// call, which passes every step again before its state is opened, once
// (a state it cannot accept is refused at StepInput). A call that needs
// what the client did not declare fails with *MissingCapability. A prompt
// asks the same way while it renders (GetPrompt), its rounds sealed to the
// principal, "prompts/get:<name>" and its arguments.
//
// Steps 1 to 6 do not depend on the arguments: Dispatcher.Allowed and
// Dispatcher.Visible answer them alone, so a tools/list shows exactly the
// capabilities a tools/call would admit before looking at arguments. A
// rate limit hides nothing: what is over its limit now is callable later.
//
// With an Auditor (UseAuditor), every call leaves one Decision: who
// called what, from where (Origin: the protocol, its request id, and for a
// nested call the ID of the call that made it), with which arguments, and
// what came of it. An internal failure then reaches the caller as an
// *InternalError whose reference is its record's ID.
//
// Prompts (GetPrompt, CompletePrompt) pass steps 1 to 6 as a read
// capability of the prompt's pack and permission, then the rate limit;
// VisiblePrompts lists exactly those steps 1 to 6 admit. A prompt they
// refuse is ErrUnknownPrompt, as one that does not exist, so a token
// cannot learn of it; the audit record keeps the real refusal. A resource
// template's variables are completed likewise (CompleteResourceTemplate).
//
// The policy (packs, roles, switches, limits) can be replaced while
// serving (Dispatcher.SetPolicy). Each call reads it once, so it is
// decided under the old policy or the new, never a mix, and a call already
// past the gate finishes under the policy it started with.
package dispatch
