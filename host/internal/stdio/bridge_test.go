package stdio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/server"
)

// TestLegacySession runs a session at 2025-11-25, the handshake revision
// most stdio clients speak: every answer the client reads is the one
// capgate gives a Streamable HTTP client, byte for byte — the handshake,
// the tools the token may call, a result, a tool error, and a refusal
// naming the gate's step.
func TestLegacySession(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})

	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if got, want := s.roundTrip(init), c.post(t, userToken, "", init, nil); got != want {
		t.Fatalf("initialize through the bridge:\n got %s\nwant %s", got, want)
	}
	// A notification is accepted with nothing to write: the next line is
	// the answer to the next request.
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	for i, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		legacyCall(3, capEcho, `{"q":"aurora"}`),
		legacyCall(4, capFail, `{}`),
		legacyCall(5, capSecret, `{}`),
		`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"seven","method":"nope/nothing"}`,
	} {
		got := s.roundTrip(msg)
		if want := c.post(t, userToken, "2025-11-25", msg, nil); got != want {
			t.Errorf("message %d through the bridge:\n got %s\nwant %s", i, got, want)
		}
	}
	if v := s.b.negotiated.Load(); v == nil || *v != "2025-11-25" {
		t.Errorf("negotiated version %v, want 2025-11-25", v)
	}

	// What the client saw, in its terms.
	refusal := decodeError(t, c.post(t, userToken, "2025-11-25", legacyCall(5, capSecret, `{}`), nil))
	var data struct{ Step, Capability string }
	if json.Unmarshal(refusal.Error.Data, &data); refusal.Error.Code != -32003 || data.Step != "permission" || data.Capability != capSecret {
		t.Errorf("refusal = %d %s, want -32003 at step permission for %s", refusal.Error.Code, refusal.Error.Data, capSecret)
	}
	var toolErr struct {
		Result struct{ IsError bool } `json:"result"`
	}
	if json.Unmarshal([]byte(c.post(t, userToken, "2025-11-25", legacyCall(4, capFail, `{}`), nil)), &toolErr); !toolErr.Result.IsError {
		t.Errorf("demo.fail is not a tool error")
	}
}

