package mcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/origin"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// ServerName is the serverInfo name the adapter reports.
const ServerName = "capgate"

// DefaultMaxBodyBytes bounds a request body when Options leaves it unset.
const DefaultMaxBodyBytes = 1 << 20

// maxBatch bounds the messages of one 2025-03-26 batch, so a single body
// cannot fan out into an unbounded number of gate calls.
const maxBatch = 100

// Options configures a Handler.
type Options struct {
	// RequestTimeout is the deadline of one request's work (the gate, the
	// plugin calls); 0 means none. The adapter sets it, rather than a
	// middleware, so that the request's own cancel is what
	// notifications/cancelled calls: no context more per call.
	RequestTimeout time.Duration
	// Version is the build version reported as serverInfo.version.
	Version string
	// Instructions, when set, is returned by initialize and server/discover
	// as guidance for the model.
	Instructions string
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AllowedOrigins lists browser origins ("https://app.example.com") that
	// may call the endpoint besides loopback ones; "*" allows every origin.
	AllowedOrigins []string
	// ListTTL is the freshness hint (ttlMs) on 2026-07-28 list results. The
	// tool list only changes when the host restarts with a new policy, but
	// the default of zero never lets a client hold a stale list.
	ListTTL time.Duration
	// Records makes the platform's catalogue records MCP resources; the
	// zero value serves none.
	Records Records
	// Logger receives internal failures and refusals; nil means
	// slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told of every JSON-RPC request answered (the
	// host's metrics), on the request's goroutine: it must be cheap.
	Observe func(Operation)
	// Tracing, when set, traces every JSON-RPC request answered; nil
	// traces none, at no cost.
	Tracing *Tracing
	// Tasks, when set, offers the tasks extension at 2026-07-28; nil
	// offers none, and capabilities that require tasks are refused.
	Tasks *TaskOptions
	// Answers, when set, lets a call at a revision before 2026-07-28 ask
	// its client mid-call: a request on the call's event stream, whose
	// answer comes back in a POST of its own, at this replica or another
	// sharing the relay. Nil asks such clients nothing: an ask fails as
	// one the client cannot answer.
	Answers *answers.Relay
}

// Handler serves MCP over Streamable HTTP, statelessly, for principals the
// caller has already authenticated. It is safe for concurrent use.
type Handler struct {
	d     *dispatch.Dispatcher
	reg   *registry.Registry
	tools map[*registry.Entry]toolJSON
	// paramHeaders holds the x-mcp-header bindings of capabilities that
	// declare any; most declare none and cost nothing.
	paramHeaders map[string][]paramHeader
	records      recordSet
	origins      origin.Policy
	maxBody      int64
	timeout      time.Duration
	log          *slog.Logger
	running      running // requests a notifications/cancelled may cancel
	observe      func(Operation)
	tracing      *Tracing    // nil: no request is traced
	tasks        *taskRunner // nil: the tasks extension is off
	answers      *answers.Relay

	serverInfo   []byte // {"name":...,"version":...}
	capabilities []byte // the server capabilities object
	// discoverCapabilities adds, for server/discover, the extensions
	// only 2026-07-28 has.
	discoverCapabilities []byte
	instructions         []byte // ,"instructions":"..." or empty
	// modernTail closes every 2026-07-28 result: resultType and the
	// serverInfo the revision asks each result to carry in _meta.
	modernTail []byte
	// cacheTail is the CacheableResult fields of 2026-07-28 list results.
	cacheTail []byte
	// taskTail closes a CreateTaskResult: modernTail with resultType task.
	taskTail []byte
}

