// Package rest is capgate's REST adapter: the gate's capabilities as plain
// HTTP resources, for any HTTP client or agent framework that has no MCP
// library. It knows HTTP and JSON and nothing of MCP.
//
// Three routes, each for a principal the server has already authenticated
// (outsiders never get here: they get the same 404 as the MCP endpoint):
//
//   - GET /api/v1/capabilities lists what the token may call, each
//     capability with its kind, pack, risk and JSON Schemas. It is exactly
//     Dispatcher.Visible, which is also what MCP's tools/list shows.
//   - POST /api/v1/capabilities/{name} calls one. The body is the
//     arguments (an absent body is the empty object); a 200 answer's body
//     is the capability's structured result, what an MCP tools/call
//     answers as structuredContent. Content blocks (text, images, links)
//     a call answers beside it are MCP's rendering for people and models
//     and are not sent; a capability that answers blocks alone answers
//     null.
//   - GET /api/v1/openapi.json is an OpenAPI 3.1 document of the same
//     capabilities, generated from the registry for this token, so a
//     client can generate its calls or tools from it.
//
// The adapter decides nothing about authorization: every call goes to
// Dispatcher.Invoke, and the adapter only translates the outcome into
// HTTP's idiom, as RFC 9457 problem details (package problem):
//
//   - a *dispatch.Refusal is 403 carrying the step, reason and capability
//     MCP's error -32003 carries; at step rate_limit it is 429 with
//     Retry-After, and at step audit (actions refused while the audit
//     trail cannot be written) 503, as both pass with time;
//   - a *dispatch.ToolError is 422 carrying its code (invalid_input,
//     not_found, conflict), or 503 with Retry-After for unavailable, which
//     ran nothing and may be retried;
//   - an unknown capability is 404;
//   - a call held for a human is 202, its body the pending result
//     ({"status":"pending_approval","approval_id",…}) an MCP client gets
//     as a normal result;
//   - any other failure is 500 (504 when the call ran out of time) with a
//     reference that is also in the host's log and audit trail, never the
//     cause.
//
// A request is bounded and checked before the gate sees it, as the MCP
// adapter's are: an Origin the policy refuses is 403 (package origin), a
// body over the limit 413, a body that is not JSON 400, a body of another
// media type 415, another method 405 with Allow. An action may carry an
// Idempotency-Key header (a structured-field string, or a bare key), the
// HTTP form of MCP's _meta "io.capgate/idempotency-key". A call runs under
// the request's deadline and ends when the client goes away. Each call is
// audited with Origin{Protocol: "rest"}, and X-Request-Id, when the client
// sends one, as its request id.
//
// Reads are called with POST too: their arguments are a JSON object
// checked against a JSON Schema, which a query string cannot carry without
// losing types; and a read through capgate is still a gated, rate-limited,
// audited call whose answer depends on the token and the moment, which no
// cache or prefetcher should be invited to make or keep.
package rest
