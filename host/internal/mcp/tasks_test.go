package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/pgtest"
)

// jobs is a provider whose calls the tests steer: jobs.slow runs until it
// is released or cancelled.
type jobs struct {
	mu       sync.Mutex
	release  chan struct{}
	started  chan string // the label of each jobs.slow call that started
	cancels  int
	finished int
	sinks    int // calls that found a notices sink
}

func newJobs() *jobs { return &jobs{release: make(chan struct{}), started: make(chan string, 16)} }

func (j *jobs) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	var in struct {
		Label string `json:"label"`
	}
	_ = json.Unmarshal(r.Args, &in)
	switch r.Capability {
	case "jobs.greet", "jobs.long":
		return json.RawMessage(`{"hello":"` + r.Principal.UserID + `"}`), nil
	case "jobs.slow":
		if n := dispatch.NoticesOf(ctx); n != nil {
			j.mu.Lock()
			j.sinks++
			j.mu.Unlock()
			n.Notify(dispatch.Notice{Progress: &dispatch.Progress{Progress: 1, Total: 2}})
		}
		j.started <- in.Label
		select {
		case <-j.release:
			j.mu.Lock()
			j.finished++
			j.mu.Unlock()
			return json.RawMessage(`{"label":"` + in.Label + `"}`), nil
		case <-ctx.Done():
			j.mu.Lock()
			j.cancels++
			j.mu.Unlock()
			return nil, ctx.Err()
		}
	case "jobs.fail":
		return nil, &dispatch.ToolError{Code: dispatch.Conflict, Message: "the job failed as it always does"}
	case "jobs.crash":
		panic("job exploded")
	case "jobs.broken":
		return nil, errors.New("disk on fire")
	}
	return nil, fmt.Errorf("no job %s", r.Capability)
}

func (j *jobs) counts() (cancels, finished int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cancels, j.finished
}

// jobsGate is a dispatcher over the jobs provider.
func jobsGate(t testing.TB, j *jobs) *dispatch.Dispatcher {
	t.Helper()
	reg := registry.New([]string{"jobs"})
	obj := json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","maxLength":64}},"additionalProperties":false}`)
	for _, c := range []registry.Capability{
		{Name: "jobs.greet", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj},
		{Name: "jobs.slow", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskOptional},
		{Name: "jobs.fail", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskOptional},
		{Name: "jobs.crash", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskOptional},
		{Name: "jobs.broken", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskOptional},
		{Name: "jobs.long", Kind: registry.Read, Pack: "jobs", Permission: "jobs.run", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskRequired},
		{Name: "jobs.secret", Kind: registry.Read, Pack: "jobs", Permission: "jobs.secret", Plugin: "jobs", InputSchema: obj, TaskSupport: registry.TaskRequired},
	} {
		if err := reg.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"jobs": true}, Roles: map[string][]string{"worker": {"jobs.run"}}},
		map[string]dispatch.Provider{"jobs": j})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	aliceTasks = dispatch.Principal{Role: "worker", Scope: dispatch.ScopeRead, UserID: "alice", Token: "tokens-0"}
	// aliceOther is alice with another token: her tasks are the first
	// token's alone.
	aliceOther = dispatch.Principal{Role: "worker", Scope: dispatch.ScopeRead, UserID: "alice", Token: "tokens-1"}
	bobTasks   = dispatch.Principal{Role: "worker", Scope: dispatch.ScopeRead, UserID: "bob", Token: "tokens-2"}
)

type taskFixture struct {
	*fixture
	jobs  *jobs
	store *tasks.Store
}

func taskOptions(s *tasks.Store) *TaskOptions {
	return &TaskOptions{Store: s, TTL: time.Hour, RunTimeout: time.Minute, PollInterval: 50 * time.Millisecond, MaxPerPrincipal: 3}
}

func sqliteTasks(t testing.TB) *tasks.Store {
	t.Helper()
	s, err := tasks.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), tasks.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newTaskFixture is a handler over the jobs with tasks on (opts nil: off).