// New returns a Handler projecting d's registry. Tool definitions are
// rendered here, once, so listing them costs no encoding per request; the
// registry is complete before the host serves, so nothing is missed.
func New(d *dispatch.Dispatcher, opts Options) *Handler {
	if d == nil {
		panic("mcp.New: nil dispatcher")
	}
	h := &Handler{
		d:            d,
		reg:          d.Registry(),
		tools:        map[*registry.Entry]toolJSON{},
		paramHeaders: map[string][]paramHeader{},
		origins:      origin.NewPolicy(opts.AllowedOrigins),
		maxBody:      opts.MaxBodyBytes,
		timeout:      opts.RequestTimeout,
		log:          opts.Logger,
		observe:      opts.Observe,
		answers:      opts.Answers,
	}
	if opts.Tracing != nil && opts.Tracing.Tracer != nil {
		h.tracing = opts.Tracing
	}
	h.records = newRecordSet(h.reg, opts.Records)
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, e := range h.reg.All() {
		h.tools[e] = renderTool(e)
		if b := paramHeadersOf(e); len(b) > 0 {
			h.paramHeaders[e.Name] = b
		}
	}
	h.serverInfo = appendString([]byte(`{"name":"`+ServerName+`","version":`), opts.Version)
	h.serverInfo = append(h.serverInfo, '}')
	h.capabilities = []byte(`{"logging":{},"tools":{"listChanged":false},"resources":{"subscribe":false,"listChanged":false}`)
	// Prompts and completion are declared only when there is something to
	// ask for: a client then offers no menu this server would leave empty.
	// Completion serves prompt arguments and resource template variables.
	if len(h.reg.Prompts()) > 0 {
		h.capabilities = append(h.capabilities, `,"prompts":{"listChanged":false}`...)
	}
	if len(h.reg.Prompts()) > 0 || len(h.reg.ResourceTemplates()) > 0 || (h.records.get != nil && len(h.records.templates) > 0) {
		h.capabilities = append(h.capabilities, `,"completions":{}`...)
	}
	h.capabilities = append(h.capabilities, '}')
	h.discoverCapabilities = h.capabilities
	if h.tasks = newTaskRunner(opts.Tasks, h.log); h.tasks != nil {
		h.discoverCapabilities = append(h.capabilities[:len(h.capabilities)-1:len(h.capabilities)-1], `,"extensions":{"`+ExtTasks+`":{}}}`...)
	}
	if opts.Instructions != "" {
		h.instructions = appendString([]byte(`,"instructions":`), opts.Instructions)
	}
	h.modernTail = append([]byte(`,"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":`), h.serverInfo...)
	h.modernTail = append(h.modernTail, '}')
	h.taskTail = append([]byte(`,"resultType":"task"`), h.modernTail[len(`,"resultType":"complete"`):]...)
	h.cacheTail = strconv.AppendInt([]byte(`,"ttlMs":`), opts.ListTTL.Milliseconds(), 10)
	// Lists differ per token, so no shared cache may keep them.
	h.cacheTail = append(h.cacheTail, `,"cacheScope":"private"`...)
	return h
}

var (
	jsonContentType = []string{"application/json"}
	allowPost       = []string{http.MethodPost}
)

// buffers pools request and response byte slices; a tools/call then
// allocates nothing for its envelope.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooled keeps one oversized request from pinning its buffer forever.
const maxPooled = 64 << 10

func getBuf() *[]byte { return buffers.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:0]
	buffers.Put(b)
}

// Serve answers one HTTP request to the MCP endpoint for principal p. The
// transport checks come first, in the order the transport specification
// lists them; the JSON-RPC body is only read once they pass.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, p dispatch.Principal) {
	if o, ok := header(r.Header, hdrOrigin); ok && !h.origins.Allows(o, r.Host) {
		h.transportError(w, http.StatusForbidden, codeInvalidRequest, "forbidden: origin "+strconv.Quote(o)+" may not call this server")
		return
	}
	if r.Method != http.MethodPost {
		// Stateless: there is no GET stream to open and no session to
		// DELETE.
		w.Header()["Allow"] = allowPost
		h.transportError(w, http.StatusMethodNotAllowed, codeInvalidRequest, "method not allowed: the MCP endpoint takes POST only")
		return
	}
	if ct, _ := header(r.Header, hdrContentType); !mediaTypeIs(ct, "application/json") {
		h.transportError(w, http.StatusUnsupportedMediaType, codeInvalidRequest, "unsupported media type: Content-Type must be application/json")
		return
	}
	jsonOK, sseOK := accepts(r.Header[hdrAccept])
	if !jsonOK {
		h.transportError(w, http.StatusNotAcceptable, codeInvalidRequest, "not acceptable: responses are application/json")
		return
	}
	if !sseOK {
		h.transportError(w, http.StatusBadRequest, codeInvalidRequest, "bad request: Accept must list both application/json and text/event-stream")
		return
	}

	in := getBuf()
	defer putBuf(in)
	body, status, msg := h.readBody(r, *in)
	*in = body[:0]
	if status != 0 {
		h.transportError(w, status, codeInvalidRequest, msg)
		return
	}
	out := getBuf()
	defer putBuf(out)
	ctx, cancel := r.Context(), context.CancelFunc(nil)
	if h.tracing != nil {
		// The transport's trace context: the parent of requests whose
		// _meta carries none.
		ctx = w3c.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	if h.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	c := call{h: h, ctx: ctx, cancel: cancel, r: r, w: w, p: p, auth: r.Header.Get("Authorization"), sseOK: sseOK}
	status, *out = c.handleBody(body, (*out)[:0])
	if c.stream != nil && c.stream.started {
		// The call streamed its notices: its response is the last event.
		c.stream.event(*out)
		return
	}
	writeResponse(w, status, *out)
}

