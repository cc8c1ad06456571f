package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// ExtTasks names the MCP tasks extension in capabilities.
const ExtTasks = "io.modelcontextprotocol/tasks"

// codeMissingCapability is 2026-07-28's Missing Required Client
// Capability error.
const codeMissingCapability = -32021

// maxTaskIDBytes bounds the task ID a request may name; the store's IDs
// are far shorter.
const maxTaskIDBytes = 128

// TaskOptions turns the tasks extension on (see package tasks for the
// lifecycle). Every field must be set.
type TaskOptions struct {
	Store *tasks.Store
	// TTL is how long a task is kept from its creation; RunTimeout bounds
	// its call; PollInterval is suggested to clients, and is how often the
	// replica running a task reads whether it was cancelled elsewhere.
	TTL, RunTimeout, PollInterval time.Duration
	// MaxPerPrincipal bounds a principal's unfinished tasks.
	MaxPerPrincipal int
	// Approvals, when set, makes a call held for a human a task that
	// follows its approval request (HeldOutcome); nil answers a held call
	// with its pending result, as without the extension.
	Approvals ApprovalReader
}

// ApprovalReader reads approval requests: *approvals.Store.
type ApprovalReader interface {
	Get(ctx context.Context, id string) (approvals.Approval, error)
}

// HeldOutcome is the end of a held call's task as its approval request
// says it: ok is false while no end is known (pending, approved, running).
// The approved call's result completes the task as a tools/call result
// would (a tool error with isError); a rejection, an expiry or a refusal
// when it ran fails it with the gate's -32003, an internal failure with
// -32603.
func HeldOutcome(a approvals.Approval) (o tasks.Outcome, ok bool) {
	refused := func(reason string) tasks.Outcome {
		b, _ := json.Marshal(map[string]any{"code": codeForbidden, "message": "forbidden: " + reason,
			"data": map[string]any{"step": string(dispatch.StepRisk), "reason": reason, "capability": a.Capability}})
		return tasks.Outcome{Status: tasks.Failed, Payload: b, Message: clipString(reason, tasks.MaxMessage)}
	}
	switch a.Status {
	case approvals.Rejected:
		reason := "a human rejected the call"
		if a.Reason != "" {
			reason += ": " + a.Reason
		}
		return refused(strings.ToValidUTF8(reason, "")), true
	case approvals.Expired:
		return refused("no human decided on the call in time"), true
	case approvals.Done:
	default:
		return tasks.Outcome{}, false
	}
	text := func(msg string, isError bool) []byte {
		b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": msg}}, "isError": isError})
		return b
	}
	switch a.Outcome.Kind {
	case approvals.OutcomeResult:
		res := json.RawMessage(a.Outcome.Result)
		if !json.Valid(res) {
			break
		}
		b, err := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": string(res)}},
			"structuredContent": res, "isError": false})
		if err != nil || len(b) > tasks.MaxOutcome {
			break
		}
		return tasks.Outcome{Status: tasks.Completed, Payload: b}, true
	case approvals.OutcomeToolError:
		return tasks.Outcome{Status: tasks.Completed, Payload: text(a.Outcome.Message, true)}, true
	case approvals.OutcomeRefused:
		return refused(a.Outcome.Message), true
	}
	msg := a.Outcome.Message
	if msg == "" {
		msg = "internal error while running " + a.Capability
	}
	b, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
	return tasks.Outcome{Status: tasks.Failed, Payload: b, Message: clipString(msg, tasks.MaxMessage)}, true
}

// LostTaskError is the error a task ends with when the replica running it
// went away first (tasks.Store.Sweep's lost outcome).
var LostTaskError = []byte(`{"code":-32603,"message":"the server running this task stopped before the task ended; it may be called again"}`)

// taskRunner runs the tasks of one Handler and knows which run here.
type taskRunner struct {
	opts TaskOptions
	log  *slog.Logger
	wg   sync.WaitGroup
	mu   sync.Mutex
	// running holds the cancel of each task whose call runs here.
	running map[string]context.CancelFunc
	stopped bool
}

func newTaskRunner(o *TaskOptions, log *slog.Logger) *taskRunner {
	if o == nil {
		return nil
	}
	if o.Store == nil || o.TTL <= 0 || o.RunTimeout <= 0 || o.PollInterval <= 0 || o.MaxPerPrincipal <= 0 {
		panic("mcp.New: TaskOptions needs a store, a TTL, a run timeout, a poll interval and a bound per principal")
	}
	return &taskRunner{opts: *o, log: log, running: map[string]context.CancelFunc{}}
}

