package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// streamAskFixture is a handler over the test platform with diag.ask, its
// rounds sealed for ttl, asking older clients on the stream through relay,
// served over real HTTP: "Bearer alice" is Alice, "Bearer bob" Bob.
type streamAskFixture struct {
	t     *testing.T
	h     *Handler
	srv   *httptest.Server
	relay *answers.Relay
	logs  *mcptest.LogBuffer
}

func newStreamAskFixture(t *testing.T, ttl time.Duration, relay *answers.Relay, opts Options) *streamAskFixture {
	t.Helper()
	p := mcptest.New(mcptest.WithAsks())
	s := testSealer(t, ttl)
	p.Dispatcher.UseConfirmer(s)
	p.Dispatcher.UseApprover(&holder{})
	return newStreamFixture(t, p.Dispatcher, relay, opts)
}

// newStreamFixture serves d over real HTTP as newStreamAskFixture does.
func newStreamFixture(t *testing.T, d *dispatch.Dispatcher, relay *answers.Relay, opts Options) *streamAskFixture {
	t.Helper()
	var err error
	if relay == nil {
		if relay, err = answers.New(answers.Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = relay.Close() })
	}
	f := &streamAskFixture{t: t, relay: relay, logs: &mcptest.LogBuffer{}}
	opts.Version, opts.Logger, opts.Answers = "t", slogTo(f.logs), relay
	f.h = New(d, opts)
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer alice":
			f.h.Serve(w, r, mcptest.Alice)
		case "Bearer bob":
			f.h.Serve(w, r, mcptest.Bob)
		default:
			http.NotFound(w, r)
		}
	}))
	if opts.RequestTimeout > 0 {
		// As the host's server sets them: the connection's deadlines
		// follow the request timeout.
		f.srv.Config.ReadTimeout = opts.RequestTimeout
		f.srv.Config.WriteTimeout = opts.RequestTimeout + time.Second
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// post sends body as auth at ver and returns the response.
func (f *streamAskFixture) post(auth, ver string, body []byte) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header = rpc{}.headers(ver)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp
}

// stream is the event stream of one call, read as it comes.
type stream struct {
	t    *testing.T
	resp *http.Response
	msgs chan map[string]any
}

// call starts tools/call diag.ask with args as auth at ver and returns its
// stream.
func (f *streamAskFixture) call(auth, ver string, id any, args map[string]any) *stream {
	f.t.Helper()
	return f.start(auth, ver, rpc{method: "tools/call", id: id, params: map[string]any{"name": mcptest.Ask, "arguments": args}})
}

// start posts m as auth at ver and returns its stream.
func (f *streamAskFixture) start(auth, ver string, m rpc) *stream {
	f.t.Helper()
	resp := f.post(auth, ver, m.encode(ver))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		f.t.Fatalf("%s answered %d %s: %s; want an event stream", m.method, resp.StatusCode, ct, b)
	}
	s := &stream{t: f.t, resp: resp, msgs: make(chan map[string]any, 16)}
	f.t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(s.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				m = map[string]any{"unreadable": data}
			}
			s.msgs <- m
		}
	}()
	return s
}

// next is the stream's next message.
func (s *stream) next() map[string]any {
	s.t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			s.t.Fatal("the stream ended")
		}
		return m
	case <-time.After(10 * time.Second):
		s.t.Fatal("no event within 10s")
		return nil
	}
}

// request is the next message, which must be a request for method.
func (s *stream) request(method string) (id string, params map[string]any) {
	s.t.Helper()
	m := s.next()
	id, _ = m["id"].(string)
	if m["method"] != method || !answers.IsID(id) {
		s.t.Fatalf("got %v; want a %s request under a relay's id", m, method)
	}
	params, _ = m["params"].(map[string]any)
	return id, params
}

// result is the next message, which must be the response to the call.
func (s *stream) result() map[string]any {
	s.t.Helper()
	m := s.next()
	res, ok := m["result"].(map[string]any)
	if !ok || m["method"] != nil {
		s.t.Fatalf("got %v; want the call's response", m)
	}
	return res
}

