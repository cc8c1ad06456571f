package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// Bearer tokens of the test principals.
const (
	aliceToken = "alice-token-0123456789"
	adminToken = "admin-token-0123456789"
)

func newStore(t testing.TB) *auth.Store {
	t.Helper()
	tok := func(i int, secret string, p dispatch.Principal) config.Token {
		return config.Token{Index: i, SHA256: sha256.Sum256([]byte(secret)), Role: p.Role, Scope: p.Scope, UserID: p.UserID}
	}
	return auth.New([]config.Token{tok(0, aliceToken, mcptest.Alice), tok(1, adminToken, mcptest.Admin)})
}

type fixture struct {
	platform *mcptest.Platform
	srv      *Server
	logs     *mcptest.LogBuffer
}

// newFixture builds a server over the test platform; edit adjusts options.
func newFixture(t testing.TB, edit func(*Options)) *fixture {
	t.Helper()
	f := &fixture{platform: mcptest.New(), logs: &mcptest.LogBuffer{}}
	opts := Options{
		Enabled:    true,
		Addr:       "127.0.0.1:0",
		Version:    "9.9.9",
		Dispatcher: f.platform.Dispatcher,
		Auth:       newStore(t),
		Logger:     slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if edit != nil {
		edit(&opts)
	}
	f.srv = New(opts)
	return f
}

// serve runs the server on a loopback listener until the test ends.
func (f *fixture) serve(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func mcpRequest(t testing.TB, method, url, token, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if token != "" {
		r.Header.Set("Authorization", token)
	}
	return r
}

func callBody(tool string, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

// dump renders a response as bytes on the wire, minus the Date header,
// which differs between any two responses.
func dump(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	resp.Header.Del("Date")
	b, err := httputil.DumpResponse(resp, true)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHiddenEndpointIsIndistinguishable: without a valid token, or with the
// server disabled, every request to the endpoint gets the very bytes an
// unknown path gets, whatever its method.
func TestHiddenEndpointIsIndistinguishable(t *testing.T) {
	methods := []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodHead, http.MethodOptions, http.MethodPatch, "PROPFIND", "FOO"}
	cases := []struct {
		name    string
		enabled bool
		authz   string
	}{
		{"no token", true, ""},
		{"empty bearer", true, "Bearer "},
		{"basic scheme", true, "Basic YWxpY2U6cHc="},
		{"malformed", true, "Bearer not a token"},
		{"too short", true, "Bearer abc"},
		{"unknown token", true, "Bearer unknown-token-0123456789"},
		{"switched off, valid token", false, "Bearer " + aliceToken},
	}
	// The request log answers errors itself at debug level, so both paths
	// through it are compared.
	levels := []slog.Level{slog.LevelDebug, slog.LevelInfo}
	for _, tc := range cases {
		for _, level := range levels {
			f := newFixture(t, func(o *Options) {
				o.Enabled = tc.enabled
				o.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: level}))
			})
			base := f.serve(t)
			for _, m := range methods {
				t.Run(tc.name+"/"+level.String()+"/"+m, func(t *testing.T) {
					get := func(path string) []byte {
						req := mcpRequest(t, m, base+path, tc.authz, callBody(mcptest.Search, `{"query":"x"}`))
						req.Header.Set("Origin", "https://evil.example")
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						defer resp.Body.Close()
						if resp.StatusCode != http.StatusNotFound {
							t.Fatalf("%s %s: status %d", m, path, resp.StatusCode)
						}
						return dump(t, resp)
					}
					endpoint, unknown := get(MCPPath), get("/api/v1/nothing-here")
					if !bytes.Equal(endpoint, unknown) {
						t.Fatalf("endpoint answer differs from an unknown path's:\n%s\n---\n%s", endpoint, unknown)
					}
				})
			}
		}
	}
}

func TestAuthenticatedRequests(t *testing.T) {
	cases := []struct {
		name   string
		method string
		token  string
		body   string
		status int
		want   string // substring of the body
		allow  string
	}{
		{"tools/list", http.MethodPost, "Bearer " + aliceToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 200, `"name":"booking.cancel"`, ""},
		{"scheme case-insensitive", http.MethodPost, "bearer " + aliceToken, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 200, `"result":{}`, ""},
		{"tools/call", http.MethodPost, "Bearer " + aliceToken, callBody(mcptest.BookingGet, `{"id":"b-1"}`), 200, `"structuredContent":{"id":"b-1"`, ""},
		{"refusal", http.MethodPost, "Bearer " + aliceToken, callBody(mcptest.Cancel, `{"id":"b-2"}`), 200, `"code":-32003`, ""},
		{"notification", http.MethodPost, "Bearer " + aliceToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, "", ""},
		{"GET", http.MethodGet, "Bearer " + aliceToken, "", 405, "POST only", "POST"},
		{"DELETE", http.MethodDelete, "Bearer " + aliceToken, "", 405, "POST only", "POST"},
		{"custom method", "FOO", "Bearer " + aliceToken, "", 405, "POST only", "POST"},
	}
	f := newFixture(t, nil)
	base := f.serve(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(mcpRequest(t, tc.method, base+MCPPath, tc.token, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.want) {
				t.Fatalf("got %d %s; want %d containing %q", resp.StatusCode, body, tc.status, tc.want)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow = %q, want %q", got, tc.allow)
			}
			if resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatal("session id issued")
			}
		})
	}
	if strings.Contains(f.logs.String(), aliceToken) {
		t.Fatal("a token reached the log")
	}
}

