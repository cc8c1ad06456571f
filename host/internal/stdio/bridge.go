package stdio

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/host/internal/mcp"
)

// DefaultURL is capgate's MCP endpoint as `capgate serve` listens by
// default (listen: 127.0.0.1:8080).
const DefaultURL = "http://127.0.0.1:8080" + mcpPath

// mcpPath is the path of capgate's MCP endpoint (server.MCPPath).
const mcpPath = "/api/v1/mcp"

// Defaults for zero Options fields.
const (
	// DefaultMaxMessageBytes is capgate's own default bound of a request
	// body (http.max_body_bytes): a larger message would be refused there.
	DefaultMaxMessageBytes = mcp.DefaultMaxBodyBytes
	// DefaultMaxInFlight bounds the messages forwarded at once. Editors
	// pipeline a few requests; more wait on stdin, which holds them.
	DefaultMaxInFlight = 32
	// DefaultTimeout bounds one exchange (see Options.Timeout): longer
	// than capgate's own request timeout (http.request_timeout, 30s by
	// default), so capgate's answer to a slow call arrives first.
	DefaultTimeout = 5 * time.Minute
)

// maxAnswerBytes bounds one answer read from capgate: a tool result of
// max_result_bytes (4 MiB by default) is carried twice (as text and as
// structured content), escaped; whatever sends more is not capgate.
const maxAnswerBytes = 32 << 20

// Options configures a Bridge.
type Options struct {
	// URL is capgate's MCP endpoint, http or https. Required.
	URL string
	// Token is the bearer token sent with every message. Required.
	Token string
	// AllowInsecureHTTP permits a plain http URL whose host is not this
	// machine's loopback; without it New refuses one, as the token would
	// cross the network unencrypted.
	AllowInsecureHTTP bool
	// RootCAs, when set, are the certificate authorities trusted for an
	// https URL instead of the system's.
	RootCAs *x509.CertPool
	// MaxMessageBytes bounds one message read from the editor; 0 means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxInFlight bounds the messages forwarded at once; 0 means
	// DefaultMaxInFlight.
	MaxInFlight int
	// Timeout bounds one exchange with capgate: until a JSON answer has
	// arrived whole, or between two events of an event stream. 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Version is this build's version, sent in the User-Agent.
	Version string
	// Logger receives what the bridge does; nil means slog.Default(). It
	// never receives the token or a message's content.
	Logger *slog.Logger
}

// Bridge forwards MCP messages between a stdio client and capgate's
// Streamable HTTP endpoint. It is safe for concurrent use; Serve is called
// once.
type Bridge struct {
	opts   Options
	url    *url.URL
	shown  string // the URL as logs and messages show it
	client *http.Client
	log    *slog.Logger
	ua     string

	// negotiated is the protocol version an initialize answer chose, sent
	// as MCP-Protocol-Version on later messages that carry none.
	negotiated atomic.Pointer[string]
	tools      toolHeaders
	flights    flights
	out        lineWriter
}

// New checks opts and returns a Bridge. Its errors are for a human: they
// say what is wrong with the option and what would do.
func New(opts Options) (*Bridge, error) {
	if opts.Token == "" {
		return nil, errors.New("no token: capgate needs a bearer token")
	}
	if strings.ContainsAny(opts.Token, "\r\n\x00") || strings.TrimSpace(opts.Token) != opts.Token {
		// It would break the Authorization header, or be refused as
		// another token; never echo it.
		return nil, errors.New("the token has spaces or control characters around or in it: paste it again, without a newline")
	}
	u, err := checkURL(opts.URL, opts.AllowInsecureHTTP)
	if err != nil {
		return nil, err
	}
	if opts.MaxMessageBytes <= 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	b := &Bridge{opts: opts, url: u, shown: redact(u), log: opts.Logger, ua: "capgate-stdio/" + opts.Version}
	b.client = newClient(opts)
	return b, nil
}

// URL returns the endpoint the bridge forwards to, as logs show it.
func (b *Bridge) URL() string { return b.shown }

