package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/internal/dispatch"
)

// Asking the client mid-call before 2026-07-28. Those revisions have no
// input_required result: a server asks with a JSON-RPC request of its own
// on the event stream of the POST it is answering, and the client answers
// in a new POST. The gate knows only rounds (dispatch.NeedsInput), so the
// adapter plays the 2026-07-28 client's part on the caller's behalf: when
// a round ends asking, it sends each request on the stream under an id
// from the answers relay, waits for the answers — which any replica may
// receive and hands over — and runs the call again with them and the
// sealed state, through every step of the gate, until a round ends
// otherwise. Nothing is kept but the waiting call itself.
//
// These revisions carry no client capabilities in a request, and a
// stateless server keeps none from initialize, so a call is told its
// client can be asked whatever the revision has (askableBefore). A client
// that does not answer a request but with an error (method not found, an
// SDK's own "not supported", its user's refusal) is taken not to do it:
// the next round is told it cannot ask that, so the plugin goes on without
// the answer or fails saying what the client lacks, and what it said.

// maxStreamRounds bounds the rounds one call may ask its client on its
// stream: a plugin that asks without end gets a tool error, not a client
// answering forever.
const maxStreamRounds = 8

// answerMargin is kept between the last moment an answer is waited for and
// the lapse of the round's sealed state, so the next round opens it in time.
const answerMargin = 2 * time.Second

// streamGrace is added to the read and write deadlines of a connection
// whose call waits for its client's answers: the wait and the next round
// must both fit before them.
const streamGrace = 10 * time.Second

// What a client can be asked before 2026-07-28: form elicitation came with
// 2025-06-18; sampling and roots are older.
var (
	askable20250326 = []string{dispatch.AskSample, dispatch.AskRoots}
	askable20250618 = []string{dispatch.AskElicit, dispatch.AskSample, dispatch.AskRoots}
)

// askableBefore is what a call at a revision before 2026-07-28 may ask its
// client on its stream; nil when it may ask nothing (no relay to bring the
// answers back, a call inside a batch).
func (c *call) askableBefore() []string {
	if c.h.answers == nil || c.inBatch || c.inTask || !c.sseOK || c.ver.modern() {
		return nil
	}
	if c.ver == v20250326 {
		return askable20250326
	}
	return askable20250618
}

// askOnStream takes the outcome of a request's first round (err) that may
// ask its client on its stream and, while the request asks, asks and runs
// it again (round, which runs it with c.ctx and keeps its result); it
// returns the last round's error.
func (c *call) askOnStream(id []byte, canAsk []string, err error, round func() error) error {
	if err == nil {
		return nil // the common case, at no cost
	}
	var ni *dispatch.NeedsInput
	if !errors.As(err, &ni) {
		return err
	}
	callCtx, stop := c.detach(id)
	defer stop()
	outer := c.ctx
	defer func() { c.ctx = outer }()
	for n := 1; ; n++ {
		if n > maxStreamRounds {
			return &dispatch.ToolError{Code: dispatch.Unavailable, Message: fmt.Sprintf(
				"%s asked its client %d times without finishing; this server asks at most %d rounds in one call", ni.Capability, n-1, maxStreamRounds)}
		}
		var responses map[string]json.RawMessage
		responses, canAsk, err = c.askClient(callCtx, ni, canAsk)
		if err != nil {
			return err
		}
		roundCtx, cancel := callCtx, context.CancelFunc(func() {})
		if c.h.timeout > 0 {
			roundCtx, cancel = context.WithTimeout(callCtx, c.h.timeout)
		}
		roundCtx = dispatch.WithInput(roundCtx, dispatch.Input{CanAsk: canAsk, Responses: responses})
		c.ctx = dispatch.WithConfirmation(roundCtx, dispatch.Confirmation{State: ni.State})
		err = round()
		cancel()
		if !errors.As(err, &ni) {
			return err
		}
	}
}

// detach returns the context the rounds after the first run under: the
// request's values without its deadline (each round gets one of its own,
// and the wait for answers its own), ended when the client goes away or
// cancels the request (notifications/cancelled, which from now on reaches
// this context). stop releases it.
func (c *call) detach(id []byte) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.ctx))
	first := c.ctx
	stopGone := context.AfterFunc(c.r.Context(), cancel)
	// A cancel that came while the first round ran, or comes before the
	// registration below replaces the first one's.
	stopCancelled := context.AfterFunc(first, func() {
		if errors.Is(first.Err(), context.Canceled) {
			cancel()
		}
	})
	var g registration
	if k, ok := idKey(id); ok {
		g = c.h.running.start(cancel, callKey{auth: c.auth, id: k})
	}
	return ctx, func() {
		stopGone()
		stopCancelled()
		g.end()
		cancel()
	}
}