// track records the cancel of a task whose call runs here, and reads the
// store for a cancel made on another replica until the run ends.
func (tr *taskRunner) track(ctx context.Context, id string, cancel context.CancelFunc) bool {
	tr.mu.Lock()
	if tr.stopped {
		tr.mu.Unlock()
		return false
	}
	tr.running[id] = cancel
	tr.wg.Add(1) // under mu, so never after StopTasks began to wait
	tr.mu.Unlock()
	go func() {
		defer tr.wg.Done()
		t := time.NewTicker(tr.opts.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				st, err := tr.opts.Store.Status(ctx, id)
				if err == nil && st == tasks.Cancelled {
					cancel()
					return
				}
			}
		}
	}()
	return true
}

// begin counts a run about to start, unless the runner has stopped.
func (tr *taskRunner) begin() bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.stopped {
		return false
	}
	tr.wg.Add(1)
	return true
}

func (tr *taskRunner) untrack(id string) {
	tr.mu.Lock()
	delete(tr.running, id)
	tr.mu.Unlock()
}

// cancelHere stops the run of task id if it runs on this replica.
func (tr *taskRunner) cancelHere(id string) {
	tr.mu.Lock()
	cancel := tr.running[id]
	tr.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// StopTasks cancels the calls of the tasks running on this replica and
// waits, until ctx ends, for their outcomes to be stored: a task cut short
// by a shutdown ends failed rather than staying unfinished. New tasks are
// no longer created. A handler without tasks returns at once.
func (h *Handler) StopTasks(ctx context.Context) error {
	tr := h.tasks
	if tr == nil {
		return nil
	}
	tr.mu.Lock()
	tr.stopped = true
	for _, cancel := range tr.running {
		cancel()
	}
	tr.mu.Unlock()
	done := make(chan struct{})
	go func() { tr.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tasks still running at shutdown: %w", ctx.Err())
	}
}

// declaresTasks reports whether a request's client capabilities name the
// tasks extension: only then may it get a task.
func declaresTasks(capabilities []byte) bool {
	if len(capabilities) == 0 || capabilities[0] != '{' {
		return false
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(capabilities, &caps) != nil {
		return false
	}
	v, ok := caps.Extensions[ExtTasks]
	return ok && len(v) > 0 && v[0] == '{'
}

// requestDeclaresTasks reads the request's _meta for the extension.
func requestDeclaresTasks(ps *params) bool {
	var rm requestMeta
	return len(ps.meta) > 0 && parseMeta(ps.meta, &rm) && declaresTasks(rm.capabilities)
}

// missingTasks is the error for a request that needs the extension from a
// client that did not declare it.
func missingTasks(out, id []byte, msg string) []byte {
	out = appendErrorHead(out, id, codeMissingCapability, msg)
	return append(out, `,"data":{"requiredCapabilities":{"extensions":{"`+ExtTasks+`":{}}}}}}`...)
}

// toolsCallAsTask answers a 2026-07-28 tools/call of a capability that
// declares task support, when it is one: ok is false for a call that runs
// as any other does.
func (c *call) toolsCallAsTask(id []byte, name string, ps *params, out []byte) (int, []byte, bool) {
	e, found := c.h.reg.Lookup(name)
	if !found || e.TaskSupport == registry.TaskForbidden {
		return 0, nil, false
	}
	declared := requestDeclaresTasks(ps)
	if declared && c.h.tasks != nil && c.h.tasks.begin() {
		status, out := c.runAsTask(id, e, ps, out)
		return status, out, true
	}
	if e.TaskSupport != registry.TaskRequired {
		return 0, nil, false
	}
	// A call that could only run as a task: the gate's argument-free
	// steps answer first, so a token that may not call it learns no more
	// than a plain call would tell it.
	if r := c.h.d.Check(c.p, &e.Capability); r != nil {
		return http.StatusOK, c.refused(id, r, out), true
	}
	if !declared {
		return http.StatusOK, missingTasks(out, id, "missing required client capability: "+name+" runs only as a task, and the request does not declare the "+ExtTasks+" extension"), true
	}
	return http.StatusOK, c.errorResult(id, name+" runs only as a task, and this server runs no tasks now", out), true
}

// copyParams is ps with every value copied out of the request body, which
// goes back to its pool when the request is answered, before a task's
// call has ended.
func copyParams(ps *params) params {
	cp := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		return append([]byte(nil), b...)
	}
	return params{
		name: cp(ps.name), uri: cp(ps.uri), cursor: cp(ps.cursor), protocolVersion: cp(ps.protocolVersion),
		arguments: cp(ps.arguments), meta: cp(ps.meta), requestID: cp(ps.requestID), taskID: cp(ps.taskID),
		requestState: cp(ps.requestState), inputResponses: cp(ps.inputResponses),
	}
}

// runAsTask runs the call in the background, as tools/call would run it
// (begin has counted it), and answers with the task the gate's admission
// created; or, when the gate answered before admitting it (a refusal, bad
// arguments, a question for the user) or no task could be made for an
// optional one, with that answer, as a plain call gets it. A call held
// for a human gets a task following its approval request (heldTask). A
// call that runs only as a task and asks its client at once asks on the
// call (askFirstWindow); any other question parks the task (endRound).
func (c *call) runAsTask(id []byte, e *registry.Entry, ps *params, out []byte) (int, []byte) {
	tr := c.h.tasks
	owner := tasks.Owner{TokenLabel: c.p.Token, UserID: c.p.UserID}
	// The call outlives the request once it is a task: it is bounded by
	// the task's run timeout instead, and until then, by the request too.
	runCtx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), tr.opts.RunTimeout)
	stop := context.AfterFunc(c.ctx, cancel)
	admitted := make(chan tasks.Task, 1)
	done := make(chan taskAnswer, 1)
	var first *firstAnswer
	if e.TaskSupport == registry.TaskRequired {
		first = newFirstAnswer()
	}
	var task *tasks.Task // set by admit, read by the run after the call: one goroutine
	digest := sha256.Sum256(ps.arguments)
	admit := func(ctx context.Context) error {
		t, err := tr.opts.Store.Create(ctx, tasks.New{Owner: owner, Capability: e.Name, ArgsSHA256: digest, TTL: tr.opts.TTL}, tr.opts.MaxPerPrincipal)
		switch {
		case errors.Is(err, tasks.ErrTooMany) && e.TaskSupport == registry.TaskOptional:
			return nil // runs while its caller waits
		case errors.Is(err, tasks.ErrTooMany):
			return &dispatch.ToolError{Code: dispatch.Unavailable, Message: fmt.Sprintf(
				"%s runs only as a task, and this token already has %d unfinished tasks; call again once one has ended", e.Name, tr.opts.MaxPerPrincipal)}
		case err != nil:
			return err
		}
		stop()
		if !tr.track(runCtx, t.ID, cancel) {
			// Shutting down: the task ends at once, failed.
			cancel()
		}
		task = &t
		admitted <- t
		return nil
	}
	var held dispatch.HeldReport
	c2 := *c
	c2.ctx = dispatch.WithAdmit(runCtx, admit)
	if tr.opts.Approvals != nil {
		c2.ctx = dispatch.WithHeldReport(c2.ctx, &held)
	}
	c2.inTask = true
	// The background call never writes to the request's connection, which
	// is answered (and gone) before it ends.
	c2.w, c2.stream = nil, nil
	ps2 := copyParams(ps)
	id2 := append([]byte(nil), id...)
	go func() {
		defer tr.wg.Done()
		defer cancel()
		var a taskAnswer
		func() {
			defer func() {
				if v := recover(); v != nil {
					a = taskAnswer{http.StatusOK, appendError(nil, id2, codeInternalError,
						c2.internalFailure(e.Name, &panicError{value: v, stack: debug.Stack()}))}
				}
			}()
			a.status, a.body = c2.toolsCall(id2, &ps2, nil)
		}()
		if task == nil {
			stop()
			if held.Held && held.ApprovalID != "" {
				// Held for a human: a task that follows the request.
				if t, ok := c2.heldTask(e, owner, digest, held.ApprovalID); ok {
					admitted <- t
					return
				}
			}
			done <- a
			return
		}
		tr.untrack(task.ID)
		_, _, asks := askedOf(a.body)
		if first.take(a, asks) {
			// Its caller has the question; no one was told of the task.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c2.ctx), 10*time.Second)
			defer cancel()
			if _, err := tr.opts.Store.Discard(ctx, task.ID); err != nil {
				c2.h.log.LogAttrs(ctx, slog.LevelError, "mcp: discarding a task that asked on its call", slog.String("capability", e.Name), slog.String("error", err.Error()))
			}
			return
		}
		c2.endRound(task.ID, 0, e.Name, encodeTaskCall(&ps2), a.body)
	}()
	select {
	case t := <-admitted:
		if first != nil && t.ApprovalID == "" {
			if a := first.wait(askFirstWindow); a != nil {
				return a.status, append(out, a.body...)
			}
		}
		return http.StatusOK, c.appendCreatedTask(id, t, out)
	case a := <-done:
		return a.status, append(out, a.body...)
	}
}