// readBody reads the whole body, up to the limit, into buf. A non-zero
// status reports why it could not.
func (h *Handler) readBody(r *http.Request, buf []byte) ([]byte, int, string) {
	if r.ContentLength > h.maxBody {
		return buf, http.StatusRequestEntityTooLarge, h.tooLarge()
	}
	if r.Body == nil {
		return buf, 0, ""
	}
	if want := r.ContentLength + 1; want > int64(cap(buf)) {
		buf = make([]byte, 0, want)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > h.maxBody {
			return buf, http.StatusRequestEntityTooLarge, h.tooLarge()
		}
		if err == io.EOF {
			return buf, 0, ""
		}
		if err != nil {
			var mbe *http.MaxBytesError
			var ne net.Error
			switch {
			case errors.As(err, &mbe):
				return buf, http.StatusRequestEntityTooLarge, h.tooLarge()
			case errors.As(err, &ne) && ne.Timeout():
				return buf, http.StatusRequestTimeout, "request timeout: the body did not arrive in time"
			}
			return buf, http.StatusBadRequest, "bad request: the body could not be read"
		}
	}
}

func (h *Handler) tooLarge() string {
	return "request entity too large: the body exceeds " + strconv.FormatInt(h.maxBody, 10) + " bytes"
}

// transportError answers a request refused before its JSON-RPC body was
// read: the error response has no id, as none could be known.
func (h *Handler) transportError(w http.ResponseWriter, status, code int, msg string) {
	out := getBuf()
	defer putBuf(out)
	*out = appendError((*out)[:0], nil, code, msg)
	writeResponse(w, status, *out)
}

// writeResponse writes a JSON body, or only the status when body is empty
// (202 Accepted for notifications).
func writeResponse(w http.ResponseWriter, status int, body []byte) {
	if len(body) == 0 {
		w.WriteHeader(status)
		return
	}
	w.Header()[hdrContentType] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body) // a failed write means the client left; nothing to tell it
}

// call is the state of one HTTP request.
type call struct {
	h   *Handler
	ctx context.Context
	r   *http.Request
	w   http.ResponseWriter
	p   dispatch.Principal
	// sseOK says the client accepts text/event-stream answers.
	sseOK bool
	// stream is the event stream of a tools/call that may tell its client
	// of its progress; nil for every other request.
	stream *noticeStream
	// cancel ends ctx, the whole HTTP request's: what a client's
	// notifications/cancelled calls for a request sent alone.
	cancel context.CancelFunc
	// inBatch is set while the messages of a batch are answered, each of
	// which is cancelled alone.
	inBatch bool
	// auth is the caller's Authorization header: a cancellation is taken
	// only from the caller of the request it names.
	auth string
	ver  version
	// header is the MCP-Protocol-Version header as sent.
	header string
	// tool is the name the request being answered called, for observe.
	tool string
	// inTask is set on the copy of a call that runs a task's tools/call
	// in the background: it runs as a plain call, and an internal failure
	// is a JSON-RPC error, which fails the task. Such a call has no
	// connection once its task is created: nothing may be streamed to
	// its client, which polls tasks/get instead.
	inTask bool
	// refusals are the errors a client answered a call's requests on its
	// stream with, for the failure that may follow (askClient).
	refusals []string
}
