package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/pgtest"
)

// askers is a provider whose calls ask their caller's client, as a
// plugin's do through the SDK: each round's answers come with the call,
// and what it gathered so far is its state, sealed by the gate.
//
//   - asks.one (optional) asks "name" each round (the same key every
//     round) until it has rounds names.
//   - asks.two (optional) asks "first" and "second" at once.
//   - asks.first (required) asks "name" at once, then answers.
//   - asks.later (required) works until released, then asks "name".
type askers struct {
	release chan struct{}
	mu      sync.Mutex
	runs    map[string]int // rounds run, by capability
}

func newAskers() *askers { return &askers{release: make(chan struct{}, 4), runs: map[string]int{}} }

func (a *askers) ran(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[name]
}

func (a *askers) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	a.mu.Lock()
	a.runs[r.Capability]++
	a.mu.Unlock()
	in := r.Input
	if in == nil {
		return nil, &dispatch.InputRequired{Missing: []string{"elicitation"}}
	}
	var args struct {
		Rounds int `json:"rounds"`
	}
	_ = json.Unmarshal(r.Args, &args)
	var names []string
	if len(in.State) > 0 {
		if err := json.Unmarshal(in.State, &names); err != nil {
			return nil, err
		}
	}
	name := func(key string) (string, bool) {
		var e struct {
			Action  string `json:"action"`
			Content struct {
				Name string `json:"name"`
			} `json:"content"`
		}
		raw, ok := in.Responses[key]
		if !ok || json.Unmarshal(raw, &e) != nil || e.Action != "accept" {
			return "", false
		}
		return e.Content.Name, true
	}
	form := json.RawMessage(`{"mode":"form","message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`)
	ask := func(keys ...string) error {
		state, _ := json.Marshal(names)
		ir := &dispatch.InputRequired{State: state}
		for _, k := range keys {
			ir.Requests = append(ir.Requests, dispatch.InputRequest{Key: k, Method: dispatch.AskElicit, Params: form})
		}
		return ir
	}
	done := func() (json.RawMessage, error) {
		return json.Marshal(map[string]any{"names": names, "round": in.Round})
	}
	switch r.Capability {
	case "asks.one", "asks.first":
		if n, ok := name("name"); ok {
			names = append(names, n)
		}
		if len(names) >= max(args.Rounds, 1) {
			return done()
		}
		return nil, ask("name")
	case "asks.two":
		first, ok1 := name("first")
		second, ok2 := name("second")
		if !ok1 || !ok2 {
			return nil, ask("first", "second")
		}
		names = []string{first, second}
		return done()
	case "asks.later":
		if n, ok := name("name"); ok {
			names = append(names, n)
			return done()
		}
		select {
		case <-a.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return nil, ask("name")
	}
	return nil, fmt.Errorf("no such call %s", r.Capability)
}

type askTaskFixture struct {
	*fixture
	askers *askers
	store  *tasks.Store
	gate   *dispatch.Dispatcher
}

// askPolicy is the askers' policy: workers may call them all.
func askPolicy() dispatch.Policy {
	return dispatch.Policy{Packs: map[string]bool{"asks": true}, Roles: map[string][]string{"worker": {"jobs.run"}}}
}

var askTaskCaps = map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{ExtTasks: map[string]any{}}}

// newAskTaskFixture is a handler over the askers with tasks on in store,
// every round sealed by the host's confirmer over an approvals store
// (shared when the approvals are, as replicas share them).
func newAskTaskFixture(t testing.TB, a *askers, store *tasks.Store, ap *approvals.Store) *askTaskFixture {
	t.Helper()
	reg := registry.New([]string{"asks"})
	schema := json.RawMessage(`{"type":"object","properties":{"rounds":{"type":"integer","minimum":1,"maximum":5}},"additionalProperties":false}`)
	for name, support := range map[string]registry.TaskSupport{
		"asks.one": registry.TaskOptional, "asks.two": registry.TaskOptional,
		"asks.first": registry.TaskRequired, "asks.later": registry.TaskRequired,
	} {
		if err := reg.Add(registry.Capability{Name: name, Kind: registry.Read, Pack: "asks", Permission: "jobs.run", Plugin: "asks",
			InputSchema: schema, TaskSupport: support}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := dispatch.New(reg, askPolicy(), map[string]dispatch.Provider{"asks": a})
	if err != nil {
		t.Fatal(err)
	}
	if ap == nil {
		ap, err = approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ap.Close() })
	}
	sealer, err := confirm.New([]byte(strings.Repeat("k", 32)), time.Minute, ap)
	if err != nil {
		t.Fatal(err)
	}
	d.UseConfirmer(sealer)
	f := &fixture{t: t, logs: &mcptest.LogBuffer{}}
	f.h = New(d, Options{Version: "test", Logger: slogTo(f.logs), Tasks: taskOptions(store)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.h.StopTasks(ctx); err != nil {
			t.Error(err)
		}
	})
	return &askTaskFixture{fixture: f, askers: a, store: store, gate: d}
}