// TestModernSession runs a session at 2026-07-28, where requests carry
// their version in _meta and capgate refuses any whose mirrored headers
// (Mcp-Method, Mcp-Name, Mcp-Param-*) are missing or differ from the body:
// every answer being capgate's own shows the bridge set them.
func TestModernSession(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	hdr := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	for _, tc := range []struct {
		name, msg string
		hdr       map[string]string
		wantError int
	}{
		{"discover", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + modernMeta + `}}`, hdr("server/discover", ""), 0},
		{"tools/list", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + modernMeta + `}}`, hdr("tools/list", ""), 0},
		{"call", modernCall(3, capEcho, `{"q":"zürich"}`), hdr("tools/call", capEcho), 0},
		{"refusal", modernCall(4, capSecret, `{}`), hdr("tools/call", capSecret), -32003},
		{"tool error", modernCall(5, capFail, `{}`), hdr("tools/call", capFail), 0},
		{"mirrored argument", modernCall(6, capRegion, `{"region":"eu-1","opts":{"limit":7}}`),
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": capRegion, "Mcp-Param-Region": "eu-1", "Mcp-Param-Limit": "7"}, 0},
		{"mirrored argument, encoded", modernCall(7, capRegion, `{"region":" zürich "}`),
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": capRegion, "Mcp-Param-Region": headerValue(" zürich ")}, 0},
		{"unknown version", `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2999-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil, -32022},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.roundTrip(tc.msg)
			ver := "2026-07-28"
			if tc.wantError == -32022 {
				ver = "2999-01-01"
			}
			if want := c.post(t, userToken, ver, tc.msg, tc.hdr); got != want {
				t.Fatalf("through the bridge:\n got %s\nwant %s", got, want)
			}
			var a struct {
				Error *struct{ Code int } `json:"error"`
			}
			json.Unmarshal([]byte(got), &a)
			switch {
			case tc.wantError == 0 && a.Error != nil:
				t.Errorf("got an error: %s", got)
			case tc.wantError != 0 && (a.Error == nil || a.Error.Code != tc.wantError):
				t.Errorf("want error %d, got %s", tc.wantError, got)
			}
		})
	}
}

// TestParamHeadersLearnt covers a client that calls a tool with
// x-mcp-header arguments before listing the tools through this bridge (it
// kept the list from an earlier run): capgate refuses the call with a
// HeaderMismatch, and the bridge lists the tools and sends the call again,
// as the transport advises, so the client sees only the result.
func TestParamHeadersLearnt(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	got := s.roundTrip(modernCall(1, capRegion, `{"region":"eu-1"}`))
	var a struct {
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if json.Unmarshal([]byte(got), &a) != nil || a.Result.StructuredContent["region"] != "eu-1" {
		t.Fatalf("call with a mirrored argument, tools not listed first: %s", got)
	}
	if n := strings.Count(c.logs.String(), "header mismatch"); n > 1 {
		t.Errorf("capgate refused %d calls for their headers, want at most the first", n)
	}
}

// TestBatch forwards a 2025-03-26 batch as one message and writes its
// answer as one line.
func TestBatch(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	batch := `[` + legacyCall(1, capEcho, `{"a":1}`) + `,{"jsonrpc":"2.0","method":"notifications/initialized"},` + legacyCall(2, capSecret, `{}`) + `]`
	if got, want := s.roundTrip(batch), c.post(t, userToken, "", batch, nil); got != want {
		t.Fatalf("batch through the bridge:\n got %s\nwant %s", got, want)
	}
}

// TestIDlessErrorGetsTheRequestsID: an error capgate sends before reading
// the body (here 413, a body over its http.max_body_bytes) has no id; the
// bridge gives it the request's, or the client would wait forever.
func TestIDlessErrorGetsTheRequestsID(t *testing.T) {
	c := startCapgate(t, func(o *server.Options) { o.MaxBodyBytes = 512 })
	s := bridge(t, Options{URL: c.url, Token: userToken})
	big := legacyCall(41, capEcho, fmt.Sprintf(`{"q":%q}`, strings.Repeat("x", 1024)))
	e := decodeError(t, s.roundTrip(big))
	if string(e.ID) != "41" || !strings.Contains(e.Error.Message, "too large") {
		t.Fatalf("a body over capgate's bound: %s %d %q, want capgate's error under id 41", e.ID, e.Error.Code, e.Error.Message)
	}
}

// TestTooLong answers a message over the bridge's bound without sending
// it, under the id its first bytes name, and goes on serving.
func TestTooLong(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken, MaxMessageBytes: 256})
	msg := s.roundTrip(`{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"demo.echo","arguments":{"q":"` + strings.Repeat("y", 4096) + `"}}}`)
	if m := bridgeProblem(t, msg, `"big-1"`, TooLarge); !strings.Contains(m, "256 bytes") {
		t.Errorf("message %q does not name the bound", m)
	}
	// A notification over the bound gets no answer; the next request does.
	s.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"pad":"` + strings.Repeat("z", 4096) + `"}}`)
	if got := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); !jsonEqual(got, `{"jsonrpc":"2.0","id":2,"result":{}}`) {
		t.Errorf("ping after the long lines: %s", got)
	}
	if strings.Contains(c.logs.String(), strings.Repeat("y", 100)) {
		t.Errorf("the long message reached capgate")
	}
}

// TestCancel: a notifications/cancelled naming a request under way ends
// its exchange, which ends the call inside capgate's provider; nothing is
// written for it, and the session goes on. At 2026-07-28, where the
// notification has no meaning over HTTP, closing the exchange is the
// cancellation.
func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(id int, args string) string
	}{
		{"2025-11-25", func(id int, args string) string { return legacyCall(id, capWait, args) }},
		{"2026-07-28", func(id int, args string) string { return modernCall(id, capWait, args) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCapgate(t, nil)
			s := bridge(t, Options{URL: c.url, Token: userToken})
			s.send(tc.call(7, `{"tag":"seven"}`))
			if tag := <-c.started; tag != "seven" {
				t.Fatalf("started %q", tag)
			}
			s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user stop"}}`)
			if tag := <-c.ended; tag != "seven" {
				t.Fatalf("ended %q", tag)
			}
			if got := s.roundTrip(legacyCall(8, capEcho, `{}`)); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":8,`) {
				t.Errorf("the line after a cancelled call is %s, want the next call's answer", got)
			}
			// At 2026-07-28 the bridge decides before it reads the next
			// line; before, the notification is posted beside the call.
			sent := c.posted(methodCancelled)
			for deadline := time.Now().Add(10 * time.Second); !sent && tc.name != "2026-07-28" && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				sent = c.posted(methodCancelled)
			}
			if want := tc.name != "2026-07-28"; sent != want {
				t.Errorf("notifications/cancelled posted to capgate: %v, want %v", sent, want)
			}
		})
	}
}

