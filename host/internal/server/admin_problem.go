package server

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// MIMEProblemJSON is the media type of the admin API's errors (RFC 9457).
const MIMEProblemJSON = "application/problem+json"

// Problem is an error of the admin API as RFC 9457 problem details. Type
// is always "about:blank": the status says what kind of problem it is,
// Title is its standard phrase, and Detail says what went wrong with this
// request.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Errors lists each problem of a request that has several (each bad
	// query parameter), so a client can show them all at once.
	Errors []ProblemItem `json:"errors,omitempty"`
}

// ProblemItem is one of several problems of a request.
type ProblemItem struct {
	// Parameter names the query parameter at fault, when one is.
	Parameter string `json:"parameter,omitempty"`
	Detail    string `json:"detail"`
}

// NewProblem is the problem of status saying detail.
func NewProblem(status int, detail string, items ...ProblemItem) Problem {
	return Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Errors: items}
}

// problem answers the request with a problem of status.
func (s *Server) problem(c echo.Context, status int, detail string, items ...ProblemItem) error {
	b, err := json.Marshal(NewProblem(status, detail, items...))
	if err != nil {
		// Strings and ints always marshal; keep the status regardless.
		return c.NoContent(status)
	}
	return c.Blob(status, MIMEProblemJSON, b)
}

// forbiddenScope is the admin API's answer to a known token of another
// scope: unlike an outsider, its holder may learn the route exists.
const forbiddenScope = "the admin API needs a token of scope admin"