func newTaskFixture(t testing.TB, j *jobs, opts *TaskOptions) *taskFixture {
	t.Helper()
	f := &fixture{t: t, logs: &mcptest.LogBuffer{}}
	f.h = New(jobsGate(t, j), Options{Version: "test", Logger: slogTo(f.logs), Tasks: opts})
	tf := &taskFixture{fixture: f, jobs: j}
	if opts != nil {
		tf.store = opts.Store
		t.Cleanup(func() {
			close(j.release)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := f.h.StopTasks(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	return tf
}

// withTasks is params whose _meta declares the tasks extension.
func withTasks(params map[string]any) map[string]any {
	params["_meta"] = map[string]any{metaClientCapabilities: map[string]any{"extensions": map[string]any{ExtTasks: map[string]any{}}}}
	return params
}

func (f *taskFixture) call(p dispatch.Principal, declare bool, name string, args map[string]any) reply {
	f.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if declare {
		params = withTasks(params)
	}
	return f.send(p, Version20260728, rpc{method: "tools/call", id: 1, params: params})
}

func (f *taskFixture) task(p dispatch.Principal, method, id string) reply {
	f.t.Helper()
	params := withTasks(map[string]any{"taskId": id})
	if method == "tasks/update" {
		params["inputResponses"] = map[string]any{"k": map[string]any{"action": "accept"}}
	}
	return f.send(p, Version20260728, rpc{method: method, id: 2, params: params})
}

// until polls tasks/get until the task's status is want.
func (f *taskFixture) until(p dispatch.Principal, id, want string) map[string]any {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := f.task(p, "tasks/get", id).result(f.t)
		if res["status"] == want {
			return res
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("task %s is %v, not %s: %v", id, res["status"], want, res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTasksDiscover(t *testing.T) {
	on := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	caps := on.send(aliceTasks, Version20260728, rpc{method: "server/discover", id: 1}).result(t)["capabilities"].(map[string]any)
	if ext, ok := caps["extensions"].(map[string]any); !ok || ext[ExtTasks] == nil || caps["tasks"] != nil {
		t.Fatalf("capabilities with tasks on: %v", caps)
	}
	// The older revisions' handshake names no extension.
	init := on.send(aliceTasks, Version20251125, rpc{method: "initialize", id: 1, params: map[string]any{"protocolVersion": Version20251125}}).result(t)
	if _, ok := init["capabilities"].(map[string]any)["extensions"]; ok {
		t.Fatalf("initialize names extensions: %v", init)
	}
	off := newTaskFixture(t, newJobs(), nil)
	caps = off.send(aliceTasks, Version20260728, rpc{method: "server/discover", id: 1}).result(t)["capabilities"].(map[string]any)
	if _, ok := caps["extensions"]; ok {
		t.Fatalf("capabilities with tasks off: %v", caps)
	}
	// Off, the methods do not exist.
	if code := off.task(aliceTasks, "tasks/get", "tk_x").errorCode(t); code != codeMethodNotFound {
		t.Fatalf("tasks/get with tasks off: %d", code)
	}
}

func TestTaskLifecycle(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	// A tool without task support answers as ever, extension or not.
	res := f.call(aliceTasks, true, "jobs.greet", nil).result(t)
	if res["resultType"] != "complete" || res["taskId"] != nil || toolText(t, res) != `{"hello":"alice"}` {
		t.Fatalf("sync tool: %v", res)
	}
	// Without the extension, an optional one runs while the caller waits.
	done := make(chan reply, 1)
	go func() { done <- f.call(aliceTasks, false, "jobs.slow", map[string]any{"label": "sync"}) }()
	if got := <-f.jobs.started; got != "sync" {
		t.Fatalf("started %q", got)
	}
	f.jobs.release <- struct{}{}
	if res := (<-done).result(t); res["taskId"] != nil || toolText(t, res) != `{"label":"sync"}` {
		t.Fatalf("optional without the extension: %v", res)
	}

	// With it, a task comes back at once, flat, and the call runs on.
	rep := f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "bg"})
	created := rep.result(t)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || !strings.HasPrefix(id, "tk_") || created["status"] != "working" || created["task"] != nil ||
		created["result"] != nil || created["ttlMs"] != float64(time.Hour.Milliseconds()) || created["pollIntervalMs"] != float64(50) ||
		created["requestState"] != nil || created["ttl"] != nil {
		t.Fatalf("CreateTaskResult: %s", rep.raw)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		if ts, err := time.Parse(time.RFC3339Nano, created[k].(string)); err != nil || time.Since(ts) > time.Minute {
			t.Fatalf("%s %v: %v", k, created[k], err)
		}
	}
	if got := <-f.jobs.started; got != "bg" {
		t.Fatalf("started %q", got)
	}
	working := f.task(aliceTasks, "tasks/get", id).result(t)
	if working["status"] != "working" || working["resultType"] != "complete" || working["taskId"] != id || working["result"] != nil {
		t.Fatalf("working: %v", working)
	}
	f.jobs.release <- struct{}{}
	got := f.until(aliceTasks, id, "completed")
	result, _ := got["result"].(map[string]any)
	if result == nil || toolText(t, result) != `{"label":"bg"}` || result["isError"] != false || result["resultType"] != nil {
		t.Fatalf("completed: %v", got)
	}
	if got["error"] != nil || got["requestState"] != nil {
		t.Fatalf("completed carries more: %v", got)
	}

	// A tool error completes the task, with isError.
	fail := f.call(aliceTasks, true, "jobs.fail", nil).result(t)["taskId"].(string)
	got = f.until(aliceTasks, fail, "completed")
	if r := got["result"].(map[string]any); r["isError"] != true || !strings.Contains(toolText(t, r), "failed as it always does") {
		t.Fatalf("tool error: %v", got)
	}
	// A failure of the plugin, a panic included, fails it with a JSON-RPC
	// error that names a reference, never the cause.
	for _, name := range []string{"jobs.broken", "jobs.crash"} {
		id := f.call(aliceTasks, true, name, nil).result(t)["taskId"].(string)
		got := f.until(aliceTasks, id, "failed")
		e, _ := got["error"].(map[string]any)
		if e == nil || e["code"] != float64(codeInternalError) || !strings.Contains(e["message"].(string), "reference") ||
			strings.Contains(e["message"].(string), "fire") || strings.Contains(e["message"].(string), "exploded") || got["result"] != nil {
			t.Fatalf("%s: %v", name, got)
		}
	}
}

// TestTaskSendsNoNotices: a task's call asked for progress and logs is
// answered with its task as JSON, not a stream: tasks carry no notices.
func TestTaskSendsNoNotices(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	params := withTasks(map[string]any{"name": "jobs.slow", "arguments": map[string]any{"label": "quiet"}})
	meta := params["_meta"].(map[string]any)
	meta["progressToken"] = "p-1"
	meta["io.modelcontextprotocol/logLevel"] = "debug"
	rep := f.send(aliceTasks, Version20260728, rpc{method: "tools/call", id: 1, params: params})
	if ct := rep.header.Get("Content-Type"); ct != "application/json" || rep.result(t)["resultType"] != "task" {
		t.Fatalf("%s: %s", ct, rep.raw)
	}
	id := rep.result(t)["taskId"].(string)
	<-f.jobs.started
	f.jobs.release <- struct{}{}
	f.until(aliceTasks, id, "completed")
	f.jobs.mu.Lock()
	defer f.jobs.mu.Unlock()
	if f.jobs.sinks != 0 {
		t.Fatal("a task's call was given a notices sink")
	}
}

func TestTaskGateComesFirst(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	outsider := dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: "eve", Token: "tokens-9"}
	// A refused call is the refusal, not a task.
	rep := f.call(outsider, true, "jobs.slow", nil)
	if code := rep.errorCode(t); code != codeForbidden {
		t.Fatalf("refused: %s", rep.raw)
	}
	// Bad arguments are the tool error, not a task.
	res := f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": 7}).result(t)
	if res["taskId"] != nil || res["isError"] != true {
		t.Fatalf("invalid arguments: %v", res)
	}
	// A required one without the extension: -32021 naming it, after the
	// gate's own steps.
	rep = f.call(aliceTasks, false, "jobs.long", nil)
	e := rep.errorObj(t)
	data, _ := e["data"].(map[string]any)
	if e["code"] != float64(codeMissingCapability) || data == nil ||
		data["requiredCapabilities"].(map[string]any)["extensions"].(map[string]any)[ExtTasks] == nil {
		t.Fatalf("required without the extension: %s", rep.raw)
	}
	if code := f.call(aliceTasks, false, "jobs.secret", nil).errorCode(t); code != codeForbidden {
		t.Fatalf("required and refused: %d", code)
	}
	if code := f.call(outsider, false, "jobs.long", nil).errorCode(t); code != codeForbidden {
		t.Fatalf("required, refused, no extension: %d", code)
	}
	// With the extension it is a task.
	id := f.call(aliceTasks, true, "jobs.long", nil).result(t)["taskId"].(string)
	f.until(aliceTasks, id, "completed")
	// Older revisions never see tasks: the call runs as a plain one.
	res = f.send(aliceTasks, Version20251125, rpc{method: "tools/call", id: 1, params: withTasks(map[string]any{"name": "jobs.long"})}).result(t)
	if res["taskId"] != nil || toolText(t, res) != `{"hello":"alice"}` {
		t.Fatalf("2025-11-25: %v", res)
	}
}

func TestTaskOwnerOnly(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	id := f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "mine"}).result(t)["taskId"].(string)
	<-f.jobs.started
	missing := f.task(aliceTasks, "tasks/get", "tk_nosuchtask")
	for _, p := range []dispatch.Principal{aliceOther, bobTasks} {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			rep := f.task(p, m, id)
			e := rep.errorObj(t)
			// The same answer as for a task that does not exist, but for
			// the ID quoted.
			if e["code"] != float64(codeInvalidParams) ||
				strings.Replace(e["message"].(string), id, "tk_nosuchtask", 1) != missing.errorObj(t)["message"] {
				t.Fatalf("%s %s of another's task: %s", p.Token, m, rep.raw)
			}
		}
	}
	if st := f.task(aliceTasks, "tasks/get", id).result(t)["status"]; st != "working" {
		t.Fatalf("another's cancel changed it: %v", st)
	}
	f.jobs.release <- struct{}{}
	f.until(aliceTasks, id, "completed")
}

func TestTaskCancel(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	id := f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "stop"}).result(t)["taskId"].(string)
	<-f.jobs.started
	rep := f.task(aliceTasks, "tasks/cancel", id)
	ack := rep.result(t)
	if ack["resultType"] != "complete" || ack["taskId"] != nil || ack["status"] != nil {
		t.Fatalf("cancel ack: %s", rep.raw)
	}
	got := f.task(aliceTasks, "tasks/get", id).result(t)
	if got["status"] != "cancelled" || got["statusMessage"] != "cancelled by the client" {
		t.Fatalf("after cancel: %v", got)
	}
	// The run stops, and its end does not overwrite the cancel.
	deadline := time.Now().Add(5 * time.Second)
	for c, _ := f.jobs.counts(); c == 0; c, _ = f.jobs.counts() {
		if time.Now().After(deadline) {
			t.Fatal("the run was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if st := f.task(aliceTasks, "tasks/get", id).result(t)["status"]; st != "cancelled" {
		t.Fatalf("after the run ended: %v", st)
	}
	// Again, and on an ended task: the same ack.
	if ack := f.task(aliceTasks, "tasks/cancel", id).result(t); ack["resultType"] != "complete" || len(ack) != 2 {
		t.Fatalf("second cancel: %v", ack)
	}
	done := f.call(aliceTasks, true, "jobs.long", nil).result(t)["taskId"].(string)
	f.until(aliceTasks, done, "completed")
	if ack := f.task(aliceTasks, "tasks/cancel", done).result(t); ack["resultType"] != "complete" {
		t.Fatalf("cancel of an ended task: %v", ack)
	}
	if st := f.task(aliceTasks, "tasks/get", done).result(t)["status"]; st != "completed" {
		t.Fatalf("cancel changed an ended task: %v", st)
	}
	// tasks/update: acknowledged, nothing outstanding to answer.
	if ack := f.task(aliceTasks, "tasks/update", done).result(t); ack["resultType"] != "complete" || len(ack) != 2 {
		t.Fatalf("update: %v", ack)
	}
}

func TestTaskMethodErrors(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	id := f.call(aliceTasks, true, "jobs.long", nil).result(t)["taskId"].(string)
	// Without the extension declared: -32021 before anything else.
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		rep := f.send(aliceTasks, Version20260728, rpc{method: m, id: 1, params: map[string]any{"taskId": id, "inputResponses": map[string]any{}}})
		if code := rep.errorCode(t); code != codeMissingCapability {
			t.Fatalf("%s without the extension: %s", m, rep.raw)
		}
	}
	// Removed and never-served methods are unknown.
	for _, m := range []string{"tasks/result", "tasks/list"} {
		if code := f.send(aliceTasks, Version20260728, rpc{method: m, id: 1, params: withTasks(map[string]any{})}).errorCode(t); code != codeMethodNotFound {
			t.Fatalf("%s: %d", m, code)
		}
	}
	// Older revisions do not have the methods.
	rep := f.send(aliceTasks, Version20251125, rpc{method: "tasks/get", id: 1, params: map[string]any{"taskId": id}})
	if code := rep.errorCode(t); code != codeMethodNotFound {
		t.Fatalf("2025-11-25 tasks/get: %s", rep.raw)
	}
	// Bad task IDs are invalid params.
	for _, bad := range []any{nil, 7, "", strings.Repeat("x", maxTaskIDBytes+1)} {
		params := withTasks(map[string]any{"taskId": bad})
		r := rpc{method: "tasks/get", id: 1, params: params}
		h := r.headers(Version20260728)
		h.Set("Mcp-Name", fmt.Sprint(bad))
		if s, ok := bad.(string); ok {
			h.Set("Mcp-Name", s)
		}
		rep := f.do(aliceTasks, http.MethodPost, h, r.encode(Version20260728))
		if rep.status == http.StatusOK {
			if code := rep.errorCode(t); code != codeInvalidParams {
				t.Fatalf("taskId %v: %s", bad, rep.raw)
			}
		} else if code := rep.errorCode(t); code != codeHeaderMismatch {
			t.Fatalf("taskId %v: %s", bad, rep.raw)
		}
	}
	// tasks/update needs inputResponses.
	r := rpc{method: "tasks/update", id: 1, params: withTasks(map[string]any{"taskId": id})}
	if code := f.send(aliceTasks, Version20260728, r).errorCode(t); code != codeInvalidParams {
		t.Fatalf("update without responses: %d", code)
	}
	// Mcp-Name must name the task.
	r = rpc{method: "tasks/get", id: 1, params: withTasks(map[string]any{"taskId": id})}
	h := r.headers(Version20260728)
	h.Set("Mcp-Name", "tk_another")
	if rep := f.do(aliceTasks, http.MethodPost, h, r.encode(Version20260728)); rep.status != http.StatusBadRequest || rep.errorCode(t) != codeHeaderMismatch {
		t.Fatalf("mismatched Mcp-Name: %s", rep.raw)
	}
	h.Del("Mcp-Name")
	if rep := f.do(aliceTasks, http.MethodPost, h, r.encode(Version20260728)); rep.status != http.StatusBadRequest || rep.errorCode(t) != codeHeaderMismatch {
		t.Fatalf("missing Mcp-Name: %s", rep.raw)
	}
}