// checkURL parses and judges the endpoint URL. Plain http is for this
// machine only unless allowed: the token travels in every request.
func checkURL(raw string, allowHTTP bool) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("no URL: give capgate's MCP endpoint, such as " + DefaultURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("URL %q is not a URL: %v", clip(raw), err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("URL %q: the scheme must be http or https, such as %s", clip(raw), DefaultURL)
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("URL %q has no host, such as %s", clip(raw), DefaultURL)
	case u.User != nil:
		// The token is the credential; a second one in the URL would be
		// logged wherever the URL is.
		return nil, fmt.Errorf("URL %s carries a user name or password: remove it; the token in the environment is the credential", redact(u))
	case u.Fragment != "":
		return nil, fmt.Errorf("URL %s has a #fragment, which is never sent: remove it", redact(u))
	case u.Scheme == "http" && !allowHTTP && !loopback(u.Hostname()):
		return nil, fmt.Errorf("URL %s is plain http to another machine, so the token would cross the network unencrypted: use https, or, if the network between is private (a VPN, a tunnel), allow it with -allow-insecure-http", redact(u))
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// loopback reports a host that names this machine: localhost or a
// loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redact is u as it may be shown: no user information, no query (which
// could carry a secret of someone's proxy), no fragment.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

// newClient is the HTTP client of the bridge: the environment's proxy
// settings, keep-alive connections enough for MaxInFlight, and no
// redirects followed, so that the token goes only where the URL says.
func newClient(opts Options) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = opts.MaxInFlight
	t.MaxIdleConns = opts.MaxInFlight
	t.ResponseHeaderTimeout = 0 // Options.Timeout bounds the whole exchange
	if opts.RootCAs != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Serve reads messages from in, one a line, forwards each to capgate and
// writes what capgate answers to out, one message a line. Messages are
// forwarded concurrently (up to MaxInFlight), so answers come in the order
// capgate gives them; each line is written whole.
//
// Serve returns nil when in ends, once every message read has been
// answered, or when ctx ends, after cancelling the exchanges under way. It
// returns an error when in or out fails.
func (b *Bridge) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	b.out = lineWriter{w: out, dead: make(chan struct{})}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lines := make(chan line)
	readErr := make(chan error, 1)
	go func() {
		// A read from stdin cannot be interrupted: when ctx ends first,
		// this goroutine waits on it until the process exits.
		readErr <- readLines(in, b.opts.MaxMessageBytes, lines, ctx.Done())
	}()

	slots := make(chan struct{}, b.opts.MaxInFlight)
	// The client's answers to what capgate's calls asked it (before
	// 2026-07-28) have slots of their own: calls waiting for answers may
	// hold every other slot.
	answerSlots := make(chan struct{}, b.opts.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		var l line
		select {
		case <-ctx.Done():
			return nil
		case <-b.out.dead:
			// The client is gone; nobody reads what is under way.
			cancel()
			return b.out.failed()
		case err := <-readErr:
			wg.Wait()
			if err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			return b.out.failed()
		case l = <-lines:
		}
		if l.tooLong {
			b.refuseTooLong(l.data)
			continue
		}
		m := parse(l.data)
		if m.method == methodCancelled {
			// Cancelled here first, even while every slot is taken by
			// the very calls it may cancel. From 2026-07-28 on, closing
			// the exchange is the whole of it: the notification has no
			// meaning over HTTP.
			if ver := b.cancelFlight(m); ver >= firstModern {
				continue
			}
		}
		if m.method == "initialize" {
			// The client may send nothing else until it is answered, and
			// its answer sets the version of what follows: a client that
			// writes ahead (a script) still gets that version.
			b.handle(ctx, m)
			continue
		}
		pool := slots
		if m.isResponse {
			pool = answerSlots
		}
		select {
		case pool <- struct{}{}:
		case <-ctx.Done():
			return nil
		case <-b.out.dead:
			cancel()
			return b.out.failed()
		}
		wg.Go(func() {
			defer func() { <-pool }()
			b.handle(ctx, m)
		})
	}
}

// refuseTooLong answers a message over MaxMessageBytes with an error, under
// the id its first bytes carry when they do; capgate would refuse it too,
// after it had crossed the network.
func (b *Bridge) refuseTooLong(prefix []byte) {
	m := parse(prefix)
	b.log.Warn("message from the client refused: over the bound", slog.Int64("max_message_bytes", b.opts.MaxMessageBytes), slog.String("method", m.methodName()))
	if m.id == nil && m.method != "" {
		return // a notification: no answer
	}
	p := &Problem{Kind: TooLarge, Message: fmt.Sprintf("the message exceeds %d bytes, the most capgate takes in one request (http.max_body_bytes): send less", b.opts.MaxMessageBytes)}
	b.writeProblem(m.id, p)
}

// lineWriter writes whole lines to the client, one at a time.
type lineWriter struct {
	mu   sync.Mutex
	w    io.Writer
	err  error
	dead chan struct{} // closed when a write fails
}

// write writes msg, which must be compact JSON, and a newline.
func (w *lineWriter) write(msg []byte) error {
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(buf); err != nil {
		w.err = fmt.Errorf("write stdout: %w", err)
		close(w.dead)
	}
	return w.err
}

func (w *lineWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// flights are the requests being forwarded, by id, so that a
// notifications/cancelled naming one ends its exchange.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	cancel    context.CancelFunc
	version   string // the protocol version it was sent under
	cancelled atomic.Bool
}

// start registers a request; of two with the same id, the newer one is
// cancelled by name, as capgate does.
func (fs *flights) start(key, version string, cancel context.CancelFunc) *flight {
	f := &flight{cancel: cancel, version: version}
	fs.mu.Lock()
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	fs.m[key] = f
	fs.mu.Unlock()
	return f
}

func (fs *flights) end(key string, f *flight) {
	fs.mu.Lock()
	if fs.m[key] == f {
		delete(fs.m, key)
	}
	fs.mu.Unlock()
}

func (fs *flights) take(key string) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.m[key]
}

// cancelFlight ends the exchange of the request a notifications/cancelled
// names: closing the connection is what cancels a call on capgate at
// 2026-07-28, and at every version it stops the call inside the plugin.
// Nothing is written for the cancelled request; the client has given up
// on it. It returns the version the request was sent under, "" when none
// is under way.
func (b *Bridge) cancelFlight(m message) string {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.params, &p) != nil || len(p.RequestID) == 0 {
		return ""
	}
	f := b.flights.take(idKey(p.RequestID))
	if f == nil {
		return ""
	}
	f.cancelled.Store(true)
	f.cancel()
	b.log.Debug("request cancelled by the client", slog.String("id", clip(idKey(p.RequestID))))
	return f.version
}

// idKey is a JSON-RPC id as a map key: its compact JSON.
func idKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return string(id)
	}
	return buf.String()
}

// clip bounds a caller-supplied string before it goes into a message or a
// log line.
func clip(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
