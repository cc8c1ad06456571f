// Package mcp is the Model Context Protocol wire adapter: the only code in
// the host that knows MCP or JSON-RPC.
//
// It serves the Streamable HTTP transport statelessly — no session is ever
// issued or required — for protocol versions 2026-07-28, 2025-11-25,
// 2025-06-18 and 2025-03-26. Every request is answered with
// application/json, except a tools/call whose client asked to hear the
// call while it runs and whose call has something to say (see below).
// A request's version is its MCP-Protocol-Version header (absent means
// 2025-03-26). The 2026-07-28 revision has no initialize handshake: each
// request carries its version and client capabilities in params._meta, the
// method and tool name are mirrored in the Mcp-Method and Mcp-Name headers,
// and server/discover replaces initialize; older revisions keep initialize
// and ping, and 2025-03-26 alone accepts JSON-RPC batches.
//
// The adapter decides nothing about authorization. tools/list shows exactly
// Dispatcher.Visible and tools/call goes to Dispatcher.Invoke; the adapter
// only translates the outcome:
//
//   - a *dispatch.Refusal becomes JSON-RPC error -32003 whose data names the
//     gate step, the reason and the capability;
//   - a *dispatch.ToolError becomes a tool result with isError set;
//   - an unknown capability becomes -32602 (invalid params);
//   - any other failure becomes an isError result carrying a correlation id
//     that is also logged, never the cause itself;
//   - success returns the plugin's JSON as structuredContent (where the
//     version has it) and as a text block for older clients.
//
// A call may also answer content blocks (text, images, audio, resource
// links, embedded resources), which its provider hands over through
// dispatch.WithContentReport; the gate's result stays the structured
// value, which it checks against the output schema and which the audit
// trail and idempotency replays keep (a replay, a held call and a plugin's
// nested call carry no blocks). Each block is rendered as the revision has
// it: text, image, audio and embedded resources (text or base64 blob) in
// every revision served; a resource link as resource_link from 2025-06-18
// on, and in 2025-03-26, which lacks it, as a text block naming the link's
// title (or name), URI, media type and description. The structured value
// goes in structuredContent where the revision takes it (an object from
// 2025-06-18, any JSON value at 2026-07-28, never a null, which is a call
// that answered blocks alone); where it cannot, it follows the blocks as
// one more text block, so no revision loses it. An output schema that
// describes something other than an object is listed only at 2026-07-28.
//
// A tool is rendered from its capability once per revision: the name (a
// dotted or single lower-case name, see registry.ValidName), the title
// beside it from 2025-06-18 (in the annotations at 2025-03-26, the only
// place that revision has one), the icons from 2025-11-25, the input
// schema exactly as declared (2020-12 keywords such as $defs, $ref,
// $anchor and if/then/else included), the output schema from 2025-06-18,
// and annotations whose hints follow the capability's kind unless it
// declares idempotentHint or openWorldHint itself. Arguments an input
// schema marks with x-mcp-header must agree with their Mcp-Param-*
// headers at 2026-07-28, or the call is refused with HTTP 400 and -32020;
// the registry has already refused annotations a client would reject.
//
// Catalogue records, when Options.Records names the capabilities that read
// and list them, are resources at capgate://<entity>/<id> (both parts
// percent-encoded), and the same rules hold:
//
//   - resources/templates/list shows one template per entity type exactly
//     when Dispatcher.Allowed admits the principal to the Get capability
//     (the rule tools/list applies to it), else none;
//   - resources/read calls Get through Dispatcher.Invoke with the
//     {"entity","id"} a tools/call would carry: a refusal is the very error
//     tools/call gives, a missing record (or an entity type not offered) is
//     the revision's resource-not-found error, a malformed capgate URI is
//     -32602, and the record comes back as JSON text;
//   - resources/list is one page of the List capability, called through
//     Dispatcher.Invoke; a principal the gate refuses sees an empty list,
//     as tools/list shows only what may be called.
//
// Without those capabilities in the registry the catalogue lists are empty
// and every capgate URI is unknown.
//
// Plugins declare resources of their own, at fixed URIs and as RFC 6570
// level 1 templates, each with a pack and a permission; the host refuses
// to start on a malformed URI or template, one in the capgate scheme, or
// one declared twice. The gate decides them as it decides a read
// capability of that pack and permission:
//
//   - resources/list opens its first page with the plugin resources the
//     principal may read (Dispatcher.VisibleResources), then the
//     catalogue's page; resources/templates/list shows the plugin
//     templates the principal may read, then the catalogue's;
//   - resources/read of any other scheme goes to Dispatcher.ReadResource,
//     which matches the URI (a declared URI exactly, else a template) and
//     reads it in the providing plugin. A URI no plugin declares, one the
//     principal may not read and one the plugin finds nothing at are the
//     same resource-not-found error, so a refusal tells nothing of what
//     exists; a rate limit is the gate's refusal, a plugin's failure an
//     internal error with a reference. The contents come back as text or
//     base64 blob, cacheable at 2026-07-28 as a list is.
//
// Plugins' prompts are served the same way, through the gate and nothing
// else:
//
//   - prompts/list shows exactly Dispatcher.VisiblePrompts, in one page,
//     with the list-caching fields at 2026-07-28 (titles from 2025-06-18);
//   - prompts/get renders through Dispatcher.GetPrompt, each message's
//     block as tools/call renders blocks for the revision; at 2026-07-28
//     Mcp-Name mirrors params.name. A prompt the caller may not get is
//     -32602 "unknown prompt", the very answer for a name no plugin
//     provides; arguments the caller got wrong (or a record the plugin does
//     not find) are -32602 with the reason; a rate limit is tools/call's
//     -32003; at 2026-07-28 a prompt may ask its client as a tools/call
//     does (below), and before, a prompt that asks is -32602 saying what
//     it needs;
//   - completion/complete answers a prompt's argument through
//     Dispatcher.CompletePrompt (an invisible prompt is unknown, as above),
//     a plugin resource template's variable through
//     Dispatcher.CompleteResourceTemplate, and the id of a catalogue
//     template from the List capability's pages (in id order, up to the
//     first id past the prefix, at most ten), each called through
//     Dispatcher.Invoke as the caller, so only ids it may list are
//     suggested.
//
// The prompts capability is declared when a plugin declares a prompt, and
// completions when there is a prompt or a resource template to complete:
// a client offers no menu this server would leave empty.
//
// The tasks extension (io.modelcontextprotocol/tasks) is offered at
// 2026-07-28 when Options.Tasks is set, and named then in server/discover's
// capabilities.extensions (see package tasks for the lifecycle):
//
//   - a tools/call of a capability declaring optional or required task
//     support, whose _meta client capabilities name the extension, runs as
//     any call does, in the background; once the gate has admitted it
//     (dispatch.WithAdmit) the task is stored and the CreateTaskResult
//     (resultType "task", the task's fields at the top level) answers at
//     once. An answer the gate gives before that (a refusal, a tool error
//     for bad arguments, a question for the user) is the answer, as
//     without the extension;
//   - a call held for a human becomes a task following its approval
//     request when Options.Tasks.Approvals is set (HeldOutcome says how
//     the request's end ends it);
//   - the run's answer ends the task: a result (isError included)
//     completes it, a JSON-RPC error (an internal failure, which a task
//     reports as -32603 with its reference, or a refusal at the ownership
//     step) fails it; an input_required answer parks it instead, and the
//     tasks/update that answers its last request runs the call again
//     through the gate on the replica that received it (taskinput.go);
//     a required one that asks at once asks on the call, before any task;
//   - a required one called without the extension is -32021, data naming
//     the extension, once the gate's argument-free steps admit the caller;
//   - tasks/get, tasks/update and tasks/cancel need the extension in
//     _meta (-32021 otherwise) and Mcp-Name equal to params.taskId; a task
//     that is not the caller's (token label and user) is not found
//     (-32602), exactly like one that does not exist. tasks/update and
//     tasks/cancel answer an empty result; tasks/list and tasks/result do
//     not exist.
//
// Progress and logging: a tools/call whose _meta carries a progressToken
// gets the call's progress, and its log messages from a level up: the
// level in _meta "io.modelcontextprotocol/logLevel", or, up to 2025-11-25,
// info when it names none (logging/setLevel is answered {} but, stateless,
// binds no later request); 2026-07-28 sends no log message to a request
// that names no level. The provider's notices reach the adapter through
// dispatch.WithNotices, only for a call the gate admitted; the first one
// turns the answer into text/event-stream: notifications/progress
// (increasing) and notifications/message events, then the JSON-RPC
// response as the last event. Each event is flushed; a client that leaves
// cancels the call; a stream is bounded in events and bytes, and what a
// slow client cannot take is dropped. Events carry no id: without a
// session there is nothing to resume. Nothing streams inside a batch or a
// task, nor from a nested call.
//
// At 2026-07-28 a call may need its client to answer first: the gate's
// own question before a review_required call, or a plugin's requests
// (elicitation/create in form mode, sampling/createMessage, roots/list)
// made through the SDK. Either is an input_required result whose
// inputRequests hold each request under its key and whose requestState
// is the gate's sealed state; the client sends the same tools/call (or
// prompts/get, for a plugin's prompt that asks) again with inputResponses
// and the state, and the adapter hands both to the gate
// (dispatch.WithConfirmation, dispatch.WithInput) with what the client
// declared in _meta io.modelcontextprotocol/clientCapabilities.
// A state the gate does not accept is refused (-32003, step input or
// risk); a malformed answer is -32602; a call that needs a capability the
// client did not declare is -32021 with data.requiredCapabilities (HTTP
// 400).
//
// Before 2026-07-28 there are no rounds on the wire: a server asks with a
// request of its own on the event stream of the POST it answers. With
// Options.Answers set, the adapter plays the client's part in the rounds
// (askOnStream): it tells the call it may ask what the revision has
// (sampling and roots; form elicitation from 2025-06-18: no capabilities
// come with a call, and none are kept from initialize), sends a round's
// requests on the stream under ids from the answers relay, waits for the
// answers — which the client POSTs on their own, to any replica — and
// runs the call again with them and the sealed state, through the whole
// gate, until a round ends otherwise. A request the client answers with an
// error is one the next round may not ask; a tool that cannot go on
// without it is a tool error, a prompt -32602, saying what the client
// does not do and what it answered. Each round has the request timeout;
// the wait for answers lasts as long as the round's state; a call asks at
// most maxStreamRounds rounds; nothing is asked inside a batch.
//
// The request path avoids reflection: a validating scanner finds the
// envelope's fields as sub-slices of a pooled body buffer, tool definitions
// are rendered once at start-up, and responses are appended into pooled
// buffers.
package mcp