// call is a tools/call from a client that declares the extension and
// form elicitation, with extra params (a retry's answers and state).
func (f *askTaskFixture) call(p dispatch.Principal, name string, args map[string]any, extra map[string]any) reply {
	f.t.Helper()
	params := map[string]any{"name": name, "arguments": args, "_meta": map[string]any{metaClientCapabilities: askTaskCaps}}
	for k, v := range extra {
		params[k] = v
	}
	return f.send(p, Version20260728, rpc{method: "tools/call", id: 1, params: params})
}

func (f *askTaskFixture) get(p dispatch.Principal, id string) reply {
	f.t.Helper()
	return f.send(p, Version20260728, rpc{method: "tasks/get", id: 2, params: map[string]any{"taskId": id,
		"_meta": map[string]any{metaClientCapabilities: askTaskCaps}}})
}

func (f *askTaskFixture) update(p dispatch.Principal, id string, answers any) reply {
	f.t.Helper()
	return f.send(p, Version20260728, rpc{method: "tasks/update", id: 3, params: map[string]any{"taskId": id, "inputResponses": answers,
		"_meta": map[string]any{metaClientCapabilities: askTaskCaps}}})
}

// until polls tasks/get until the task is want (or ended otherwise).
func (f *askTaskFixture) until(p dispatch.Principal, id, want string) map[string]any {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := f.get(p, id).result(f.t)
		if res["status"] == want {
			return res
		}
		if time.Now().After(deadline) || (res["status"] != "working" && res["status"] != "input_required") {
			f.t.Fatalf("task %s is %v, not %s: %v", id, res["status"], want, res)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requestsOf is the inputRequests of a tasks/get answer.
func requestsOf(t *testing.T, res map[string]any) map[string]any {
	t.Helper()
	reqs, _ := res["inputRequests"].(map[string]any)
	if res["status"] != "input_required" || reqs == nil {
		t.Fatalf("not waiting with requests: %v", res)
	}
	for id, r := range reqs {
		q, _ := r.(map[string]any)
		if q["method"] != dispatch.AskElicit || !strings.Contains(jsonOf(q["params"]), `"requestedSchema"`) {
			t.Fatalf("request %s: %v", id, r)
		}
	}
	return reqs
}

func namesOf(t *testing.T, res map[string]any) string {
	t.Helper()
	r, _ := res["result"].(map[string]any)
	sc, _ := r["structuredContent"].(map[string]any)
	names, _ := sc["names"].([]any)
	if r == nil || r["isError"] != false || names == nil {
		t.Fatalf("not a result with names: %v", res)
	}
	var out []string
	for _, n := range names {
		out = append(out, fmt.Sprint(n))
	}
	return strings.Join(out, ",")
}

// TestTaskAsks: a task whose call asks parks in input_required with its
// request under an ID of the server's; tasks/get shows it; the client's
// answer through tasks/update is acknowledged with the empty ack and
// resumes the call, which asks again (a new ID for the same key), and
// then completes with every answer.
func TestTaskAsks(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	rep := f.call(aliceTasks, "asks.one", map[string]any{"rounds": 2}, nil)
	created := rep.result(t)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["inputRequests"] != nil || created["requestState"] != nil {
		t.Fatalf("not a task: %s", rep.raw)
	}
	res := f.until(aliceTasks, id, "input_required")
	reqs := requestsOf(t, res)
	if len(reqs) != 1 || reqs["r1-name"] == nil || res["requestState"] != nil || res["result"] != nil ||
		!strings.Contains(fmt.Sprint(res["statusMessage"]), "waiting for the client") {
		t.Fatalf("round 1: %v", res)
	}
	// Polling again shows the same request.
	if again := requestsOf(t, f.get(aliceTasks, id).result(t)); again["r1-name"] == nil || len(again) != 1 {
		t.Fatalf("second poll: %v", again)
	}
	// An answer under a key that is not outstanding is acknowledged and
	// ignored: the call's own key, an unknown one.
	for _, a := range []map[string]any{{"name": named("Key")}, {"unknown-key": map[string]any{"ignored": true}}} {
		ack := f.update(aliceTasks, id, a).result(t)
		if ack["resultType"] != "complete" || len(ack) != 2 {
			t.Fatalf("ack %v", ack)
		}
	}
	if got := f.get(aliceTasks, id).result(t); got["status"] != "input_required" || f.askers.ran("asks.one") != 1 {
		t.Fatalf("an answer not outstanding resumed it: %v", got)
	}
	rep = f.update(aliceTasks, id, map[string]any{"r1-name": named("Ada")})
	if ack := rep.result(t); ack["resultType"] != "complete" || len(ack) != 2 {
		t.Fatalf("update ack: %s", rep.raw)
	}
	// Round 2 asks under the same key: a new ID.
	reqs = requestsOf(t, f.until(aliceTasks, id, "input_required"))
	for reqs["r2-name"] == nil {
		reqs = requestsOf(t, f.until(aliceTasks, id, "input_required"))
	}
	if len(reqs) != 1 {
		t.Fatalf("round 2: %v", reqs)
	}
	// The old ID answers nothing now.
	f.update(aliceTasks, id, map[string]any{"r1-name": named("Old")})
	if got := f.get(aliceTasks, id).result(t); got["status"] != "input_required" {
		t.Fatalf("round 1's ID resumed round 2: %v", got)
	}
	f.update(aliceTasks, id, map[string]any{"r2-name": named("Grace")})
	done := f.until(aliceTasks, id, "completed")
	if got := namesOf(t, done); got != "Ada,Grace" || done["inputRequests"] != nil {
		t.Fatalf("completed: %v", done)
	}
	if n := f.askers.ran("asks.one"); n != 3 {
		t.Fatalf("the call ran %d rounds, want 3", n)
	}
	// Updates after the end are acknowledged, and change nothing.
	if ack := f.update(aliceTasks, id, map[string]any{"r2-name": named("Late")}).result(t); ack["resultType"] != "complete" {
		t.Fatalf("late ack: %v", ack)
	}
	if n := f.askers.ran("asks.one"); n != 3 {
		t.Fatalf("a late update ran the call: %d", n)
	}
}

// TestTaskAsksTwo: two requests at once, answered one at a time: the
// task waits until both are answered, showing only the one still to be.
func TestTaskAsksTwo(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	id := f.call(aliceTasks, "asks.two", nil, nil).result(t)["taskId"].(string)
	reqs := requestsOf(t, f.until(aliceTasks, id, "input_required"))
	if len(reqs) != 2 || reqs["r1-first"] == nil || reqs["r1-second"] == nil {
		t.Fatalf("requests %v", keysOf(reqs))
	}
	if ack := f.update(aliceTasks, id, map[string]any{"r1-first": named("Ann")}).result(t); ack["resultType"] != "complete" {
		t.Fatalf("partial ack %v", ack)
	}
	res := f.get(aliceTasks, id).result(t)
	if reqs := requestsOf(t, res); len(reqs) != 1 || reqs["r1-second"] == nil {
		t.Fatalf("after a partial update: %v", res)
	}
	if f.askers.ran("asks.two") != 1 {
		t.Fatal("a partial answer resumed the call")
	}
	f.update(aliceTasks, id, map[string]any{"r1-second": named("Bo")})
	if got := namesOf(t, f.until(aliceTasks, id, "completed")); got != "Ann,Bo" {
		t.Fatalf("names %s", got)
	}
}

// TestTaskAsksOwnerOnly: another principal learns nothing of a waiting
// task and cannot answer it: the same not-found answer as for no task.
func TestTaskAsksOwnerOnly(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	id := f.call(aliceTasks, "asks.one", nil, nil).result(t)["taskId"].(string)
	f.until(aliceTasks, id, "input_required")
	missing := f.get(aliceTasks, "tk_nosuchtask").errorObj(t)["message"]
	for _, p := range []dispatch.Principal{aliceOther, bobTasks} {
		for _, rep := range []reply{f.get(p, id), f.update(p, id, map[string]any{"r1-name": named("Eve")})} {
			e := rep.errorObj(t)
			if e["code"] != float64(codeInvalidParams) || strings.Replace(e["message"].(string), id, "tk_nosuchtask", 1) != missing {
				t.Fatalf("%s: %s", p.Token, rep.raw)
			}
		}
	}
	if got := f.get(aliceTasks, id).result(t); got["status"] != "input_required" || f.askers.ran("asks.one") != 1 {
		t.Fatalf("another's answer changed it: %v", got)
	}
}

// TestTaskAsksCancel: a waiting task is cancelled like any, and an answer
// after that resumes nothing.
func TestTaskAsksCancel(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	id := f.call(aliceTasks, "asks.one", nil, nil).result(t)["taskId"].(string)
	f.until(aliceTasks, id, "input_required")
	if ack := f.send(aliceTasks, Version20260728, rpc{method: "tasks/cancel", id: 4, params: withTasks(map[string]any{"taskId": id})}).result(t); ack["resultType"] != "complete" {
		t.Fatalf("cancel ack %v", ack)
	}
	f.update(aliceTasks, id, map[string]any{"r1-name": named("Ada")})
	got := f.get(aliceTasks, id).result(t)
	if got["status"] != "cancelled" || got["inputRequests"] != nil || f.askers.ran("asks.one") != 1 {
		t.Fatalf("after cancel and an answer: %v", got)
	}
}

// TestTaskUpdateErrors: tasks/update's answers are read as a tools/call's:
// an object of objects, bounded in number; a bad one is invalid params
// and keeps nothing.
func TestTaskUpdateErrors(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	id := f.call(aliceTasks, "asks.two", nil, nil).result(t)["taskId"].(string)
	f.until(aliceTasks, id, "input_required")
	many := map[string]any{}
	for i := range dispatch.MaxInputResponses + 1 {
		many[fmt.Sprintf("k%d", i)] = map[string]any{}
	}
	for name, answers := range map[string]any{
		"not an object":        []any{named("x")},
		"an answer not object": map[string]any{"r1-first": "accept"},
		"too many":             many,
	} {
		if code := f.update(aliceTasks, id, answers).errorCode(t); code != codeInvalidParams {
			t.Errorf("%s: %d", name, code)
		}
	}
	// A key that could not be this server's is skipped, whatever it holds.
	if ack := f.update(aliceTasks, id, map[string]any{"not a key!": 7}).result(t); ack["resultType"] != "complete" {
		t.Fatalf("odd key: %v", ack)
	}
	// Over the store's bound for one answer: invalid params, nothing kept.
	huge := map[string]any{"r1-first": map[string]any{"action": "accept", "content": map[string]any{"name": strings.Repeat("a", tasks.MaxAnswerBytes)}}}
	body := rpc{method: "tasks/update", id: 3, params: map[string]any{"taskId": id, "inputResponses": huge,
		"_meta": map[string]any{metaClientCapabilities: askTaskCaps}}}
	f.h.maxBody = 4 << 20
	if code := f.send(aliceTasks, Version20260728, body).errorCode(t); code != codeInvalidParams {
		t.Fatalf("huge answer: %d", code)
	}
	if reqs := requestsOf(t, f.get(aliceTasks, id).result(t)); len(reqs) != 2 {
		t.Fatalf("a refused update kept something: %v", reqs)
	}
}

// TestTaskAsksFirst: a call that runs only as a task and asks at once asks
// on the call itself — input_required with its state, no task — and its
// retry with the answer is the task, which ends with that answer. One that
// asks after working a while parks its task instead.
func TestTaskAsksFirst(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	reqs, state := inputRequired(t, f.call(aliceTasks, "asks.first", nil, nil))
	if reqs["name"] == nil {
		t.Fatalf("round 1: %v", reqs)
	}
	rep := f.call(aliceTasks, "asks.first", nil, map[string]any{"requestState": state, "inputResponses": map[string]any{"name": named("Alice")}})
	created := rep.result(t)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" || created["requestState"] != nil || created["inputRequests"] != nil {
		t.Fatalf("round 2: %s", rep.raw)
	}
	if got := namesOf(t, f.until(aliceTasks, id, "completed")); got != "Alice" {
		t.Fatalf("names %s", got)
	}

	// Later: the task is answered first, and its question parks it.
	rep = f.call(aliceTasks, "asks.later", nil, nil)
	later, _ := rep.result(t)["taskId"].(string)
	if later == "" || rep.result(t)["resultType"] != "task" {
		t.Fatalf("asks.later: %s", rep.raw)
	}
	f.askers.release <- struct{}{}
	reqs = requestsOf(t, f.until(aliceTasks, later, "input_required"))
	f.update(aliceTasks, later, map[string]any{"r1-name": named("Bea")})
	if got := namesOf(t, f.until(aliceTasks, later, "completed")); got != "Bea" {
		t.Fatalf("names %s", got)
	}
}

// TestTaskAsksReplicas: on two handlers sharing one PostgreSQL task store
// (and approvals, which keep the used states), a task parked by one is
// answered through the other, which resumes the call; racing last
// answers through both resume it once.
func TestTaskAsksReplicas(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	ctx := context.Background()
	openTasks := func() *tasks.Store {
		s, err := tasks.OpenPostgres(ctx, dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ap, err := approvals.OpenPostgres(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ap.Close() })
	a := newAskers()
	one := newAskTaskFixture(t, a, openTasks(), ap)
	two := newAskTaskFixture(t, a, openTasks(), ap)
	for i := range 5 {
		id := one.call(aliceTasks, "asks.two", nil, nil).result(t)["taskId"].(string)
		two.until(aliceTasks, id, "input_required")
		before := a.ran("asks.two")
		var wg sync.WaitGroup
		for _, f := range []*askTaskFixture{one, two, one, two} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep := f.update(aliceTasks, id, map[string]any{"r1-first": named("A"), "r1-second": named(fmt.Sprint(i))})
				if rep.status != http.StatusOK || rep.result(t)["resultType"] != "complete" {
					t.Errorf("update: %s", rep.raw)
				}
			}()
		}
		wg.Wait()
		if got := namesOf(t, one.until(aliceTasks, id, "completed")); got != "A,"+fmt.Sprint(i) {
			t.Fatalf("names %s", got)
		}
		time.Sleep(50 * time.Millisecond)
		if n := a.ran("asks.two") - before; n != 1 {
			t.Fatalf("round %d: the call resumed %d times", i, n)
		}
	}
}