// heldTask stores the task of a call held for a human, which follows its
// approval request; false when none could be made (the principal's bound,
// a store down), and the caller then gets the pending result.
func (c *call) heldTask(e *registry.Entry, owner tasks.Owner, digest [32]byte, approvalID string) (tasks.Task, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
	defer cancel()
	tr := c.h.tasks
	t, err := tr.opts.Store.Create(ctx, tasks.New{Owner: owner, Capability: e.Name, ArgsSHA256: digest, TTL: tr.opts.TTL,
		ApprovalID: approvalID, Message: "waiting for a human to approve the call (approval request " + approvalID + ")"}, tr.opts.MaxPerPrincipal)
	if err != nil {
		if !errors.Is(err, tasks.ErrTooMany) {
			c.h.log.LogAttrs(ctx, slog.LevelError, "mcp: storing a held call's task", slog.String("capability", e.Name), slog.String("error", err.Error()))
		}
		return tasks.Task{}, false
	}
	return t, true
}

// followApproval ends a held call's task once its approval request has
// ended, and returns the task as it then stands: read when asked, by any
// replica, so no replica needs to hear of the decision.
func (c *call) followApproval(t tasks.Task) (tasks.Task, error) {
	tr := c.h.tasks
	if t.ApprovalID == "" || t.Status.Terminal() || tr.opts.Approvals == nil {
		return t, nil
	}
	a, err := tr.opts.Approvals.Get(c.ctx, t.ApprovalID)
	if err != nil {
		return t, fmt.Errorf("read the approval request of task %s: %w", t.ID, err)
	}
	o, ended := HeldOutcome(a)
	if !ended {
		if a.Status == approvals.Approved || a.Status == approvals.Running {
			if t.Message != approvedMessage {
				if _, err := tr.opts.Store.Progress(c.ctx, t.ID, tasks.Working, approvedMessage); err != nil {
					return t, err
				}
				t.Message = approvedMessage
			}
		}
		return t, nil
	}
	if _, err := tr.opts.Store.Finish(c.ctx, t.ID, o); err != nil {
		return t, err
	}
	return tr.opts.Store.Get(c.ctx, t.Owner, t.ID)
}