// answer posts a response to id as auth at ver; it returns the status and
// body.
func (f *streamAskFixture) answer(auth, ver string, msg map[string]any) (int, string) {
	f.t.Helper()
	msg["jsonrpc"] = "2.0"
	b, _ := json.Marshal(msg)
	resp := f.post(auth, ver, b)
	defer resp.Body.Close()
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	return resp.StatusCode, body.String()
}

func (f *streamAskFixture) accept(auth, ver, id, name string) (int, string) {
	return f.answer(auth, ver, map[string]any{"id": id, "result": named(name)})
}

// toolError is a tool result's text, which must be an error.
func toolError(t *testing.T, res map[string]any) string {
	t.Helper()
	if isErr, _ := res["isError"].(bool); !isErr {
		t.Fatalf("not a tool error: %v", res)
	}
	return toolText(t, res)
}

// A call at a revision before 2026-07-28 asks its client on its stream,
// round after round; the answers come back in POSTs of their own, and the
// call ends with the last round's result as the stream's last event.
func TestAskOnStream(t *testing.T) {
	for _, ver := range []string{Version20251125, Version20250618} {
		t.Run(ver, func(t *testing.T) {
			f := newStreamAskFixture(t, time.Minute, nil, Options{})
			s := f.call("Bearer alice", ver, 7, map[string]any{"rounds": 2, "also": true})
			first, params := s.request("elicitation/create")
			if params["message"] != "Which name?" {
				t.Fatalf("elicitation params %v", params)
			}
			roots, _ := s.request("roots/list")
			// Only the caller's answer is taken: bob's is refused as one
			// nobody waits for, and the call still waits.
			if status, body := f.accept("Bearer bob", ver, first, "Mallory"); status != http.StatusBadRequest || !strings.Contains(body, "no call waits") {
				t.Fatalf("bob's answer: %d %s", status, body)
			}
			if status, body := f.accept("Bearer alice", ver, first, "Ada"); status != http.StatusAccepted || body != "" {
				t.Fatalf("alice's answer: %d %s", status, body)
			}
			if status, _ := f.answer("Bearer alice", ver, map[string]any{"id": roots, "result": map[string]any{"roots": []any{}}}); status != http.StatusAccepted {
				t.Fatalf("roots answer: %d", status)
			}
			// Taken once.
			if status, _ := f.accept("Bearer alice", ver, first, "Ada"); status != http.StatusBadRequest {
				t.Fatalf("a second answer: %d", status)
			}
			second, _ := s.request("elicitation/create")
			if second == first {
				t.Fatal("the second round's request has the first one's id")
			}
			if status, _ := f.accept("Bearer alice", ver, second, "Grace"); status != http.StatusAccepted {
				t.Fatalf("second answer: %d", status)
			}
			res := s.result()
			sc, _ := res["structuredContent"].(map[string]any)
			if names := fmt.Sprint(sc["names"]); names != "[Ada Grace]" || sc["round"] != 2.0 {
				t.Fatalf("result %v, want names [Ada Grace] after two rounds", res)
			}
			if n := f.relay.Waiting(); n != 0 {
				t.Fatalf("%d answers still awaited after the call", n)
			}
			if !strings.Contains(f.logs.String(), "asked the caller's client on the call's stream") {
				t.Fatalf("the ask was not logged:\n%s", f.logs)
			}
		})
	}
}

// A client that answers a request with an error does not do it: the next
// round is told it cannot ask it, and the plugin, which cannot go on
// without, fails saying so, and what the client said. Clients say it
// differently: method not found (the TypeScript SDK), the Go SDK's own
// codes, a user's refusal.
func TestAskOnStreamClientSaysNo(t *testing.T) {
	long := strings.Repeat("no ", 500)
	for _, e := range []struct {
		code int
		msg  string
	}{{-32601, "Method not found"}, {-32602, "client does not support elicitation"}, {-1, "User rejected: " + long}} {
		t.Run(fmt.Sprint(e.code), func(t *testing.T) {
			f := newStreamAskFixture(t, time.Minute, nil, Options{})
			s := f.call("Bearer alice", Version20250618, 1, map[string]any{})
			id, _ := s.request("elicitation/create")
			if status, _ := f.answer("Bearer alice", Version20250618, map[string]any{"id": id, "error": map[string]any{"code": e.code, "message": e.msg}}); status != http.StatusAccepted {
				t.Fatalf("error answer: %d", status)
			}
			text := toolError(t, s.result())
			want := fmt.Sprintf("needs the client to support elicitation, which this client does not do (it answered elicitation/create with error %d: %.20s", e.code, e.msg)
			if !strings.Contains(text, want) || len(text) > 600 {
				t.Fatalf("result %q; want %q, bounded", text, want)
			}
		})
	}
}

