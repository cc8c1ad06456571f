// Package stdio bridges MCP over stdio to capgate's Streamable HTTP
// endpoint: it is `capgate stdio`, for clients that only launch local
// servers (desktop assistants, editors). The client writes JSON-RPC
// messages to the bridge's stdin, one a line; the bridge POSTs each to
// capgate with the bearer token and writes what capgate answers to
// stdout, one message a line. So a local client gets the tools, the
// refusals and the governance of the one gate, because every call still
// reaches capgate, and nothing is decided here.
//
// # A message pump, not an SDK proxy
//
// Two designs were weighed. An SDK proxy would serve MCP over stdio with
// the Go SDK's server and call capgate with the Go SDK's client. A message
// pump forwards each message as it is and the answer as it comes. The
// pump was measured against a proxy built that way, both over the same
// capgate:
//
//   - A gate refusal reached the proxy's client as JSON-RPC error code 0,
//     "connection closed: calling "tools/call": forbidden: …", without data.
//     The Go SDK client reads capgate's -32003 as its own closing error
//     (docs/clients.md, known quirks), and the proxy's server sends back
//     whatever error it gets. Through the pump the client reads capgate's
//     own answer, byte for byte: -32003 with the step, the reason and the
//     capability.
//   - The proxy negotiates two versions, one with the client and one with
//     capgate, and can pass on only what both SDKs model. The pump is
//     transparent to the protocol version: 2026-07-28's input_required
//     results with their requestState, structured content, _meta
//     (idempotency keys, trace context), resources, and whatever a later
//     revision adds go through untouched.
//   - A tools/call took 1.2 ms through the proxy and 0.18 ms through the
//     pump; posted straight to capgate it takes 0.11 ms
//     (BenchmarkBridgeCall, BenchmarkDirectCall; 2 cores).
//
// The pump knows only what the transport needs: the version, the method
// and the name, to set the request's headers, and the id, to answer a
// request it cannot forward.
//
// # What goes on the wire
//
// Every POST carries Content-Type: application/json, Accept:
// application/json, text/event-stream, and Authorization: Bearer with the
// token. Its MCP-Protocol-Version is the version the message's _meta names
// (2026-07-28 and later carry it in every request), else the one capgate's
// answer to initialize chose, else none (capgate then takes 2025-03-26).
// From 2026-07-28 on, the body's method and name are mirrored into
// Mcp-Method and Mcp-Name, and the arguments a tool's input schema marks
// with x-mcp-header into Mcp-Param-* headers, each value encoded as the
// transport says. The marks come from the tools/list answers the bridge
// relays; a call capgate refuses with HeaderMismatch (the tool not listed
// yet through this bridge) makes the bridge list the tools and send the
// call once more, as the transport advises: capgate refuses a mismatch
// before anything runs.
//
// capgate's endpoint is stateless (no Mcp-Session-Id), so no session is
// kept and every message stands alone. Answers are read as they come: an
// application/json body is one message (or a 2025-03-26 batch), written on
// one line; a text/event-stream body is relayed event by event, each
// notification as it arrives and then the answer, which ends it; 202
// Accepted, the answer to a notification, writes nothing. Before
// 2026-07-28 a call that asks its client (elicitation, sampling, roots)
// sends its request on that stream: the client reads it as a line like
// any other and writes its answer as a line, which the bridge posts as it
// posts every message, with slots of its own, so calls waiting for their
// answers never hold the answers up. What is written
// is compacted onto one line and must be JSON-RPC: stdout carries nothing
// else, ever. Every word of the bridge's own goes to stderr.
//
// # When forwarding fails
//
// A request that cannot be forwarded, or whose answer cannot be read, is
// answered with error CodeBridge (-31000, outside the range JSON-RPC
// reserves, so no client takes it for one of capgate's) under its id. The
// message says what is wrong and what to do; the data names the Kind and
// the URL. A notification gets no answer: the problem is logged. An error
// capgate sends before it has read the body (413 for a body over its
// bound, 503 when busy) has no id; the bridge gives it the request's, so
// the client is not left waiting.
//
// Wrong addresses and wrong tokens are told apart, once at start (Check)
// and again on every failure. Connection refused, a name that does not
// resolve, an untrusted certificate, TLS spoken to plain HTTP and the
// reverse, a redirect (never followed: the token goes only where the URL
// says), a timeout, a proxy's 502: each has its own line. capgate answers a
// token it does not know with the plain 404 it gives a path it does not
// serve, so a 404 alone cannot tell them apart: the bridge then asks
// capgate's health check, which answers anyone. If capgate is there, the
// token is refused (or the path is not /api/v1/mcp); if not, the URL is
// not capgate's. An OAuth resource server's 401 is read for its
// WWW-Authenticate challenge: invalid_token, the description, the
// resource metadata.
//
// # Bounds and concurrency
//
// A message from the client is bounded by MaxMessageBytes (capgate's own
// http.max_body_bytes by default); one over it is answered with an error,
// under the id its first bytes carry, without crossing the network, and
// the rest of its line is skipped. An answer is bounded too (32 MiB). Up
// to MaxInFlight messages are forwarded at once, since clients pipeline;
// answers are written in the order capgate gives them, each line whole.
// initialize alone is forwarded before anything else is read, as its
// answer sets the version of what follows. Timeout bounds an exchange:
// the whole of a JSON answer, or the wait between two events of a stream.
//
// A notifications/cancelled from the client ends the exchange of the
// request it names: closing the connection is how a request is cancelled
// on Streamable HTTP at 2026-07-28, and at every version it cancels the
// call in capgate and in its plugin. Before 2026-07-28 the notification is
// forwarded too. Nothing is written for the cancelled request.
//
// The end of stdin ends the bridge once every message read has been
// answered, so a script may pipe messages in; Serve's context ending
// (SIGINT, SIGTERM) cancels what is under way and ends it at once.
//
// # The token
//
// The token comes from the environment (TokenEnv), never from a command
// line, where every user of the machine sees it (ps) and shell histories
// and clients' logs keep it. It is sent only to the URL, never logged, and
// never part of a message. Plain http is refused for any host but this
// machine's loopback unless AllowInsecureHTTP says the network between is
// trusted: the token would cross it in the clear.
package stdio