func TestBodyLimit(t *testing.T) {
	cases := []struct {
		name   string
		limit  int64
		size   int
		status int
	}{
		{"default limit, small body", 0, 1 << 10, 200},
		{"default limit, over 1 MiB", 0, 1<<20 + 1, 413},
		{"custom limit, over", 512, 1 << 10, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.MaxBodyBytes = tc.limit })
			base := f.serve(t)
			pad := strings.Repeat("x", tc.size)
			body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + pad + `"}}`
			resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+aliceToken, body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 413 && !json.Valid(out) {
				t.Fatalf("413 body is not a JSON-RPC error: %s", out)
			}
		})
	}
}

// TestSlowHandler: a call outliving the request timeout is cut off through
// its context and answered as a tool error, well before the write deadline.
func TestSlowHandler(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.RequestTimeout = 300 * time.Millisecond })
	base := f.serve(t)
	start := time.Now()
	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Slow, `{}`)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if took := time.Since(start); took < 250*time.Millisecond || took > 3*time.Second {
		t.Fatalf("answered after %v", took)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"isError":true`) || !strings.Contains(string(body), "time limit") {
		t.Fatalf("got %d %s", resp.StatusCode, body)
	}
}

// TestSlowClient: a client that stops sending mid-body or mid-headers is
// dropped by the server's read deadlines instead of holding a goroutine.
func TestSlowClient(t *testing.T) {
	cases := []struct {
		name    string
		send    string
		answers bool // an HTTP response arrives before the close
	}{
		{"stalls in the body", "POST " + MCPPath + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceToken +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":", true},
		{"stalls in the headers", "POST " + MCPPath + " HTTP/1.1\r\nHost: x\r\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.RequestTimeout = 300 * time.Millisecond })
			base := f.serve(t)
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.send); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("connection held for %v", took)
			}
			if !tc.answers {
				if err == nil {
					t.Fatalf("got a response to half a request: %d", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("status = %d, want 408", resp.StatusCode)
			}
		})
	}
}

// TestShutdownDrains: Shutdown waits for a call in flight, which then
// completes normally; new connections are refused meanwhile.
func TestShutdownDrains(t *testing.T) {
	f := newFixture(t, nil)
	f.platform.SlowRelease = make(chan struct{})
	f.platform.SlowStarted = make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(context.Background(), ln) }()

	type result struct {
		status int
		body   string
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Slow, `{}`)))
		if err != nil {
			inflight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		inflight <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-f.platform.SlowStarted

	shut := make(chan error, 1)
	go func() { shut <- f.srv.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned with a call in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("a new connection was accepted while draining")
	}
	close(f.platform.SlowRelease)
	r := <-inflight
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"done":true`) {
		t.Fatalf("in-flight call: %+v", r)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestDrainTimeout: when in-flight work outlasts ShutdownTimeout, Serve
// reports that the drain was cut short.
func TestDrainTimeout(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.ShutdownTimeout = 100 * time.Millisecond })
	f.platform.SlowRelease = make(chan struct{})
	f.platform.SlowStarted = make(chan struct{}, 1)
	defer close(f.platform.SlowRelease)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ctx, ln) }()
	go func() {
		resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, "http://"+ln.Addr().String()+MCPPath, "Bearer "+adminToken, callBody(mcptest.Slow, `{}`)))
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-f.platform.SlowStarted
	cancel()
	err = <-served
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Serve = %v, want a drain deadline error", err)
	}
}

func TestStart(t *testing.T) {
	t.Run("serves until cancelled", func(t *testing.T) {
		f := newFixture(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- f.srv.Start(ctx) }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("bad address", func(t *testing.T) {
		f := newFixture(t, func(o *Options) { o.Addr = "256.0.0.1:http-nope" })
		if err := f.srv.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "listen on") {
			t.Fatalf("Start = %v", err)
		}
	})
	t.Run("listener fails", func(t *testing.T) {
		f := newFixture(t, nil)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if err := f.srv.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "serve http") {
			t.Fatalf("Serve = %v", err)
		}
	})
	t.Run("shutdown from elsewhere", func(t *testing.T) {
		f := newFixture(t, nil)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- f.srv.Serve(context.Background(), ln) }()
		time.Sleep(50 * time.Millisecond)
		if err := f.srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Serve = %v", err)
		}
	})
}