// 2025-03-26 has no elicitation: the call is not told it may elicit, asks
// nothing, and fails as one whose client cannot offer it.
func TestAskOnStreamRevisionWithoutElicitation(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	resp := f.post("Bearer alice", Version20250326, rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.Ask, "arguments": map[string]any{}}}.encode(Version20250326))
	defer resp.Body.Close()
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct == "text/event-stream" || !strings.Contains(body.String(), "which this client cannot offer over this protocol revision") {
		t.Fatalf("%s %s", ct, body)
	}
}

// Inside a 2025-03-26 batch nothing streams, so nothing is asked; a batch
// of answers is taken.
func TestAskOnStreamBatch(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	call := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + mcptest.Ask + `","arguments":{}}}]`
	resp := f.post("Bearer alice", Version20250326, []byte(call))
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), "cannot offer over this protocol revision") {
		t.Fatalf("a call in a batch: %s", body)
	}

	// A 2025-06-18 call waits; its answer comes in a 2025-03-26 batch (a
	// client may batch its responses there).
	s := f.call("Bearer alice", Version20250618, 2, map[string]any{})
	id, _ := s.request("elicitation/create")
	batch, _ := json.Marshal([]any{
		map[string]any{"jsonrpc": "2.0", "id": id, "result": named("Ada")},
		map[string]any{"jsonrpc": "2.0", "id": "not-ours", "result": map[string]any{}},
	})
	resp = f.post("Bearer alice", Version20250326, batch)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a batch of answers: %d", resp.StatusCode)
	}
	sc, _ := s.result()["structuredContent"].(map[string]any)
	if fmt.Sprint(sc["names"]) != "[Ada]" {
		t.Fatalf("structured %v", sc)
	}
}

// What comes as an answer is checked before it is taken; what answers no
// request of this server is accepted and dropped, as before.
func TestAnswerRefused(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	s := f.call("Bearer alice", Version20251125, 1, map[string]any{})
	id, _ := s.request("elicitation/create")
	for name, tc := range map[string]struct {
		msg    map[string]any
		status int
		says   string
	}{
		"not ours":         {map[string]any{"id": "42", "result": map[string]any{}}, http.StatusAccepted, ""},
		"number id":        {map[string]any{"id": 42, "result": map[string]any{}}, http.StatusAccepted, ""},
		"no such call":     {map[string]any{"id": "capgate-ask-aaaaaaaaaa-bbbbbbbbbb", "result": map[string]any{}}, http.StatusBadRequest, "no call waits"},
		"result not obj":   {map[string]any{"id": id, "result": []any{1}}, http.StatusBadRequest, "must be an object"},
		"both":             {map[string]any{"id": id, "result": map[string]any{}, "error": map[string]any{"code": 1, "message": "x"}}, http.StatusBadRequest, "not both"},
		"error no code":    {map[string]any{"id": id, "error": map[string]any{"message": "x"}}, http.StatusBadRequest, "integer code"},
		"error not object": {map[string]any{"id": id, "error": "x"}, http.StatusBadRequest, "integer code"},
		"too large":        {map[string]any{"id": id, "result": map[string]any{"x": strings.Repeat("a", answers.MaxAnswerBytes)}}, http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := f.answer("Bearer alice", Version20251125, tc.msg)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Fatalf("%d %s; want %d saying %q", status, body, tc.status, tc.says)
			}
		})
	}
	// 2026-07-28 has no server requests, hence no responses.
	if status, body := f.answer("Bearer alice", Version20260728, map[string]any{"id": id, "result": named("Ada")}); status != http.StatusBadRequest {
		t.Fatalf("a 2026-07-28 response: %d %s", status, body)
	}
	// None of those was taken: the call still waits for the answer.
	if status, _ := f.accept("Bearer alice", Version20251125, id, "Ada"); status != http.StatusAccepted {
		t.Fatalf("the answer: %d", status)
	}
	if sc, _ := s.result()["structuredContent"].(map[string]any); fmt.Sprint(sc["names"]) != "[Ada]" {
		t.Fatalf("structured %v", sc)
	}
}

