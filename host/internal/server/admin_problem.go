package server

import (
	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/problem"
)

// MIMEProblemJSON is the media type of the admin API's errors (RFC 9457).
const MIMEProblemJSON = problem.MediaType

// Problem is an error of the admin API as RFC 9457 problem details; the
// REST adapter answers the same shape (package problem).
type Problem = problem.Details

// ProblemItem is one of several problems of a request.
type ProblemItem = problem.Item

// NewProblem is the problem of status saying detail.
func NewProblem(status int, detail string, items ...ProblemItem) Problem {
	return problem.New(status, detail, items...)
}

// problem answers the request with a problem of status.
func (s *Server) problem(c echo.Context, status int, detail string, items ...ProblemItem) error {
	problem.Write(c.Response(), NewProblem(status, detail, items...))
	return nil
}

// forbiddenScope is the admin API's answer to a known token of another
// scope: unlike an outsider, its holder may learn the route exists.
const forbiddenScope = "the admin API needs a token of scope admin"