func TestAskedOf(t *testing.T) {
	reqs, state, ok := askedOf([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":` +
		`{"b":{"method":"elicitation/create","params":{"x":1}},"a":{"method":"roots/list","params":{}}},"requestState":"s1"}}`))
	if !ok || state != "s1" || len(reqs) != 2 || reqs[0].Key != "b" || reqs[1].Method != "roots/list" || string(reqs[0].Params) != `{"x":1}` {
		t.Fatalf("%+v %q %v", reqs, state, ok)
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":[1]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{"a":7}}}`,
		`not json`,
	} {
		if _, _, ok := askedOf([]byte(body)); ok {
			t.Errorf("%s read as a question", body)
		}
	}
}

// TestTaskAsksGateDecidesAgain: a resumed call passes the whole gate
// again, under the policy of the moment: one whose permission went while
// its task waited is refused, and the task fails with the refusal; one
// that now needs its user's yes puts the gate's question to the client
// the same way, through the waiting task.
func TestTaskAsksGateDecidesAgain(t *testing.T) {
	f := newAskTaskFixture(t, newAskers(), sqliteTasks(t), nil)
	revoked := f.call(aliceTasks, "asks.one", nil, nil).result(t)["taskId"].(string)
	confirmed := f.call(aliceTasks, "asks.two", nil, nil).result(t)["taskId"].(string)
	f.until(aliceTasks, revoked, "input_required")
	f.until(aliceTasks, confirmed, "input_required")

	pol := askPolicy()
	pol.Roles = map[string][]string{"worker": {}}
	if err := f.gate.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	f.update(aliceTasks, revoked, map[string]any{"r1-name": named("Ada")})
	failed := f.until(aliceTasks, revoked, "failed")
	e, _ := failed["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if e["code"] != float64(codeForbidden) || data["step"] != string(dispatch.StepPermission) || f.askers.ran("asks.one") != 1 {
		t.Fatalf("resumed without the permission: %v", failed)
	}

	pol = askPolicy()
	pol.Risk = dispatch.RiskPolicy{Capabilities: map[string]registry.Risk{"asks.two": registry.RiskReviewRequired}}
	if err := f.gate.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	f.update(aliceTasks, confirmed, map[string]any{"r1-first": named("Ann"), "r1-second": named("Bo")})
	var reqs map[string]any
	for deadline := time.Now().Add(10 * time.Second); reqs["r2-"+confirmInput] == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no confirmation asked: %v", reqs)
		}
		reqs = requestsOf(t, f.until(aliceTasks, confirmed, "input_required"))
	}
	if len(reqs) != 1 || f.askers.ran("asks.two") != 1 {
		t.Fatalf("the gate's question: %v, %d runs", reqs, f.askers.ran("asks.two"))
	}
	// The user's yes runs the call.
	f.update(aliceTasks, confirmed, map[string]any{"r2-" + confirmInput: map[string]any{"action": "accept"}})
	for deadline := time.Now().Add(10 * time.Second); f.askers.ran("asks.two") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the yes did not run the call: %v", f.get(aliceTasks, confirmed).result(t))
		}
	}
}
