package stdio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// The test capgate's tokens.
const (
	userToken  = "stdio-user-token"
	guestToken = "stdio-guest-token"
)

// Capabilities of the test platform, one for each outcome a client meets.
const (
	capEcho   = "demo.echo"   // returns its arguments
	capWait   = "demo.wait"   // runs until its call is cancelled
	capFail   = "demo.fail"   // a tool error (not found)
	capRegion = "demo.region" // returns its arguments; region mirrored into Mcp-Param-Region
	capSecret = "demo.secret" // refused at permission for every token
	capChatty = "demo.chatty" // reports progress 1 and 2 of 2 and logs at info before it answers
	capAsk    = "demo.ask"    // asks its caller's user for a name, and answers it
)

// platform is the provider behind the test capgate.
type platform struct {
	started chan string // a demo.wait call's "tag" argument, as it starts
	ended   chan string // and as its context ends
}

func (p *platform) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	switch r.Capability {
	case capChatty:
		if n := dispatch.NoticesOf(ctx); n != nil {
			for _, x := range []dispatch.Notice{
				{Progress: &dispatch.Progress{Progress: 1, Total: 2}},
				{Log: &dispatch.LogMessage{Level: dispatch.LogInfo, Data: json.RawMessage(`"halfway"`)}},
				{Progress: &dispatch.Progress{Progress: 2, Total: 2}},
			} {
				if n.Wants().Allows(x) {
					n.Notify(x)
				}
			}
		}
		return json.RawMessage(`{"done":true}`), nil
	case capWait:
		var a struct {
			Tag string `json:"tag"`
		}
		_ = json.Unmarshal(r.Args, &a)
		p.started <- a.Tag
		<-ctx.Done()
		p.ended <- a.Tag
		return nil, ctx.Err()
	case capFail:
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: "booking b-404 does not exist"}
	case capAsk:
		if r.Input == nil || !slices.Contains(r.Input.CanAsk, dispatch.AskElicit) {
			return nil, &dispatch.InputRequired{Missing: []string{"elicitation"}}
		}
		if a, ok := r.Input.Responses["name"]; ok {
			return json.RawMessage(`{"answer":` + string(a) + `}`), nil
		}
		return nil, &dispatch.InputRequired{Requests: []dispatch.InputRequest{{Key: "name", Method: dispatch.AskElicit,
			Params: json.RawMessage(`{"message":"Your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`)}}}
	}
	return r.Args, nil
}

// capgate is a capgate server (the real HTTP server, MCP adapter, gate
// and token store) over the test platform, on a loopback port.
type capgate struct {
	*platform
	srv  *httptest.Server
	url  string // its MCP endpoint
	logs *mcptest.LogBuffer

	mu      sync.Mutex
	methods []string
}

