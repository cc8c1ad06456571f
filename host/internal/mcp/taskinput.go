package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/internal/dispatch"
)

// Tasks that ask their client (see package tasks for the lifecycle). A
// task's call that asks answers input_required, exactly as a plain call
// at 2026-07-28 does; instead of going back to the client, that answer
// parks the task (tasks.Store.Park) with the requests, the sealed state
// and the call. tasks/update stores the client's answers; the one that
// answers the last request resumes the call on the replica that received
// it: the same tools/call, run again through the whole gate as the
// task's owner with the answers and the state, as the client's retry of
// a plain call would be. It may end, or ask again.

// askFirstWindow is how long the caller of a call that runs only as a
// task waits for the call's first answer: a call that asks its client
// before doing anything asks on the call itself (input_required, no task
// yet), so that the client answers on its retry and the retry becomes the
// task (the extension's MRTR-then-task composition). A call still
// running then is answered with its task, whose later questions park it.
// A call that may run either way (optional) is a task at once: its
// client chose a task, and its questions are the task's.
const askFirstWindow = 500 * time.Millisecond

// taskAnswer is what a task's call answered, as a tools/call response.
type taskAnswer struct {
	status int
	body   []byte
}

// firstAnswer hands a required call's first answer to its waiting caller
// when it is a question, and only while the caller still waits.
type firstAnswer struct {
	mu   sync.Mutex
	open bool
	ch   chan *taskAnswer // one value: the question taken, or nil
}

func newFirstAnswer() *firstAnswer { return &firstAnswer{open: true, ch: make(chan *taskAnswer, 1)} }

// take is told the call's first answer; it reports whether the caller took
// it, and the task is then not the client's.
func (f *firstAnswer) take(a taskAnswer, asks bool) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open {
		return false
	}
	f.open = false
	if asks {
		f.ch <- &a
		return true
	}
	f.ch <- nil
	return false
}

// wait returns the question the call asked within d, or nil once the call
// goes on as a task.
func (f *firstAnswer) wait(d time.Duration) *taskAnswer {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case a := <-f.ch:
		return a
	case <-t.C:
	}
	f.mu.Lock()
	if f.open {
		f.open = false
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	return <-f.ch // take is sending it now
}

// taskCall is what a waiting task keeps to run its call again: the
// request's arguments and _meta (the client's capabilities, what it may
// be asked, an idempotency key), as the client's retry would send them.
type taskCall struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Meta      json.RawMessage `json:"meta,omitempty"`
}

func encodeTaskCall(ps *params) []byte {
	tc := taskCall{}
	if len(ps.arguments) > 0 && json.Valid(ps.arguments) {
		tc.Arguments = ps.arguments
	}
	if len(ps.meta) > 0 && json.Valid(ps.meta) {
		tc.Meta = ps.meta
	}
	b, _ := json.Marshal(tc) // raw JSON already checked
	return b
}