const approvedMessage = "approved by a human; the call runs"

// finishTask stores what the call answered as the task's end: a result
// (a tool error included) completes it, a JSON-RPC error fails it. A task
// already ended (cancelled) keeps its end.
func (c *call) finishTask(taskID, name string, body []byte) {
	o := taskOutcome(name, body)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 10*time.Second)
	defer cancel()
	ended, err := c.h.tasks.opts.Store.Finish(ctx, taskID, o)
	if err != nil {
		c.h.log.LogAttrs(ctx, slog.LevelError, "mcp: storing a task's end", slog.String("capability", name), slog.String("error", err.Error()))
		return
	}
	if !ended {
		c.h.log.LogAttrs(ctx, slog.LevelDebug, "mcp: a task's call ended after the task", slog.String("capability", name))
	}
}

// taskOutcome reads a tools/call response as a task's end.
func taskOutcome(name string, body []byte) tasks.Outcome {
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		} `json:"error"`
	}
	failed := func(msg string) tasks.Outcome {
		b, _ := json.Marshal(map[string]any{"code": codeInternalError, "message": msg})
		return tasks.Outcome{Status: tasks.Failed, Payload: b, Message: msg}
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return failed("internal error: the answer of " + name + " could not be read")
	}
	if env.Error != nil {
		b, err := json.Marshal(env.Error)
		if err != nil {
			return failed("internal error: the error of " + name + " could not be kept")
		}
		msg := strings.ToValidUTF8(clipString(env.Error.Message, tasks.MaxMessage), "")
		return tasks.Outcome{Status: tasks.Failed, Payload: b, Message: msg}
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(env.Result, &res); err != nil || res == nil {
		return failed("internal error: the result of " + name + " could not be read")
	}
	if rt, ok := res["resultType"]; ok && string(rt) != `"complete"` {
		// A question parks the task before it gets here (endRound): any
		// other kind of result is not one a task can end with.
		return failed("internal error: " + name + " answered a result a task cannot end with")
	}
	// The inlined result is the CallToolResult itself; resultType belongs
	// to the tasks/get response around it.
	delete(res, "resultType")
	b, err := json.Marshal(res)
	if err != nil || len(b) > tasks.MaxOutcome {
		return failed("internal error: the result of " + name + " is too large to keep")
	}
	return tasks.Outcome{Status: tasks.Completed, Payload: b}
}

