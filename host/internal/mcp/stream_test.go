package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// sseMessages reads an event stream body as this adapter writes it: every
// event is "message" with one data line holding one JSON-RPC message.
func sseMessages(t *testing.T, raw []byte) []map[string]any {
	t.Helper()
	var msgs []map[string]any
	for _, ev := range strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n") {
		lines := strings.Split(ev, "\n")
		if len(lines) != 2 || lines[0] != "event: message" || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("malformed event %q in\n%s", ev, raw)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &m); err != nil {
			t.Fatalf("event data is not JSON: %v: %q", err, lines[1])
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func chattyFixture(t *testing.T) *fixture {
	p := mcptest.New(mcptest.WithChatty())
	logs := &mcptest.LogBuffer{}
	return &fixture{t: t, platform: p, logs: logs, h: New(p.Dispatcher, Options{Version: "t", Logger: slogTo(logs)})}
}

func chattyCall(steps int, meta map[string]any) rpc {
	params := map[string]any{"name": mcptest.Chatty, "arguments": map[string]any{"steps": steps}}
	if meta != nil {
		params["_meta"] = meta
	}
	return rpc{method: "tools/call", id: 9, params: params}
}

// kinds summarises a stream: "p<progress>" for a progress notification,
// "l<level>" for a log message, "r" for the response.
func kinds(t *testing.T, msgs []map[string]any, token any) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		params, _ := m["params"].(map[string]any)
		switch m["method"] {
		case "notifications/progress":
			if params["progressToken"] != token {
				t.Fatalf("progress for token %v, want %v", params["progressToken"], token)
			}
			out = append(out, "p"+itoa(int(params["progress"].(float64))))
		case "notifications/message":
			out = append(out, "l"+params["level"].(string))
		case nil:
			if m["id"] != float64(9) || m["result"] == nil {
				t.Fatalf("response %v", m)
			}
			out = append(out, "r")
		default:
			t.Fatalf("unexpected message %v", m)
		}
	}
	return out
}

func TestToolsCallStreamsNotices(t *testing.T) {
	f := chattyFixture(t)
	for _, tc := range []struct {
		name string
		ver  string
		meta map[string]any
		want string // the stream, or "json" for a plain answer
	}{
		{"legacy, progress: logs from info by default", Version20250618, map[string]any{"progressToken": "tok"}, "linfo p1 p2 p3 lerror r"},
		{"legacy, no token: logs alone", Version20251125, nil, "linfo lerror r"},
		{"legacy, level from _meta", Version20250326, map[string]any{"progressToken": 5, metaLogLevel: "error"}, "p1 p2 p3 lerror r"},
		{"legacy, level debug", "", map[string]any{metaLogLevel: "debug"}, "ldebug linfo lerror r"},
		{"modern, progress, no level: no log", Version20260728, map[string]any{"progressToken": "tok"}, "p1 p2 p3 r"},
		{"modern, level warning", Version20260728, map[string]any{metaLogLevel: "warning"}, "lerror r"},
		{"modern, nothing asked: json", Version20260728, nil, "json"},
		{"modern, a token of another type is no token", Version20260728, map[string]any{"progressToken": map[string]any{}}, "json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.send(mcptest.Admin, tc.ver, chattyCall(3, tc.meta))
			ct := rep.header.Get("Content-Type")
			if tc.want == "json" {
				if ct != "application/json" || rep.result(t)["isError"] != false {
					t.Fatalf("answered %s %s", ct, rep.raw)
				}
				return
			}
			if ct != "text/event-stream" || rep.status != 200 {
				t.Fatalf("answered %d %s: %s", rep.status, ct, rep.raw)
			}
			var token any = "tok"
			if tc.meta != nil && tc.meta["progressToken"] == 5 {
				token = float64(5)
			}
			msgs := sseMessages(t, rep.raw)
			if got := strings.Join(kinds(t, msgs, token), " "); got != tc.want {
				t.Fatalf("stream = %s, want %s", got, tc.want)
			}
			for _, m := range msgs {
				if m["method"] == "notifications/progress" {
					ps := m["params"].(map[string]any)
					if ps["total"] != float64(3) || !strings.HasPrefix(ps["message"].(string), "step ") {
						t.Fatalf("progress %v", ps)
					}
				}
				if m["method"] == "notifications/message" && m["params"].(map[string]any)["level"] == "info" {
					ps := m["params"].(map[string]any)
					if ps["logger"] != "chatty" || ps["data"].(map[string]any)["step"] != "started" {
						t.Fatalf("log %v", ps)
					}
				}
			}
		})
	}
}

