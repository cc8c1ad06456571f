// Package problem is the one definition of the errors capgate's HTTP APIs
// answer: RFC 9457 problem details, served as application/problem+json.
//
// Type is always "about:blank": the status says what kind of problem it
// is, Title is the status's standard phrase, and Detail says what went
// wrong with this request. The extension members carry what a client acts
// on without parsing Detail: the gate's step and reason (the same ones an
// MCP client reads in the data of error -32003), a tool error's code, the
// reference of an internal failure, when to retry. A member a problem does
// not have is left out.
package problem

import (
	"encoding/json"
	"net/http"
)

// MediaType is the media type of a problem (RFC 9457).
const MediaType = "application/problem+json"

// Details is one problem.
type Details struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`

	// Step names the gate step that refused the call, Reason says why
	// for a human, and Capability names what was called: exactly what
	// MCP's error -32003 carries in its data.
	Step       string `json:"step,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Capability string `json:"capability,omitempty"`
	// RetryAfterMS, for a rate limit, is how long until the same call is
	// admitted, in whole milliseconds rounded up.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
	// Code classifies a failure the caller can act on: invalid_input,
	// not_found, conflict, unavailable.
	Code string `json:"code,omitempty"`
	// Reference names an internal failure in the host's log and audit
	// trail; the cause itself never leaves the host.
	Reference string `json:"reference,omitempty"`

	// Errors lists each problem of a request that has several (each bad
	// query parameter), so a client can show them all at once.
	Errors []Item `json:"errors,omitempty"`
}

// Item is one of several problems of a request.
type Item struct {
	// Parameter names the query parameter at fault, when one is.
	Parameter string `json:"parameter,omitempty"`
	Detail    string `json:"detail"`
}

// New is the problem of status saying detail.
func New(status int, detail string, items ...Item) Details {
	return Details{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Errors: items}
}

// Write answers w with d, at d's status.
func Write(w http.ResponseWriter, d Details) {
	b, err := json.Marshal(d)
	if err != nil {
		// Strings and ints always marshal; keep the status regardless.
		w.WriteHeader(d.Status)
		return
	}
	w.Header().Set("Content-Type", MediaType)
	w.WriteHeader(d.Status)
	_, _ = w.Write(b) // a failed write means the client left
}