func TestTaskBound(t *testing.T) {
	f := newTaskFixture(t, newJobs(), taskOptions(sqliteTasks(t)))
	for i := range 3 {
		if res := f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": fmt.Sprint(i)}).result(t); res["resultType"] != "task" {
			t.Fatalf("task %d: %v", i, res)
		}
		<-f.jobs.started
	}
	// Over the bound, a required one is told so; nothing runs.
	res := f.call(aliceTasks, true, "jobs.long", nil).result(t)
	if res["taskId"] != nil || res["isError"] != true || !strings.Contains(toolText(t, res), "3 unfinished tasks") {
		t.Fatalf("required over the bound: %v", res)
	}
	// An optional one runs while its caller waits.
	done := make(chan reply, 1)
	go func() { done <- f.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "waits"}) }()
	if got := <-f.jobs.started; got != "waits" {
		t.Fatalf("started %q", got)
	}
	f.jobs.release <- struct{}{}
	// Either the waiting call or a task took the release; free the rest.
	for range 3 {
		f.jobs.release <- struct{}{}
	}
	if res := (<-done).result(t); res["taskId"] != nil || res["resultType"] != "complete" {
		t.Fatalf("optional over the bound: %v", res)
	}
	// Another principal has a bound of its own.
	if res := f.call(bobTasks, true, "jobs.long", nil).result(t); res["resultType"] != "task" {
		t.Fatalf("bob: %v", res)
	}
}