// askedOf reads a tools/call response that asked its client: the requests
// in the order answered, and the sealed state; ok is false for any other
// answer.
func askedOf(body []byte) (reqs []tasks.Request, state string, ok bool) {
	var env struct {
		Result *struct {
			ResultType    string          `json:"resultType"`
			InputRequests json.RawMessage `json:"inputRequests"`
			RequestState  string          `json:"requestState"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &env) != nil || env.Result == nil || env.Result.ResultType != "input_required" {
		return nil, "", false
	}
	it := iterObject(env.Result.InputRequests, 2)
	var mb member
	for it.next(&mb) {
		key, kok := decodeString(mb.key)
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if !kok || json.Unmarshal(mb.val, &r) != nil {
			return nil, "", false
		}
		reqs = append(reqs, tasks.Request{Key: key, Method: r.Method, Params: r.Params})
	}
	if it.bad || len(reqs) == 0 {
		return nil, "", false
	}
	return reqs, env.Result.RequestState, true
}

// endRound stores how a task's run of round ended: a question parks the
// task, anything else ends it (finishTask).
func (c *call) endRound(taskID string, round int, name string, call, body []byte) {
	reqs, state, asked := askedOf(body)
	if !asked {
		c.finishTask(taskID, name, body)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
	defer cancel()
	store := c.h.tasks.opts.Store
	msg := fmt.Sprintf("waiting for the client to answer %d request(s) of %s", len(reqs), name)
	parked, err := store.Park(ctx, taskID, round, tasks.Park{Requests: reqs, State: state, Call: call, Message: msg})
	switch {
	case err != nil:
		// A question the task cannot keep ends it, rather than leaving it
		// working with nothing running.
		ref := correlationID()
		c.h.log.LogAttrs(ctx, slog.LevelError, "mcp: parking a task that asked its client", slog.String("correlation_id", ref),
			slog.String("capability", name), slog.String("error", err.Error()))
		b, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": "internal error: the task could not wait for its client (reference " + ref + ")"})
		if _, err := store.Finish(ctx, taskID, tasks.Outcome{Status: tasks.Failed, Payload: b, Message: "the task could not wait for its client"}); err != nil {
			c.h.log.LogAttrs(ctx, slog.LevelError, "mcp: storing a task's end", slog.String("capability", name), slog.String("error", err.Error()))
		}
	case !parked:
		c.h.log.LogAttrs(ctx, slog.LevelDebug, "mcp: a task's call asked after the task ended", slog.String("capability", name))
	default:
		c.h.log.LogAttrs(ctx, slog.LevelInfo, "mcp: a task waits on its client", slog.String("capability", name),
			slog.Int("round", round+1), slog.Int("requests", len(reqs)), slog.String("user", c.p.UserID))
	}
}

// updateTask answers tasks/update: the answers are kept for the task's
// outstanding requests (others ignored), and the update that answers the
// last one resumes the call here. The ack is the same whatever happened,
// as the extension asks; the next tasks/get tells.
func (c *call) updateTask(id []byte, owner tasks.Owner, taskID string, ps *params, out []byte) (int, []byte) {
	// The gate's question, when a resumed call asked it, is one of the
	// task's requests like any other: its answer is kept as the others.
	answers, _, msg := readAnswers(ps.inputResponses, "")
	if msg != "" {
		return http.StatusOK, appendError(out, id, codeInvalidParams, msg)
	}
	tr := c.h.tasks
	// Counted before the answers are taken, so that a resumption is never
	// handed to a replica that is stopping.
	if !tr.begin() {
		return http.StatusOK, appendError(out, id, codeInternalError, "internal error: this server is stopping; send the update again")
	}
	r, err := tr.opts.Store.Answer(c.ctx, owner, taskID, answers)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		tr.wg.Done()
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: no task "+strconv.Quote(clipString(taskID, 64)))
	case errors.Is(err, tasks.ErrInvalid):
		tr.wg.Done()
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: inputResponses: an answer, or the answers so far, are larger than this server keeps")
	case err != nil:
		tr.wg.Done()
		ref := correlationID()
		c.h.log.LogAttrs(c.ctx, slog.LevelError, "mcp: task store", slog.String("correlation_id", ref), slog.String("error", err.Error()))
		return http.StatusOK, appendError(out, id, codeInternalError, "internal error (reference "+ref+")")
	case r == nil:
		tr.wg.Done()
	default:
		c.resumeTask(r)
	}
	return http.StatusOK, c.ack(id, out)
}

// resumeTask runs a waiting task's call again in the background, as the
// task's owner (the caller of the tasks/update that answered last, whom
// the store checked to be the owner), with the answers and the sealed
// state: every step of the gate decides again. begin has counted it.
func (c *call) resumeTask(r *tasks.Resume) {
	tr := c.h.tasks
	name := r.Capability
	var tc taskCall
	answers, err := json.Marshal(r.Answers)
	if err == nil {
		err = json.Unmarshal(r.Call, &tc)
	}
	if err != nil {
		defer tr.wg.Done()
		c.finishTask(r.ID, name, appendError(nil, []byte("0"), codeInternalError, c.internalFailure(name, fmt.Errorf("resume task %s: %w", r.ID, err))))
		return
	}
	ps := params{name: appendString(nil, name), arguments: tc.Arguments, meta: tc.Meta,
		requestState: appendString(nil, r.State), inputResponses: answers}
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), tr.opts.RunTimeout)
	if !tr.track(runCtx, r.ID, cancel) {
		cancel() // stopping: the run ends at once, and fails the task
	}
	var held dispatch.HeldReport
	c2 := *c
	c2.ctx = runCtx
	if tr.opts.Approvals != nil {
		c2.ctx = dispatch.WithHeldReport(c2.ctx, &held)
	}
	c2.inTask = true
	c2.w, c2.stream = nil, nil
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: a task's client answered; its call runs again", slog.String("capability", name),
		slog.Int("round", r.Round), slog.String("user", c.p.UserID))
	go func() {
		defer tr.wg.Done()
		defer cancel()
		var body []byte
		func() {
			defer func() {
				if v := recover(); v != nil {
					body = appendError(nil, []byte("0"), codeInternalError, c2.internalFailure(name, &panicError{value: v, stack: debug.Stack()}))
				}
			}()
			_, body = c2.toolsCall([]byte("0"), &ps, nil)
		}()
		tr.untrack(r.ID)
		if held.Held && held.ApprovalID != "" {
			c2.followHeld(r.ID, name, held.ApprovalID)
			return
		}
		c2.endRound(r.ID, r.Round, name, r.Call, body)
	}()
}

// followHeld makes a resumed task whose call the gate held for a human
// follow the approval request, as a task held on its first round does.
func (c *call) followHeld(taskID, name, approvalID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
	defer cancel()
	msg := "waiting for a human to approve the call (approval request " + approvalID + ")"
	if _, err := c.h.tasks.opts.Store.Follow(ctx, taskID, approvalID, msg); err != nil {
		c.h.log.LogAttrs(ctx, slog.LevelError, "mcp: a resumed task's held call", slog.String("capability", name), slog.String("error", err.Error()))
	}
}

// appendInputRequests appends a waiting task's outstanding requests, by
// the IDs its client answers them under.
func appendInputRequests(out []byte, pending []tasks.Request) []byte {
	out = append(out, `,"inputRequests":{`...)
	for i, r := range pending {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, r.ID)
		out = append(out, `:{"method":`...)
		out = appendString(out, r.Method)
		out = append(out, `,"params":`...)
		out = appendRaw(out, r.Params)
		out = append(out, '}')
	}
	return append(out, '}')
}
