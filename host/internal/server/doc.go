// Package server is capgate's HTTP front: an echo server carrying the MCP
// endpoint (POST /api/v1/mcp) and a health check (GET /healthz).
//
// Authentication happens here, before the MCP adapter sees a request. A
// missing, malformed or unknown bearer token, and the master switch being
// off, all produce echo's ordinary 404 — the same bytes as a path that does
// not exist — so an outsider cannot learn that the endpoint is there. Only
// an authenticated request reaches the adapter, with its principal.
//
// The server bounds every request: a header deadline, a read deadline for
// the whole request, a per-request context deadline that the gate and the
// plugins observe, and a write deadline a little past it so a timed-out call
// can still be answered. Shutdown stops accepting connections and waits for
// in-flight requests.
package server
