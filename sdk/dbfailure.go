package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// DatabaseUnreachable is err, returned by a call to the PostgreSQL
// database that name describes to an agent ("the booking database"), as
// the agent should read it. When the database could not be reached and the
// call is known to have changed nothing, it is an Unavailable tool error
// naming the database: the agent learns what is away and that retrying is
// safe; the database's own error stays in the chain, and the plugin logs
// it. wrote says whether the call could have changed something: a read
// never did; a write did nothing when its connection failed before
// anything was sent. A write whose connection broke later may have been
// committed, so its error is returned as it is: an internal error, whose
// outcome the host treats as unknown. So is any other error. The message
// never holds an address, a DSN or a password.
func DatabaseUnreachable(name string, err error, wrote bool) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller gave up or ran out of time: the host says so itself.
		return err
	}
	conn, nothingSent := connectionFailure(err)
	if !conn || (wrote && !nothingSent) {
		return err
	}
	return &unreachable{
		tool:  &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s is unreachable, so nothing was changed; retry shortly", name)},
		cause: err,
	}
}

// unreachable carries both the agent's tool error and the database's own
// error, so errors.As finds the first and the log shows the second.
type unreachable struct {
	tool  *Error
	cause error
}

func (u *unreachable) Error() string   { return u.tool.Message + ": " + u.cause.Error() }
func (u *unreachable) Unwrap() []error { return []error{u.tool, u.cause} }

// connectionFailure reports whether err is the database connection
// failing rather than the database answering, and whether nothing of the
// call reached the server.
func connectionFailure(err error) (conn, nothingSent bool) {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true, true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case pg.Code == "57P03": // cannot_connect_now: starting up or shutting down
			return true, true
		case pg.Code == "57P01", pg.Code == "57P02", len(pg.Code) == 5 && pg.Code[:2] == "08":
			// Shut down under the call, or a connection exception.
			return true, false
		}
		return false, false
	}
	if pgconn.SafeToRetry(err) {
		// pgx marks a failure before anything was written.
		return true, true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true, op.Op == "dial"
	}
	if pgconn.Timeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) {
		return true, false
	}
	return false, false
}