// The client may cancel a call that waits for its answer: the call ends,
// and an answer after it is refused.
func TestAskOnStreamCancelled(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	s := f.call("Bearer alice", Version20251125, "c-1", map[string]any{})
	id, _ := s.request("elicitation/create")
	status, _ := f.answer("Bearer alice", Version20251125, map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": "c-1"}})
	if status != http.StatusAccepted {
		t.Fatalf("cancel: %d", status)
	}
	text := toolError(t, s.result())
	if !strings.Contains(text, "was cancelled") {
		t.Fatalf("result %q", text)
	}
	if status, _ := f.accept("Bearer alice", Version20251125, id, "Ada"); status != http.StatusBadRequest {
		t.Fatalf("an answer after the cancel: %d", status)
	}
}

// A client that leaves while its call waits ends it: nothing waits on.
func TestAskOnStreamClientGone(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	s := f.call("Bearer alice", Version20251125, 1, map[string]any{})
	s.request("elicitation/create")
	if f.relay.Waiting() != 1 {
		t.Fatalf("%d awaited", f.relay.Waiting())
	}
	s.resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for f.relay.Waiting() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call still waits for the answer of a client gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A call waits for its answers as long as its round's state lives, not
// longer; and past the request timeout, which the connection outlives.
func TestAskOnStreamWaits(t *testing.T) {
	t.Run("state lapses", func(t *testing.T) {
		f := newStreamAskFixture(t, answerMargin+2*time.Second, nil, Options{})
		s := f.call("Bearer alice", Version20251125, 1, map[string]any{})
		s.request("elicitation/create")
		text := toolError(t, s.result())
		if !strings.Contains(text, "its client did not answer elicitation/create within 2s") {
			t.Fatalf("result %q", text)
		}
	})
	t.Run("beyond the request timeout", func(t *testing.T) {
		const timeout = 500 * time.Millisecond
		f := newStreamAskFixture(t, time.Minute, nil, Options{RequestTimeout: timeout})
		s := f.call("Bearer alice", Version20251125, 1, map[string]any{"rounds": 2})
		id, _ := s.request("elicitation/create")
		time.Sleep(3 * timeout) // the user takes their time
		if status, _ := f.accept("Bearer alice", Version20251125, id, "Ada"); status != http.StatusAccepted {
			t.Fatalf("answer: %d", status)
		}
		id, _ = s.request("elicitation/create")
		time.Sleep(3 * timeout)
		if status, _ := f.accept("Bearer alice", Version20251125, id, "Grace"); status != http.StatusAccepted {
			t.Fatalf("answer: %d", status)
		}
		if sc, _ := s.result()["structuredContent"].(map[string]any); fmt.Sprint(sc["names"]) != "[Ada Grace]" {
			t.Fatalf("structured %v", sc)
		}
	})
}

// A plugin that asks without end is stopped at the bound.
func TestAskOnStreamRoundsBounded(t *testing.T) {
	f := newStreamAskFixture(t, time.Minute, nil, Options{})
	s := f.call("Bearer alice", Version20251125, 1, map[string]any{"rounds": maxStreamRounds + 2})
	for i := range maxStreamRounds {
		id, _ := s.request("elicitation/create")
		if status, _ := f.accept("Bearer alice", Version20251125, id, fmt.Sprint("n", i)); status != http.StatusAccepted {
			t.Fatalf("answer %d: %d", i, status)
		}
	}
	text := toolError(t, s.result())
	if !strings.Contains(text, fmt.Sprintf("asks at most %d rounds", maxStreamRounds)) {
		t.Fatalf("result %q", text)
	}
}

// Without a relay the adapter asks older clients nothing, as before.
func TestAskOnStreamNeedsARelay(t *testing.T) {
	f := askFixture(t)
	rep := f.askCall(mcptest.Alice, Version20251125, map[string]any{}, nil, nil)
	text, _ := rep.result(t)["content"].([]any)[0].(map[string]any)["text"].(string)
	if !strings.Contains(text, "cannot offer over this protocol revision") {
		t.Fatalf("%s", rep.raw)
	}
}

// The answer may reach another replica: it hands it over the shared NATS
// server to the replica whose call waits.
func TestAskOnStreamAcrossReplicas(t *testing.T) {
	url := eventstest.NATSURL(t)
	subject := fmt.Sprintf("capgate_test.answers.mcp%d", time.Now().UnixNano())
	relay := func() *answers.Relay {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		r, err := answers.New(answers.Options{Conn: nc, Subject: subject})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	a := newStreamAskFixture(t, time.Minute, relay(), Options{})
	b := newStreamAskFixture(t, time.Minute, relay(), Options{})
	s := a.call("Bearer alice", Version20250618, 1, map[string]any{})
	id, _ := s.request("elicitation/create")
	if status, body := b.accept("Bearer bob", Version20250618, id, "Mallory"); status != http.StatusBadRequest {
		t.Fatalf("bob's answer through the other replica: %d %s", status, body)
	}
	if status, body := b.accept("Bearer alice", Version20250618, id, "Ada"); status != http.StatusAccepted {
		t.Fatalf("alice's answer through the other replica: %d %s", status, body)
	}
	if sc, _ := s.result()["structuredContent"].(map[string]any); fmt.Sprint(sc["names"]) != "[Ada]" {
		t.Fatalf("structured %v", sc)
	}
}

// A prompt asks an older client on the stream of its prompts/get as a
// tools/call does, and renders with the answer, the stream's last event;
// one whose client does not elicit is -32602 saying so.
func TestPromptAsksOnStream(t *testing.T) {
	pf, pp := promptAskFixture(t)
	f := newStreamFixture(t, pf.h.d, nil, Options{})
	get := rpc{method: "prompts/get", id: 5, params: map[string]any{"name": askPrompt, "arguments": map[string]any{"topic": "the launch"}}}
	s := f.start("Bearer alice", Version20251125, get)
	id, params := s.request("elicitation/create")
	if params["message"] != "Which detail?" {
		t.Fatalf("params %v", params)
	}
	if status, _ := f.answer("Bearer alice", Version20251125, map[string]any{"id": id, "result": map[string]any{"action": "accept", "content": map[string]any{"detail": "cake"}}}); status != http.StatusAccepted {
		t.Fatalf("answer: %d", status)
	}
	msgs, _ := s.result()["messages"].([]any)
	if len(msgs) != 1 || !strings.Contains(fmt.Sprint(msgs[0]), "Plan the launch with") || !strings.Contains(fmt.Sprint(msgs[0]), "cake") {
		t.Fatalf("messages %v", msgs)
	}
	if n := pp.renders.Load(); n != 2 {
		t.Fatalf("%d renderings, want 2 (one a round)", n)
	}

	s = f.start("Bearer alice", Version20250618, get)
	id, _ = s.request("elicitation/create")
	if status, _ := f.answer("Bearer alice", Version20250618, map[string]any{"id": id, "error": map[string]any{"code": -32601, "message": "Method not found"}}); status != http.StatusAccepted {
		t.Fatalf("answer: %d", status)
	}
	m := s.next()
	e, _ := m["error"].(map[string]any)
	if msg, _ := e["message"].(string); e["code"] != float64(codeInvalidParams) || !strings.Contains(msg, "needs the client to support elicitation, which this client does not do (it answered elicitation/create with error -32601") {
		t.Fatalf("got %v", m)
	}
}
