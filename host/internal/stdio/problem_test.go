package stdio

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestProblems points the bridge at wrong places and wrong tokens. Each
// case's Check says which, in one line with what to do, and a request
// sent through the bridge gets the same words as a CodeBridge error under
// its id, while a notification gets nothing.
func TestProblems(t *testing.T) {
	c := startCapgate(t, nil)
	closed := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr + mcpPath
	}()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	var leaked atomic.Bool // the token reached a redirect's target
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
	}))
	defer elsewhere.Close()
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/mcp", http.StatusPermanentRedirect))
	defer redirect.Close()
	// An OAuth resource server's refusal, as RFC 6750 and RFC 9728 shape it.
	oauth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", error_description="The access token expired", resource_metadata="https://capgate.example/.well-known/oauth-protected-resource/api/v1/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer oauth.Close()
	scope := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="mcp:tools"`)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer scope.Close()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer busy.Close()
	tlsCapgate := httptest.NewTLSServer(c.srv.Config.Handler)
	defer tlsCapgate.Close()
	plain := strings.TrimPrefix(c.srv.URL, "http://")

	for _, tc := range []struct {
		name, url, token string
		kind             Kind
		says             []string
	}{
		{"connection refused", closed, userToken, Unreachable, []string{"nothing listens on", "connection refused", "capgate serve"}},
		{"unknown token", c.url, "not-a-token", TokenRefused, []string{"does not accept the token in CAPGATE_TOKEN", "404", "enabled: false"}},
		{"wrong path on capgate", c.srv.URL + "/api/v1/nope", userToken, NotCapgate, []string{"is not its MCP endpoint", "/api/v1/mcp"}},
		{"not capgate", notFound.URL + mcpPath, userToken, NotCapgate, []string{"no capgate health check", "capgate's address"}},
		{"405 to POST", c.srv.URL + "/healthz", userToken, NotCapgate, []string{"does not take POST", "/api/v1/mcp"}},
		{"redirect", redirect.URL + mcpPath, userToken, Redirected, []string{"redirects to " + elsewhere.URL + "/mcp", "does not follow"}},
		{"expired OAuth token", oauth.URL + mcpPath, userToken, TokenRefused, []string{"401 invalid_token", "The access token expired", "get a new access token", "oauth-protected-resource"}},
		{"insufficient scope", scope.URL + mcpPath, userToken, TokenRefused, []string{"insufficient_scope", "mcp:tools"}},
		{"proxy without capgate", busy.URL + mcpPath, userToken, Unavailable, []string{"502", "is capgate running"}},
		{"untrusted certificate", tlsCapgate.URL + mcpPath, userToken, TLSFailed, []string{"not signed by an authority this machine trusts", "-cacert"}},
		{"TLS to plain http", "https://" + plain + mcpPath, userToken, TLSFailed, []string{"does not speak TLS", "http://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{URL: tc.url, Token: tc.token, Timeout: time.Minute}
			b, err := New(opts)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			_, err = b.Check(context.Background())
			var p *Problem
			if !errors.As(err, &p) || p.Kind != tc.kind {
				t.Fatalf("Check = %v, want a %s problem", err, tc.kind)
			}
			for _, s := range tc.says {
				if !strings.Contains(p.Message, s) {
					t.Errorf("Check says %q, want it to say %q", p.Message, s)
				}
			}
			if strings.Contains(p.Message, tc.token) || strings.Contains(p.Message, "\n") {
				t.Errorf("the message holds the token or a newline: %q", p.Message)
			}

			s := bridge(t, opts)
			s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if got := bridgeProblem(t, s.roundTrip(legacyCall(3, capEcho, `{}`)), "3", tc.kind); got != p.Message {
				t.Errorf("the request's error says %q, Check %q", got, p.Message)
			}
		})
	}
	if leaked.Load() {
		t.Errorf("the token was sent to the redirect's target")
	}

	t.Run("trusted with -cacert", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(tlsCapgate.Certificate())
		b, err := New(Options{URL: tlsCapgate.URL + mcpPath, Token: userToken, RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.Check(context.Background())
		if err != nil || s.Name != "capgate" || s.Version != "9.9.9" || len(s.Versions) != 4 {
			t.Fatalf("Check over TLS with the CA = %+v, %v; want capgate 9.9.9 and its 4 versions", s, err)
		}
	})
}

// TestTimeout: an exchange that gets no answer within Options.Timeout is
// ended, and the request is answered with the timeout problem.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hung.Close()
	defer close(release)
	s := bridge(t, Options{URL: hung.URL + mcpPath, Token: userToken, Timeout: 50 * time.Millisecond})
	if m := bridgeProblem(t, s.roundTrip(legacyCall(9, capEcho, `{}`)), "9", TimedOut); !strings.Contains(m, "did not answer within 50ms") {
		t.Errorf("timeout message %q", m)
	}
}

// TestEventStream relays an answer sent as an event stream, as the
// transport lets a server answer any request: the notifications before
// the answer, each on its own line as it comes, then the answer. A stream
// that ends without the answer is a problem for the request.
func TestEventStream(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		flush := func(s string) {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
		if strings.Contains(string(body), `"id":2`) {
			flush(": a comment\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
			return // no answer
		}
		flush("retry: 1000\n\n: keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n")
		flush("data:  \"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n")
		<-next
		flush("id: 7\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\r\n\r\n")
	}))
	defer srv.Close()
	s := bridge(t, Options{URL: srv.URL + mcpPath, Token: userToken})
	s.send(legacyCall(1, capEcho, `{}`))
	if got := s.recv(); got != `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}` {
		t.Errorf("first line: %s", got)
	}
	close(next)
	if got := s.recv(); got != `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` {
		t.Errorf("second line: %s", got)
	}
	s.send(legacyCall(2, capEcho, `{}`))
	if got := s.recv(); !strings.Contains(got, "notifications/progress") {
		t.Errorf("first line of the second stream: %s", got)
	}
	bridgeProblem(t, s.recv(), "2", BadAnswer)
}

// TestNotJSONRPC: an answer that is JSON but no JSON-RPC message is never
// written to the client, whose stdout must carry MCP only.
func TestNotJSONRPC(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"hello":"world"}`)
	}))
	defer srv.Close()
	s := bridge(t, Options{URL: srv.URL + mcpPath, Token: userToken})
	if m := bridgeProblem(t, s.roundTrip(legacyCall(1, capEcho, `{}`)), "1", NotCapgate); !strings.Contains(m, "answered 200 without a JSON-RPC message") {
		t.Errorf("message %q", m)
	}
}