// appendTaskFields appends a task's fields, without braces.
func (c *call) appendTaskFields(out []byte, t tasks.Task) []byte {
	out = append(out, `"taskId":`...)
	out = appendString(out, t.ID)
	out = append(out, `,"status":`...)
	out = appendString(out, string(t.Status))
	if t.Message != "" {
		out = append(out, `,"statusMessage":`...)
		out = appendString(out, t.Message)
	}
	out = append(out, `,"createdAt":"`...)
	out = t.CreatedAt.UTC().AppendFormat(out, isoMillis)
	out = append(out, `","lastUpdatedAt":"`...)
	out = t.UpdatedAt.UTC().AppendFormat(out, isoMillis)
	out = append(out, `","ttlMs":`...)
	out = strconv.AppendInt(out, t.TTL().Milliseconds(), 10)
	out = append(out, `,"pollIntervalMs":`...)
	return strconv.AppendInt(out, c.h.tasks.opts.PollInterval.Milliseconds(), 10)
}

// isoMillis is how task times go on the wire: ISO 8601, UTC, milliseconds.
const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// appendCreatedTask is the CreateTaskResult: the task's fields at the top
// level, resultType "task".
func (c *call) appendCreatedTask(id []byte, t tasks.Task, out []byte) []byte {
	out = append(appendResultHead(out, id), '{')
	out = c.appendTaskFields(out, t)
	out = append(out, c.h.taskTail...)
	return append(out, "}}"...)
}

// ack is the empty result of tasks/update and tasks/cancel.
func (c *call) ack(id, out []byte) []byte {
	out = append(appendResultHead(out, id), '{')
	out = append(out, c.h.modernTail[1:]...) // without its leading comma
	return append(out, "}}"...)
}

// tasksMethod answers tasks/get, tasks/update and tasks/cancel, from the
// store, for the principal who started the task alone.
func (c *call) tasksMethod(meth method, id []byte, ps *params, out []byte) (int, []byte) {
	tr := c.h.tasks
	if !requestDeclaresTasks(ps) {
		return http.StatusOK, missingTasks(out, id, "missing required client capability: "+methodName(meth)+" needs the "+ExtTasks+" extension declared in _meta")
	}
	taskID, ok := decodeString(ps.taskID)
	if !isString(ps.taskID) || !ok || taskID == "" || len(taskID) > maxTaskIDBytes {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: "+methodName(meth)+" needs params.taskId, a task's ID")
	}
	if meth == mTasksUpdate && (len(ps.inputResponses) == 0 || ps.inputResponses[0] != '{') {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: tasks/update needs params.inputResponses, an object")
	}
	owner := tasks.Owner{TokenLabel: c.p.Token, UserID: c.p.UserID}
	var (
		t   tasks.Task
		err error
	)
	if meth == mTasksUpdate {
		return c.updateTask(id, owner, taskID, ps, out)
	}
	if meth == mTasksCancel {
		t, err = tr.opts.Store.Cancel(c.ctx, owner, taskID, "cancelled by the client")
	} else if t, err = tr.opts.Store.Get(c.ctx, owner, taskID); err == nil {
		t, err = c.followApproval(t)
	}
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: no task "+strconv.Quote(clipString(taskID, 64)))
	case err != nil:
		ref := correlationID()
		c.h.log.LogAttrs(c.ctx, slog.LevelError, "mcp: task store", slog.String("correlation_id", ref), slog.String("error", err.Error()))
		return http.StatusOK, appendError(out, id, codeInternalError, "internal error (reference "+ref+")")
	}
	switch meth {
	case mTasksCancel:
		if t.Status == tasks.Cancelled {
			tr.cancelHere(t.ID)
		}
		return http.StatusOK, c.ack(id, out)
	}
	out = append(appendResultHead(out, id), '{')
	out = c.appendTaskFields(out, t)
	switch t.Status {
	case tasks.Completed:
		out = append(out, `,"result":`...)
		out = append(out, t.Outcome...)
	case tasks.Failed:
		out = append(out, `,"error":`...)
		out = append(out, t.Outcome...)
	case tasks.InputRequired:
		out = appendInputRequests(out, t.Pending)
	}
	return http.StatusOK, c.closeResult(out, false)
}

func methodName(m method) string {
	switch m {
	case mTasksGet:
		return "tasks/get"
	case mTasksUpdate:
		return "tasks/update"
	case mTasksCancel:
		return "tasks/cancel"
	}
	return methodByID(m)
}

// clipString cuts s to at most n bytes on a character boundary.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