func TestTasksOffRequired(t *testing.T) {
	f := newTaskFixture(t, newJobs(), nil)
	res := f.call(aliceTasks, true, "jobs.long", nil).result(t)
	if res["isError"] != true || !strings.Contains(toolText(t, res), "runs no tasks") {
		t.Fatalf("required with tasks off: %v", res)
	}
	if code := f.call(aliceTasks, false, "jobs.long", nil).errorCode(t); code != codeMissingCapability {
		t.Fatalf("required with tasks off, undeclared: %d", code)
	}
	// Optional ones run as plain calls.
	go func() { <-f.jobs.started; f.jobs.release <- struct{}{} }()
	if res := f.call(aliceTasks, true, "jobs.slow", nil).result(t); res["taskId"] != nil {
		t.Fatalf("optional with tasks off: %v", res)
	}
}

// TestTaskReplicas: two handlers on one PostgreSQL store, as two replicas:
// the task one creates the other answers at once, a cancel on the other
// stops the run where it runs, and a restarted replica still answers.
func TestTaskReplicas(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	open := func() *tasks.Store {
		s, err := tasks.OpenPostgres(context.Background(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a := newTaskFixture(t, newJobs(), taskOptions(open()))
	b := newTaskFixture(t, newJobs(), taskOptions(open()))
	id := a.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "a"}).result(t)["taskId"].(string)
	if st := b.task(aliceTasks, "tasks/get", id).result(t)["status"]; st != "working" {
		t.Fatalf("on b at once: %v", st)
	}
	<-a.jobs.started
	if code := b.task(bobTasks, "tasks/get", id).errorCode(t); code != codeInvalidParams {
		t.Fatalf("bob on b: %d", code)
	}
	b.task(aliceTasks, "tasks/cancel", id).result(t)
	deadline := time.Now().Add(5 * time.Second)
	for c, _ := a.jobs.counts(); c == 0; c, _ = a.jobs.counts() {
		if time.Now().After(deadline) {
			t.Fatal("a cancel on b did not stop the run on a")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := a.task(aliceTasks, "tasks/get", id).result(t)["status"]; st != "cancelled" {
		t.Fatalf("on a after the cancel: %v", st)
	}
	done := a.call(aliceTasks, true, "jobs.long", nil).result(t)["taskId"].(string)
	a.until(aliceTasks, done, "completed")
	// A third replica, started after: the finished task is there.
	c := newTaskFixture(t, newJobs(), taskOptions(open()))
	got := c.task(aliceTasks, "tasks/get", done).result(t)
	if got["status"] != "completed" || toolText(t, got["result"].(map[string]any)) != `{"hello":"alice"}` {
		t.Fatalf("on a new replica: %v", got)
	}
}

// TestStopTasks: a shutdown cancels what runs here and stores its end.
func TestStopTasks(t *testing.T) {
	j := newJobs()
	store := sqliteTasks(t)
	f := &fixture{t: t, logs: &mcptest.LogBuffer{}}
	f.h = New(jobsGate(t, j), Options{Version: "test", Logger: slogTo(f.logs), Tasks: taskOptions(store)})
	tf := &taskFixture{fixture: f, jobs: j, store: store}
	id := tf.call(aliceTasks, true, "jobs.slow", map[string]any{"label": "shutdown"}).result(t)["taskId"].(string)
	<-j.started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.h.StopTasks(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(context.Background(), tasks.Owner{TokenLabel: "tokens-0", UserID: "alice"}, id)
	if err != nil || got.Status != tasks.Failed || !strings.Contains(string(got.Outcome), "cancelled") {
		t.Fatalf("after shutdown: %+v %v", got, err)
	}
	// No task is made once stopped.
	res := tf.call(aliceTasks, true, "jobs.long", nil).result(t)
	if res["taskId"] != nil || res["isError"] != true {
		t.Fatalf("a task after the stop: %v", res)
	}
}

func TestTaskOutcome(t *testing.T) {
	for _, c := range []struct {
		body   string
		status tasks.Status
		has    string
	}{
		{`{"jsonrpc":"2.0","id":0,"result":{"content":[],"isError":false,"resultType":"complete"}}`, tasks.Completed, `"isError":false`},
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32003,"message":"forbidden","data":{"step":"ownership"}}}`, tasks.Failed, `"step":"ownership"`},
		{`{"jsonrpc":"2.0","id":0,"result":{"resultType":"input_required","inputRequests":{}}}`, tasks.Failed, "a task cannot end with"},
		{`not json`, tasks.Failed, "could not be read"},
		{`{"jsonrpc":"2.0","id":0,"result":[]}`, tasks.Failed, "could not be read"},
	} {
		o := taskOutcome("jobs.x", []byte(c.body))
		if o.Status != c.status || !strings.Contains(string(o.Payload), c.has) || strings.Contains(string(o.Payload), "resultType") {
			t.Errorf("%s: %+v %s", c.body, o, o.Payload)
		}
	}
}

// approvalHolder holds calls in a real approvals store, as the host's desk does.
type approvalHolder struct{ store *approvals.Store }

func (h approvalHolder) Hold(ctx context.Context, held dispatch.Held) (dispatch.Holding, error) {
	ap, err := h.store.Create(ctx, approvals.Request{TokenLabel: held.Principal.Token, Role: held.Principal.Role,
		Scope: string(held.Principal.Scope), UserID: held.Principal.UserID, Capability: held.Capability, Args: held.Args,
		Risk: held.Risk, TTL: time.Hour})
	if err != nil {
		return dispatch.Holding{}, err
	}
	return dispatch.Holding{ApprovalID: ap.ID, Result: json.RawMessage(`{"status":"pending_approval","approval_id":"` + ap.ID + `"}`)}, nil
}

// TestHeldCallTask: a call held for a human becomes a task that follows
// its approval request, read by whichever replica is asked.
func TestHeldCallTask(t *testing.T) {
	appr, err := approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { appr.Close() })
	j := newJobs()
	d := jobsGate(t, j)
	if err := d.SetPolicy(dispatch.Policy{Packs: map[string]bool{"jobs": true}, Roles: map[string][]string{"worker": {"jobs.run"}},
		Risk: dispatch.RiskPolicy{Capabilities: map[string]registry.Risk{"jobs.long": registry.RiskDangerous, "jobs.greet": registry.RiskDangerous}}}); err != nil {
		t.Fatal(err)
	}
	d.UseApprover(approvalHolder{appr})
	opts := taskOptions(sqliteTasks(t))
	opts.Approvals = appr
	f := &fixture{t: t, logs: &mcptest.LogBuffer{}}
	f.h = New(d, Options{Version: "test", Logger: slogTo(f.logs), Tasks: opts})
	tf := &taskFixture{fixture: f, jobs: j, store: opts.Store}

	// Without the extension, or for a tool without task support, the
	// pending result, as ever.
	for _, c := range []struct {
		declare bool
		name    string
	}{{false, "jobs.long"}, {true, "jobs.greet"}} {
		rep := tf.call(aliceTasks, c.declare, c.name, nil)
		if c.name == "jobs.long" {
			if code := rep.errorCode(t); code != codeMissingCapability {
				t.Fatalf("required, undeclared, held: %s", rep.raw)
			}
			continue
		}
		if res := rep.result(t); res["taskId"] != nil || !strings.Contains(toolText(t, res), "pending_approval") {
			t.Fatalf("%s: %s", c.name, rep.raw)
		}
	}
	decide := func(approve bool) string {
		created := tf.call(aliceTasks, true, "jobs.long", nil).result(t)
		id, _ := created["taskId"].(string)
		if created["resultType"] != "task" || created["status"] != "working" || !strings.Contains(created["statusMessage"].(string), "approval request ap_") {
			t.Fatalf("held call's task: %v", created)
		}
		stored, err := opts.Store.Get(context.Background(), tasks.Owner{TokenLabel: "tokens-0", UserID: "alice"}, id)
		if err != nil || stored.ApprovalID == "" {
			t.Fatalf("stored: %+v %v", stored, err)
		}
		if st := tf.task(aliceTasks, "tasks/get", id).result(t)["status"]; st != "working" {
			t.Fatalf("pending: %v", st)
		}
		if _, err := appr.Decide(context.Background(), stored.ApprovalID, approvals.Decision{Approve: approve, By: "tokens-5", ByUser: "carol", Reason: "looked at it"}); err != nil {
			t.Fatal(err)
		}
		if !approve {
			return id
		}
		if got := tf.task(aliceTasks, "tasks/get", id).result(t); got["status"] != "working" || got["statusMessage"] != approvedMessage {
			t.Fatalf("approved, not run: %v", got)
		}
		// The host's runner runs it and keeps the outcome.
		if _, ok, err := appr.Start(context.Background(), stored.ApprovalID); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		if _, err := appr.Finish(context.Background(), stored.ApprovalID, approvals.Outcome{Kind: approvals.OutcomeResult, Result: []byte(`{"hello":"alice"}`)}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := decide(true)
	got := tf.task(aliceTasks, "tasks/get", id).result(t)
	if got["status"] != "completed" || toolText(t, got["result"].(map[string]any)) != `{"hello":"alice"}` {
		t.Fatalf("approved and run: %v", got)
	}
	// Another principal still sees nothing.
	if code := tf.task(bobTasks, "tasks/get", id).errorCode(t); code != codeInvalidParams {
		t.Fatalf("bob: %d", code)
	}
	id = decide(false)
	got = tf.task(aliceTasks, "tasks/get", id).result(t)
	e, _ := got["error"].(map[string]any)
	if got["status"] != "failed" || e == nil || e["code"] != float64(codeForbidden) || !strings.Contains(e["message"].(string), "looked at it") {
		t.Fatalf("rejected: %v", got)
	}
}

func TestHeldOutcome(t *testing.T) {
	for _, c := range []struct {
		a      approvals.Approval
		ok     bool
		status tasks.Status
		has    string
	}{
		{approvals.Approval{Status: approvals.Pending}, false, "", ""},
		{approvals.Approval{Status: approvals.Approved}, false, "", ""},
		{approvals.Approval{Status: approvals.Running}, false, "", ""},
		{approvals.Approval{Status: approvals.Expired, Capability: "x.y"}, true, tasks.Failed, "in time"},
		{approvals.Approval{Status: approvals.Done, Outcome: approvals.Outcome{Kind: approvals.OutcomeToolError, Message: "taken"}}, true, tasks.Completed, `"isError":true`},
		{approvals.Approval{Status: approvals.Done, Outcome: approvals.Outcome{Kind: approvals.OutcomeRefused, Message: "refused at step ownership"}}, true, tasks.Failed, "-32003"},
		{approvals.Approval{Status: approvals.Done, Outcome: approvals.Outcome{Kind: approvals.OutcomeFailed, Message: "internal error (reference r1)"}}, true, tasks.Failed, "-32603"},
		{approvals.Approval{Status: approvals.Done, Outcome: approvals.Outcome{Kind: approvals.OutcomeResult, Result: []byte(`not json`)}}, true, tasks.Failed, "-32603"},
	} {
		o, ok := HeldOutcome(c.a)
		if ok != c.ok || o.Status != c.status || !strings.Contains(string(o.Payload), c.has) {
			t.Errorf("%+v: %+v %s %v", c.a.Status, o, o.Payload, ok)
		}
	}
}
