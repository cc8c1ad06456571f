package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/problem"
	"github.com/capgate/capgate/internal/dispatch"
)

// call is one POST to a capability.
type call struct {
	h    *Handler
	ctx  context.Context
	w    http.ResponseWriter
	r    *http.Request
	p    dispatch.Principal
	name string
	// status is what the call was answered with, for its span.
	status int
	// failure is the answer's problem, when it was one.
	failure *problem.Details
	// held is filled by the gate when it holds the call for a human.
	held dispatch.HeldReport
}

// panicError carries a panic out of the gate or a provider, so it is
// answered like any internal failure instead of dropping the connection.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

func (c *call) invokeGate(args []byte) (res json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return c.h.invoke(dispatch.WithHeldReport(c.ctx, &c.held), c.p, c.name, args)
}

// succeeded answers the result: 200 with the result itself, or 202 with
// the pending result of a call the gate held for a human.
func (c *call) succeeded(res json.RawMessage) {
	res = bytes.TrimSpace(res)
	if len(res) == 0 || !json.Valid(res) {
		c.failed(fmt.Errorf("capability %s returned invalid JSON", c.name))
		return
	}
	status := http.StatusOK
	if c.held.Held {
		status = http.StatusAccepted
	}
	c.status = status
	c.w.Header()["Content-Type"] = jsonType
	c.w.WriteHeader(status)
	_, _ = c.w.Write(validUTF8(res)) // a failed write means the client left
}

// validUTF8 is res with each byte that is not UTF-8 (only possible inside
// a string of a plugin's JSON) escaped as U+FFFD, as the MCP adapter does,
// so both protocols send the same bytes.
func validUTF8(res []byte) []byte {
	if utf8.Valid(res) {
		return res
	}
	out := make([]byte, 0, len(res)+16)
	for i := 0; i < len(res); {
		r, n := utf8.DecodeRune(res[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, `\ufffd`...)
		} else {
			out = append(out, res[i:i+n]...)
		}
		i += n
	}
	return out
}

// failed answers a call the gate refused or that did not succeed.
func (c *call) failed(err error) {
	var (
		refusal *dispatch.Refusal
		toolErr *dispatch.ToolError
		missing *dispatch.MissingCapability
	)
	switch {
	case errors.As(err, &refusal):
		c.refused(refusal)
	case errors.As(err, &toolErr):
		c.toolError(toolErr)
	case errors.As(err, &missing):
		// Plain HTTP cannot carry a question to the caller mid-call.
		c.toolError(&dispatch.ToolError{Code: dispatch.InvalidInput,
			Message: missing.Error() + ", which a call over plain HTTP cannot be asked: call it over MCP"})
	case errors.Is(err, dispatch.ErrUnknownCapability):
		d := problem.New(http.StatusNotFound, "no capability is named "+strconv.Quote(clip(c.name, maxQuotedName)))
		c.answer(d)
	default:
		c.internalFailure(err)
	}
}

// refused answers a gate refusal: the step, reason and capability MCP's
// error -32003 carries, at the status an HTTP client expects.
func (c *call) refused(r *dispatch.Refusal) {
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "rest: call refused",
		slog.String("capability", r.Capability), slog.String("step", string(r.Step)),
		slog.String("role", c.p.Role), slog.String("user", c.p.UserID))
	status := http.StatusForbidden
	switch r.Step {
	case dispatch.StepRateLimit:
		status = http.StatusTooManyRequests
	case dispatch.StepAudit:
		// The trail comes back; the same call is admitted then.
		status = http.StatusServiceUnavailable
	}
	d := problem.New(status, r.Reason)
	d.Step, d.Reason, d.Capability = string(r.Step), r.Reason, r.Capability
	if r.RetryAfter > 0 {
		// Whole milliseconds and seconds, rounded up: retrying at the time
		// said must not be refused again for being a fraction early.
		d.RetryAfterMS = (r.RetryAfter + time.Millisecond - 1).Milliseconds()
		c.w.Header().Set("Retry-After", strconv.FormatInt(int64((r.RetryAfter+time.Second-1)/time.Second), 10))
	}
	c.answer(d)
}

// toolError answers a failure the caller can act on: 422 with its code,
// or 503 for one that ran nothing and may simply be retried.
func (c *call) toolError(te *dispatch.ToolError) {
	status := http.StatusUnprocessableEntity
	if te.Code == dispatch.Unavailable {
		status = http.StatusServiceUnavailable
		c.w.Header().Set("Retry-After", "1")
	}
	d := problem.New(status, te.Message)
	d.Code, d.Capability = te.Code.String(), c.name
	c.answer(d)
}

// internalFailure logs a failure that is neither a refusal nor the
// caller's to fix, and answers what happened and a reference, never the
// cause. The reference is the call's audit record when the gate keeps
// one.
func (c *call) internalFailure(err error) {
	ref := correlationID()
	var ie *dispatch.InternalError
	if errors.As(err, &ie) {
		ref, err = ie.Ref, ie.Err
	}
	attrs := []slog.Attr{slog.String("correlation_id", ref), slog.String("capability", c.name), slog.String("error", err.Error())}
	var d problem.Details
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		c.h.log.LogAttrs(c.ctx, slog.LevelWarn, "rest: call timed out", attrs...)
		d = problem.New(http.StatusGatewayTimeout, c.name+" did not finish within the time limit; it may be retried later (reference "+ref+")")
	case errors.Is(err, context.Canceled):
		// The client went away; no one reads this.
		c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "rest: call cancelled", attrs...)
		d = problem.New(http.StatusServiceUnavailable, c.name+" was cancelled (reference "+ref+")")
	default:
		var pe *panicError
		if errors.As(err, &pe) {
			attrs = append(attrs, slog.String("stack", string(pe.stack)))
		}
		c.h.log.LogAttrs(c.ctx, slog.LevelError, "rest: call failed", attrs...)
		d = problem.New(http.StatusInternalServerError, "internal error while running "+c.name+" (reference "+ref+")")
	}
	d.Capability, d.Reference = c.name, ref
	if _, known := c.h.reg.Lookup(c.name); !known {
		d.Capability = ""
	}
	c.answer(d)
}

func (c *call) answer(d problem.Details) {
	c.status, c.failure = d.Status, &d
	problem.Write(c.w, d)
}

const hexDigits = "0123456789abcdef"

// correlationID names one failure in the log and in the client's answer;
// it needs to be unique, not secret.
func correlationID() string {
	var b [16]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = hexDigits[n&0xf]
		n >>= 4
	}
	return string(b[:])
}
