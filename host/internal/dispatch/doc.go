// Package dispatch is the one authorization gate.
//
// Every capability call, whatever protocol carried it, goes through
// Dispatcher.Invoke, which checks in a fixed order:
//
//  1. pack: the capability's pack is enabled;
//  2. user binding: an action needs a principal bound to a user;
//  3. scope: a read token calls only read capabilities (admin calls all);
//  4. permission: the principal's role holds the capability's permission;
//  5. ownership: for owner-guarded capabilities, the target belongs to the
//     caller (admin principals bypass this step).
//
// Arguments are validated against the input schema after the steps that do
// not need them and before any plugin sees them. A refusal is a *Refusal
// naming its step; a failure the caller can fix (bad arguments, a missing
// entity) is a *ToolError. Protocol adapters translate these and check
// nothing themselves.
package dispatch