// TestPipelined sends many requests before reading any answer, among them
// calls that wait: each answer comes whole on its own line, under its own
// id, whatever the order.
func TestPipelined(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken, MaxInFlight: 4})
	s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	const n = 40
	for i := range n {
		s.send(legacyCall(100+i, capEcho, fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("p", 8<<10))))
	}
	var ids []int
	for range n {
		var a struct {
			ID     int `json:"id"`
			Result struct {
				StructuredContent struct {
					I int `json:"i"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		line := s.recv()
		if err := json.Unmarshal([]byte(line), &a); err != nil || a.ID != 100+a.Result.StructuredContent.I {
			t.Fatalf("answer %.200s: not whole, or under another id (%v)", line, err)
		}
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != 100+i {
			t.Fatalf("answered ids %v, want 100..%d once each", ids, 100+n-1)
		}
	}
}

// TestEndOfInput: when stdin ends, the requests already read are still
// answered, then Serve returns nil.
func TestEndOfInput(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	s.send(legacyCall(1, capEcho, `{"last":true}`))
	s.in.Close()
	if got := s.recv(); !strings.Contains(got, `\"last\":true`) {
		t.Errorf("answer after the end of input: %s", got)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve = %v, want nil at the end of input", err)
	}
	s.done <- nil // for the cleanup
}

// TestStop: when Serve's context ends (SIGINT, SIGTERM), calls under way
// are cancelled in capgate too and Serve returns nil.
func TestStop(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	s.send(legacyCall(1, capWait, `{"tag":"one"}`))
	<-c.started
	s.cancel()
	if tag := <-c.ended; tag != "one" {
		t.Fatalf("ended %q", tag)
	}
	if err := <-s.done; err != nil {
		t.Errorf("Serve = %v, want nil on stop", err)
	}
	s.done <- nil
}

// TestNoSecretsLogged: at debug, the bridge's log holds neither the token
// nor the messages' content.
func TestNoSecretsLogged(t *testing.T) {
	c := startCapgate(t, nil)
	s := bridge(t, Options{URL: c.url, Token: userToken})
	s.roundTrip(legacyCall(1, capEcho, `{"q":"very-private-words"}`))
	s.roundTrip(legacyCall(2, capSecret, `{}`))
	for _, secret := range []string{userToken, "very-private-words"} {
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, s.logs.String())
		}
	}
	if !strings.Contains(s.logs.String(), "method=tools/call") {
		t.Errorf("the debug log does not name the method:\n%s", s.logs.String())
	}
}

// failingWriter is a stdout whose reader has gone.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// TestStdoutFails: when the answers cannot be written (the client closed
// its end), Serve stops, cancelling what is under way, and says why.
func TestStdoutFails(t *testing.T) {
	c := startCapgate(t, nil)
	b, err := New(Options{URL: c.url, Token: userToken, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inW.Close()
	done := make(chan error, 1)
	go func() { done <- b.Serve(context.Background(), inR, failingWriter{}) }()
	io.WriteString(inW, legacyCall(1, capWait, `{"tag":"left"}`)+"\n")
	<-c.started
	io.WriteString(inW, legacyCall(2, capEcho, `{}`)+"\n")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "write stdout") {
		t.Fatalf("Serve = %v, want the write error", err)
	}
	if tag := <-c.ended; tag != "left" {
		t.Errorf("ended %q", tag)
	}
}