func startCapgate(t testing.TB, edit func(*server.Options)) *capgate {
	t.Helper()
	reg := registry.New([]string{"demo"})
	obj := json.RawMessage(`{"type":"object"}`)
	for _, c := range []registry.Capability{
		{Name: capEcho, Description: "Echo the arguments.", Kind: registry.Read, InputSchema: obj},
		{Name: capWait, Description: "Wait until cancelled.", Kind: registry.Read, InputSchema: obj},
		{Name: capFail, Description: "Fail as a tool.", Kind: registry.Read, InputSchema: obj},
		{Name: capRegion, Description: "Echo, in a region.", Kind: registry.Read,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"opts":{"type":"object","properties":{"limit":{"type":"integer","x-mcp-header":"Limit"}}}}}`)},
		{Name: capSecret, Description: "Never for you.", Kind: registry.Read, InputSchema: obj, Permission: "demo.secret"},
		{Name: capChatty, Description: "Report progress, then answer.", Kind: registry.Read, InputSchema: obj},
		{Name: capAsk, Description: "Ask the user's name.", Kind: registry.Read, InputSchema: obj},
	} {
		c.Pack, c.Plugin = "demo", "demo"
		if c.Permission == "" {
			c.Permission = "demo.run"
		}
		if err := reg.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	p := &platform{started: make(chan string, 16), ended: make(chan string, 16)}
	d, err := dispatch.New(reg, dispatch.Policy{
		Packs: map[string]bool{"demo": true},
		Roles: map[string][]string{"user": {"demo.run"}, "guest": {}},
	}, map[string]dispatch.Provider{"demo": p})
	if err != nil {
		t.Fatal(err)
	}
	logs := &mcptest.LogBuffer{}
	opts := server.Options{
		Enabled:    true,
		Version:    "9.9.9",
		Dispatcher: d,
		Auth: auth.New([]config.Token{
			{Index: 0, Label: "user", SHA256: sha256.Sum256([]byte(userToken)), Role: "user", Scope: dispatch.ScopeAction, UserID: "u-1"},
			{Index: 1, Label: "guest", SHA256: sha256.Sum256([]byte(guestToken)), Role: "guest", Scope: dispatch.ScopeRead},
		}),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&opts)
	}
	c := &capgate{platform: p, logs: logs}
	h := server.New(opts).Handler()
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each method posted, as capgate reads it from the body.
		body, _ := io.ReadAll(r.Body)
		if m := parse(body); m.method != "" {
			c.mu.Lock()
			c.methods = append(c.methods, m.method)
			c.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(c.srv.Close)
	c.url = c.srv.URL + server.MCPPath
	return c
}

// posted reports whether capgate was sent a message with method.
func (c *capgate) posted(method string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.methods, method)
}

// post sends one message straight to capgate, as a Streamable HTTP client
// would with the given version, and returns the body: what the bridge
// must hand the client unchanged.
func (c *capgate) post(t testing.TB, token, version, body string, hdr map[string]string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if version != "" {
		req.Header.Set("MCP-Protocol-Version", version)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// session is a bridge serving over pipes, and the client's end of them.
type session struct {
	t      testing.TB
	b      *Bridge
	in     *io.PipeWriter
	lines  chan string
	done   chan error // Serve's result
	cancel context.CancelFunc
	logs   *mcptest.LogBuffer
}

// bridge starts a bridge with opts (URL and Token filled from c and
// token when empty) serving until the test ends.
func bridge(t testing.TB, opts Options) *session {
	t.Helper()
	logs := &mcptest.LogBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{t: t, b: b, in: inW, lines: make(chan string, 64), done: make(chan error, 1), cancel: cancel, logs: logs}
	go func() {
		err := b.Serve(ctx, inR, outW)
		outW.Close()
		s.done <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Errorf("Serve did not return after the test")
		}
		if t.Failed() {
			t.Logf("bridge log:\n%s", logs.String())
		}
	})
	return s
}

// send writes one line to the bridge's stdin.
func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write to the bridge: %v", err)
	}
}

// recv is the next line the bridge writes; it fails the test when none
// comes within a minute (a hang, not a measurement).
func (s *session) recv() string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("the bridge closed stdout; log:\n%s", s.logs.String())
		}
		return l
	case <-time.After(time.Minute):
		s.t.Fatalf("no line from the bridge within a minute; log:\n%s", s.logs.String())
	}
	return ""
}

// roundTrip sends a message and returns the next line.
func (s *session) roundTrip(msg string) string {
	s.t.Helper()
	s.send(msg)
	return s.recv()
}

// rpcError is a JSON-RPC error response as the client reads it.
type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func decodeError(t testing.TB, line string) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal([]byte(line), &e); err != nil || e.Error == nil {
		t.Fatalf("want a JSON-RPC error, got %s", line)
	}
	return e
}

// bridgeProblem checks that line is the bridge's error for request id, of
// kind, and returns its message.
func bridgeProblem(t testing.TB, line, id string, kind Kind) string {
	t.Helper()
	e := decodeError(t, line)
	var data struct {
		Problem string `json:"problem"`
		URL     string `json:"url"`
	}
	_ = json.Unmarshal(e.Error.Data, &data)
	if string(e.ID) != id || e.Error.Code != CodeBridge || data.Problem != string(kind) || data.URL == "" {
		t.Fatalf("want the bridge's %s error for id %s, got %s", kind, id, line)
	}
	return e.Error.Message
}

// legacyCall is a tools/call at a version with the handshake.
func legacyCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// modernMeta is the _meta a 2026-07-28 request carries.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernCall is a tools/call at 2026-07-28.
func modernCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,%s}}`, id, tool, args, modernMeta)
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// syncBuffer is a writer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