// askClient sends the requests of a round to the client on the call's
// stream and waits for every answer, until the round's state lapses. It
// returns the answers by the plugin's keys, and what the next round may
// ask: without what the client answered with an error. A client that did
// not answer in time ends the call with a tool error.
func (c *call) askClient(ctx context.Context, ni *dispatch.NeedsInput, canAsk []string) (map[string]json.RawMessage, []string, error) {
	deadline := ni.ExpiresAt.Add(-answerMargin)
	if ni.ExpiresAt.IsZero() || time.Until(deadline) <= 0 {
		return nil, canAsk, fmt.Errorf("the state of %s's round %s lapses before its client could answer", ni.Capability, ni.ID)
	}
	wait := time.Until(deadline)
	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	type pending struct {
		key, method, id string
		answer          <-chan answers.Answer
	}
	caller := answers.Caller{Token: c.p.Token, User: c.p.UserID}
	waits := make([]pending, len(ni.Requests))
	for i, r := range ni.Requests {
		id, ch, done := c.h.answers.Await(caller)
		defer done()
		waits[i] = pending{key: r.Key, method: r.Method, id: id, answer: ch}
	}
	if c.stream == nil {
		c.stream = &noticeStream{w: c.w}
	}
	after := time.Time{}
	if c.h.timeout > 0 {
		after = deadline.Add(c.h.timeout + streamGrace)
	}
	c.stream.holdOpenUntil(after)
	var msg []byte
	for i, r := range ni.Requests {
		msg = append(msg[:0], `{"jsonrpc":"2.0","id":`...)
		msg = appendString(msg, waits[i].id)
		msg = append(msg, `,"method":`...)
		msg = appendString(msg, r.Method)
		msg = append(msg, `,"params":`...)
		msg = appendRaw(msg, r.Params)
		msg = append(msg, '}')
		if !c.stream.event(msg) {
			return nil, canAsk, fmt.Errorf("asking the client of %s: %w", ni.Capability, context.Canceled)
		}
	}
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: asked the caller's client on the call's stream",
		slog.String("capability", ni.Capability), slog.String("round", ni.ID), slog.Int("requests", len(ni.Requests)),
		slog.String("role", c.p.Role), slog.String("user", c.p.UserID))

	responses := make(map[string]json.RawMessage, len(waits))
	for _, w := range waits {
		select {
		case a := <-w.answer:
			if a.Error == nil {
				responses[w.key] = a.Result
				continue
			}
			// Not answered: the client does not do this (method not
			// found, or an SDK's own code for it), or would not now (its
			// user refused). Either way the next round is told it cannot
			// ask it, and goes on without or says what it lacks.
			canAsk = slices.DeleteFunc(slices.Clone(canAsk), func(m string) bool { return m == w.method })
			c.refusals = append(c.refusals, fmt.Sprintf("%s with error %d: %s", w.method, a.Error.Code, a.Error.Message))
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return nil, canAsk, fmt.Errorf("waiting for the client of %s: %w", ni.Capability, ctx.Err())
			}
			return nil, canAsk, &dispatch.ToolError{Code: dispatch.Unavailable, Message: fmt.Sprintf(
				"%s could not go on: its client did not answer %s within %s", ni.Capability, w.method, (wait + time.Second - 1).Truncate(time.Second))}
		}
	}
	return responses, canAsk, nil
}

// answered takes a client's response to a request a call sent it on its
// stream, from this caller, and hands it to the call, wherever it waits.
// A response to anything else is accepted and dropped, as before: nothing
// waits for it.
func (c *call) answered(m *message, out []byte) (int, []byte) {
	raw, ok := decodeString(m.id)
	if c.h.answers == nil || !isString(m.id) || !ok || !answers.IsID(raw) {
		return http.StatusAccepted, out
	}
	var a answers.Answer
	switch {
	case m.result != nil && m.errVal != nil:
		return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: a response carries a result or an error, not both")
	case m.result != nil:
		if m.result[0] != '{' {
			return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: the result of "+strconv.Quote(raw)+" must be an object")
		}
		if len(m.result) > answers.MaxAnswerBytes {
			return http.StatusRequestEntityTooLarge, appendError(out, nil, codeInvalidRequest,
				"invalid request: the result of "+strconv.Quote(raw)+" is larger than the "+strconv.Itoa(answers.MaxAnswerBytes)+" bytes this server takes")
		}
		a.Result = json.RawMessage(slices.Clone(m.result))
	default:
		var e struct {
			Code    *int   `json:"code"`
			Message string `json:"message"`
		}
		if len(m.errVal) == 0 || m.errVal[0] != '{' || json.Unmarshal(m.errVal, &e) != nil || e.Code == nil {
			return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: an error response's error must be an object with an integer code")
		}
		a.Error = &answers.Error{Code: *e.Code, Message: clipString(e.Message, answers.MaxErrorMessage)}
	}
	err := c.h.answers.Deliver(c.ctx, answers.Caller{Token: c.p.Token, User: c.p.UserID}, raw, a)
	switch {
	case err == nil:
		return http.StatusAccepted, out
	case errors.Is(err, answers.ErrNoCall):
		return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: no call waits for an answer to "+
			strconv.Quote(raw)+": it ended (answered, cancelled or out of time), or the request was not sent to this caller")
	}
	ref := correlationID()
	c.h.log.LogAttrs(c.ctx, slog.LevelError, "mcp: handing a client's answer to the call waiting for it",
		slog.String("correlation_id", ref), slog.String("error", err.Error()))
	return http.StatusServiceUnavailable, appendError(out, nil, codeInternalError,
		"internal error: the answer could not be handed to the call waiting for it; send it again (reference "+ref+")")
}