func TestRecoverPanics(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.echo.GET("/boom", func(echo.Context) error { panic("handler bug") })
	f.srv.echo.GET("/abort", func(echo.Context) error { panic(http.ErrAbortHandler) })
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/boom", nil))
	if w.Code != 500 || strings.Contains(w.Body.String(), "handler bug") {
		t.Fatalf("got %d %s", w.Code, w.Body.String())
	}
	if !strings.Contains(f.logs.String(), "handler bug") {
		t.Fatalf("panic not logged: %s", f.logs.String())
	}
	func() {
		defer func() {
			if recover() != http.ErrAbortHandler {
				t.Fatal("ErrAbortHandler was swallowed")
			}
		}()
		f.srv.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
	}()
}

func TestRequestLog(t *testing.T) {
	cases := []struct {
		name  string
		level slog.Level
		want  bool
	}{
		{"debug logs requests", slog.LevelDebug, true},
		{"info does not", slog.LevelInfo, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &mcptest.LogBuffer{}
			f := newFixture(t, func(o *Options) {
				o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: tc.level}))
			})
			for _, path := range []string{MCPPath, "/nope"} {
				w := httptest.NewRecorder()
				f.srv.Handler().ServeHTTP(w, mcpRequest(t, http.MethodPost, path, "Bearer "+aliceToken, `{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			}
			out := logs.String()
			logged := strings.Contains(out, `"path":"/api/v1/mcp"`) && strings.Contains(out, `"status":200`) && strings.Contains(out, `"status":404`)
			if logged != tc.want {
				t.Fatalf("logged = %v: %s", logged, out)
			}
			if strings.Contains(out, aliceToken) {
				t.Fatal("token logged")
			}
		})
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	p := mcptest.New()
	cases := []struct {
		name string
		opts Options
	}{
		{"no dispatcher", Options{Auth: newStore(t)}},
		{"no authenticator", Options{Dispatcher: p.Dispatcher}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("New did not panic")
				}
			}()
			New(tc.opts)
		})
	}
}

func TestTimeoutsDerivedFromOptions(t *testing.T) {
	cases := []struct {
		name                          string
		request                       time.Duration
		header, read, write, shutdown time.Duration
	}{
		{"defaults", 0, maxHeaderTimeout, DefaultRequestTimeout, DefaultRequestTimeout + writeGrace, DefaultShutdownTimeout},
		{"short", 2 * time.Second, 2 * time.Second, 2 * time.Second, 2*time.Second + writeGrace, DefaultShutdownTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *Options) { o.RequestTimeout = tc.request })
			h := f.srv.http
			if h.ReadHeaderTimeout != tc.header || h.ReadTimeout != tc.read || h.WriteTimeout != tc.write || f.srv.opts.ShutdownTimeout != tc.shutdown {
				t.Fatalf("timeouts: header %v read %v write %v shutdown %v", h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, f.srv.opts.ShutdownTimeout)
			}
		})
	}
}

// TestMaxInFlight: with MaxInFlight requests being served, one more is
// answered 503 with Retry-After at once, before its body is read; health
// probes still answer; once a slot is free requests are served again.
func TestMaxInFlight(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxInFlight = 2 })
	f.platform.SlowRelease = make(chan struct{})
	f.platform.SlowStarted = make(chan struct{}, 2)
	base := f.serve(t)
	done := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Slow, `{}`)))
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
	}
	<-f.platform.SlowStarted
	<-f.platform.SlowStarted
	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Search, `{"query":"a"}`)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(body), "server busy: 2 requests in flight (http.max_in_flight)") {
		t.Errorf("third request = %d %q (Retry-After %q)", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	if code, _, _ := getHealth(t, http.MethodGet, base); code != 200 {
		t.Errorf("health probe while busy = %d", code)
	}
	close(f.platform.SlowRelease)
	for range 2 {
		if code := <-done; code != 200 {
			t.Errorf("slow call = %d", code)
		}
	}
	resp, err = http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+MCPPath, "Bearer "+adminToken, callBody(mcptest.Search, `{"query":"a"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("request after the slots came back = %d", resp.StatusCode)
	}
	if n := strings.Count(f.logs.String(), "http: busy, requests refused"); n != 1 {
		t.Errorf("%d busy log lines, want 1", n)
	}
}