// TestNew refuses options that cannot work, saying why, and never with
// the token in the words.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		error string
	}{
		{"no token", Options{URL: DefaultURL}, "no token"},
		{"token with a newline", Options{URL: DefaultURL, Token: "abc\n"}, "without a newline"},
		{"no URL", Options{Token: "t0k3n-secret"}, "no URL"},
		{"not a URL", Options{URL: "http://[::1", Token: "t0k3n-secret"}, "is not a URL"},
		{"another scheme", Options{URL: "ftp://127.0.0.1/api/v1/mcp", Token: "t0k3n-secret"}, "http or https"},
		{"no host", Options{URL: "http:///api/v1/mcp", Token: "t0k3n-secret"}, "has no host"},
		{"user information", Options{URL: "https://me:pw@capgate.example/api/v1/mcp", Token: "t0k3n-secret"}, "carries a user name or password"},
		{"plain http to another machine", Options{URL: "http://capgate.example:8080/api/v1/mcp", Token: "t0k3n-secret"}, "unencrypted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Fatalf("New = %v, want an error saying %q", err, tc.error)
			}
			if strings.Contains(err.Error(), "t0k3n-secret") || strings.Contains(err.Error(), ":pw@") {
				t.Errorf("the error holds a secret: %v", err)
			}
		})
	}
	for _, ok := range []Options{
		{URL: "http://127.0.0.1:8080/api/v1/mcp", Token: "t"},
		{URL: "http://localhost:8080/api/v1/mcp", Token: "t"},
		{URL: "http://[::1]:8080/api/v1/mcp", Token: "t"},
		{URL: "https://capgate.example/api/v1/mcp", Token: "t"},
		{URL: "http://capgate.example:8080/api/v1/mcp", Token: "t", AllowInsecureHTTP: true},
	} {
		if _, err := New(ok); err != nil {
			t.Errorf("New(%s) = %v, want it taken", ok.URL, err)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	for in, want := range map[string]string{
		"us-west1":           "us-west1",
		"Hello, 世界":          "=?base64?SGVsbG8sIOS4lueVjA==?=",
		" padded ":           "=?base64?IHBhZGRlZCA=?=",
		"line1\nline2":       "=?base64?bGluZTEKbGluZTI=?=",
		"=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=",
		"":                   "",
	} {
		if got := headerValue(in); got != want {
			t.Errorf("headerValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseChallenge(t *testing.T) {
	got := parseChallenge([]string{`Basic realm="x"`, `Bearer realm="capgate", error="invalid_token", error_description="say \"no\"", scope=mcp:read`})
	want := challenge{err: "invalid_token", desc: `say "no"`, scope: "mcp:read"}
	if got != want {
		t.Errorf("parseChallenge = %+v, want %+v", got, want)
	}
	if got := parseChallenge([]string{`Bearerish error="x"`}); got != (challenge{}) {
		t.Errorf("another scheme read as Bearer: %+v", got)
	}
}

// TestReadLines: blank lines are skipped, CRLF and a last line without
// its newline are whole messages, and a line over the bound is cut to
// the bound and marked, the rest of it skipped.
func TestReadLines(t *testing.T) {
	in := "{\"a\":1}\r\n\n   \n" + strings.Repeat("x", 100) + "\n{\"b\":2}\n" + strings.Repeat("y", 10) + "\n{\"c\":3}"
	out := make(chan line, 10)
	if err := readLines(strings.NewReader(in), 10, out, nil); err != nil {
		t.Fatal(err)
	}
	close(out)
	var got []string
	for l := range out {
		got = append(got, fmt.Sprintf("%s/%v", l.data, l.tooLong))
	}
	want := []string{`{"a":1}/false`, "xxxxxxxxxx/true", `{"b":2}/false`, "yyyyyyyyyy/false", `{"c":3}/false`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}