func TestToolsCallStreamRefusals(t *testing.T) {
	f := chattyFixture(t)
	// A bad level is the caller's error, at every revision.
	for _, ver := range allVersions {
		rep := f.send(mcptest.Admin, ver, chattyCall(1, map[string]any{metaLogLevel: "loud"}))
		if rep.errorCode(t) != codeInvalidParams || !contains(string(rep.raw), metaLogLevel) {
			t.Fatalf("%s: bad level answered %s", ver, rep.raw)
		}
	}
	// A refused call streams nothing: the guest may not run diag.
	rep := f.send(mcptest.Guest, Version20251125, chattyCall(3, map[string]any{"progressToken": "t"}))
	if rep.header.Get("Content-Type") != "application/json" || rep.errorCode(t) != codeForbidden {
		t.Fatalf("refused call answered %s", rep.raw)
	}
	// A batch answers in one JSON array: nothing streams inside it.
	body := `[` + string(chattyCall(3, map[string]any{"progressToken": "t"}).encode(Version20250326)) + `]`
	h := rpc{method: "tools/call"}.headers(Version20250326)
	rep = f.do(mcptest.Admin, http.MethodPost, h, []byte(body))
	if rep.header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(rep.raw), "[") {
		t.Fatalf("batch answered %s %s", rep.header.Get("Content-Type"), rep.raw)
	}
}

func TestLoggingSetLevel(t *testing.T) {
	f := newFixture(t, Options{})
	for _, ver := range []string{"", Version20250326, Version20250618, Version20251125} {
		rep := f.send(mcptest.Alice, ver, rpc{method: "logging/setLevel", id: 1, params: map[string]any{"level": "debug"}})
		if string(rep.raw) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Fatalf("%s: setLevel answered %s", ver, rep.raw)
		}
		for _, bad := range []map[string]any{{"level": "loud"}, {"level": 3}, {}} {
			rep := f.send(mcptest.Alice, ver, rpc{method: "logging/setLevel", id: 1, params: bad})
			if rep.errorCode(t) != codeInvalidParams {
				t.Fatalf("%s: setLevel %v answered %s", ver, bad, rep.raw)
			}
		}
		init := f.send(mcptest.Alice, ver, rpc{method: "initialize", id: 2, params: map[string]any{"protocolVersion": ver}})
		caps := init.result(t)["capabilities"].(map[string]any)
		if _, ok := caps["logging"]; !ok {
			t.Fatalf("%s: capabilities %v lack logging", ver, caps)
		}
	}
	// 2026-07-28 removed it: the level travels in each request's _meta.
	rep := f.send(mcptest.Alice, Version20260728, rpc{method: "logging/setLevel", id: 1, params: map[string]any{"level": "debug"}})
	if rep.status != http.StatusNotFound || rep.errorCode(t) != codeMethodNotFound {
		t.Fatalf("2026-07-28 setLevel answered %d %s", rep.status, rep.raw)
	}
}

// A client that leaves mid-stream cancels its call.
func TestStreamDisconnectCancelsTheCall(t *testing.T) {
	p := mcptest.New(mcptest.WithChatty())
	p.ChattyEnded = make(chan error, 1)
	p.ChattyRelease = make(chan struct{})
	h := New(p.Dispatcher, Options{Version: "t", Logger: slogTo(&mcptest.LogBuffer{})})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Serve(w, r, mcptest.Admin) }))
	defer srv.Close()
	m := rpc{method: "tools/call", id: 9, params: map[string]any{"name": mcptest.Chatty,
		"arguments": map[string]any{"steps": 1, "hold": true}, "_meta": map[string]any{"progressToken": "t"}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(string(m.encode(Version20251125))))
	req.Header = m.headers(Version20251125)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	// The notices arrive while the call still runs.
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	cancel()
	select {
	case err := <-p.ChattyEnded:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the call ended with %v, want cancelled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on after its client left")
	}
}

// A call that reports without end cannot make its client read without
// end: the stream stops taking notices at its bound, and the response
// still comes, last.
func TestStreamBounded(t *testing.T) {
	f := chattyFixture(t)
	rep := f.send(mcptest.Admin, Version20251125, chattyCall(3*maxStreamNotices, map[string]any{"progressToken": "tok"}))
	msgs := sseMessages(t, rep.raw)
	if len(msgs) > maxStreamNotices+1 {
		t.Fatalf("%d events, want at most %d notices and the response", len(msgs), maxStreamNotices)
	}
	got := kinds(t, msgs, "tok")
	if got[len(got)-1] != "r" {
		t.Fatalf("the last event is %s, not the response", got[len(got)-1])
	}
	last := 0.0
	for _, m := range msgs[:len(msgs)-1] {
		if m["method"] == "notifications/progress" {
			p := m["params"].(map[string]any)["progress"].(float64)
			if p <= last {
				t.Fatalf("progress went from %v to %v", last, p)
			}
			last = p
		}
	}
}
