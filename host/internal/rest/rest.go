package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/host/internal/origin"
	"github.com/capgate/capgate/host/internal/problem"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Routes the adapter answers; the server mounts them.
const (
	// CapabilitiesPath lists the capabilities (GET); CapabilitiesPath +
	// "/" + name calls one (POST).
	CapabilitiesPath = "/api/v1/capabilities"
	// OpenAPIPath is the OpenAPI 3.1 document (GET).
	OpenAPIPath = "/api/v1/openapi.json"
)

// Protocol is how the audit trail names calls that came through this
// adapter (dispatch.Origin.Protocol), and ProtocolVersion the version of
// its routes.
const (
	Protocol        = "rest"
	ProtocolVersion = "v1"
)

// DefaultMaxBodyBytes bounds a request body when Options leaves it unset:
// the same bound as the MCP endpoint's.
const DefaultMaxBodyBytes = 1 << 20

// maxRequestIDBytes bounds the X-Request-Id the audit trail is given: the
// header is the caller's to choose.
const maxRequestIDBytes = 128

// maxQuotedName bounds a capability name quoted back in a 404: the name in
// the path is the caller's.
const maxQuotedName = 64

// Options configures a Handler.
type Options struct {
	// RequestTimeout is the deadline of one call (the gate, the plugin);
	// 0 means none.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// AllowedOrigins lists browser origins that may call besides the ones
	// package origin always allows; "*" allows every origin.
	AllowedOrigins []string
	// Version is the build version, the OpenAPI document's info.version.
	Version string
	// Logger receives refusals and internal failures; nil means
	// slog.Default().
	Logger *slog.Logger
	// Invoke, when set, stands in for the dispatcher's Invoke on every
	// call (the host wraps the gate's decision in a span of its own). It
	// must call the adapter's dispatcher.
	Invoke func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error)
	// Tracer, when set, traces every call in a server span whose parent
	// is the W3C trace context of the request's headers; nil traces none.
	Tracer trace.Tracer
}

// Handler serves the REST routes for principals the caller has already
// authenticated. It is safe for concurrent use.
type Handler struct {
	d       *dispatch.Dispatcher
	reg     *registry.Registry
	invoke  func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error)
	tracer  trace.Tracer
	origins origin.Policy
	maxBody int64
	timeout time.Duration
	log     *slog.Logger
	// listed is each capability as the list shows it, rendered once
	// without its risk, which the policy gives per call.
	listed map[*registry.Entry][]byte
	// doc holds what the OpenAPI document repeats for every token.
	doc openAPIParts
}

// New returns a Handler over d's registry. What the list and the OpenAPI
// document show of each capability is rendered here, once: the registry
// is complete before the host serves.
func New(d *dispatch.Dispatcher, opts Options) *Handler {
	if d == nil {
		panic("rest.New: nil dispatcher")
	}
	h := &Handler{
		d: d, reg: d.Registry(), invoke: opts.Invoke, origins: origin.NewPolicy(opts.AllowedOrigins),
		maxBody: opts.MaxBodyBytes, timeout: opts.RequestTimeout, log: opts.Logger, tracer: opts.Tracer,
		listed: map[*registry.Entry][]byte{},
	}
	if h.invoke == nil {
		h.invoke = d.Invoke
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	for _, e := range h.reg.All() {
		h.listed[e] = renderListed(e)
	}
	h.doc = newOpenAPIParts(h.reg, opts.Version)
	return h
}

var (
	allowGet  = []string{"GET, HEAD"}
	allowPost = []string{http.MethodPost}
	jsonType  = []string{"application/json"}
	// Lists and documents differ per token and change with the policy.
	privateCache = []string{"private, no-cache"}
	varyAuth     = []string{"Authorization"}
)

// preflight answers what every route checks before its own work: an
// Origin the policy refuses, and a method the route does not take. It
// reports whether the request may go on.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request, allow []string, ok bool) bool {
	if o, has := r.Header[origin.Header]; has && len(o) > 0 && !h.origins.Allows(o[0], r.Host) {
		problem.Write(w, problem.New(http.StatusForbidden, "origin "+strconv.Quote(clip(o[0], maxQuotedName))+" may not call this server (http.allowed_origins)"))
		return false
	}
	if !ok {
		w.Header()["Allow"] = allow
		problem.Write(w, problem.New(http.StatusMethodNotAllowed, "this route takes "+allow[0]))
		return false
	}
	return true
}

func isGet(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

// ServeList answers GET /api/v1/capabilities for p: every capability p may
// call, in name order, as {"capabilities":[…]}.
func (h *Handler) ServeList(w http.ResponseWriter, r *http.Request, p dispatch.Principal) {
	if !h.preflight(w, r, allowGet, isGet(r)) {
		return
	}
	visible := h.d.Visible(p)
	out := make([]byte, 0, 256*len(visible)+32)
	out = append(out, `{"capabilities":[`...)
	for i, l := range visible {
		if i > 0 {
			out = append(out, ',')
		}
		b, ok := h.listed[l.Entry]
		if !ok {
			b = renderListed(l.Entry)
		}
		out = append(out, b[:len(b)-1]...)
		out = append(out, `,"risk":`...)
		out = strconv.AppendQuote(out, string(l.Risk))
		out = append(out, '}')
	}
	out = append(out, "]}"...)
	writePrivate(w, out)
}

// ServeOpenAPI answers GET /api/v1/openapi.json for p: an OpenAPI 3.1
// document of the capabilities p may call.
func (h *Handler) ServeOpenAPI(w http.ResponseWriter, r *http.Request, p dispatch.Principal) {
	if !h.preflight(w, r, allowGet, isGet(r)) {
		return
	}
	b, err := h.document(h.d.Visible(p))
	if err != nil {
		ref := correlationID()
		h.log.LogAttrs(r.Context(), slog.LevelError, "rest: the OpenAPI document could not be made",
			slog.String("correlation_id", ref), slog.String("error", err.Error()))
		d := problem.New(http.StatusInternalServerError, "the OpenAPI document could not be made (reference "+ref+")")
		d.Reference = ref
		problem.Write(w, d)
		return
	}
	writePrivate(w, b)
}

func writePrivate(w http.ResponseWriter, body []byte) {
	hd := w.Header()
	hd["Content-Type"] = jsonType
	hd["Cache-Control"] = privateCache
	hd["Vary"] = varyAuth
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body) // a failed write means the client left
}

// listedJSON is a capability as the list shows it, but for its risk.
type listedJSON struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	Kind         string          `json:"kind"`
	Pack         string          `json:"pack"`
	Destructive  bool            `json:"destructive"`
	OwnerGuarded bool            `json:"owner_guarded"`
	Path         string          `json:"path"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

func renderListed(e *registry.Entry) []byte {
	b, err := json.Marshal(listedJSON{
		Name: e.Name, Description: e.Description, Kind: e.Kind.String(), Pack: e.Pack,
		Destructive: e.Destructive, OwnerGuarded: e.OwnerGuarded, Path: CapabilitiesPath + "/" + e.Name,
		InputSchema: e.InputSchema, OutputSchema: e.OutputSchema,
	})
	if err != nil {
		// The registry has parsed both schemas, so they marshal; a
		// capability that somehow does not is listed by name alone.
		b, _ = json.Marshal(listedJSON{Name: e.Name, Kind: e.Kind.String(), Pack: e.Pack, Path: CapabilitiesPath + "/" + e.Name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return b
}

// ServeCall answers POST /api/v1/capabilities/{name} for p: the body is
// the arguments, the answer the result or a problem.
func (h *Handler) ServeCall(w http.ResponseWriter, r *http.Request, p dispatch.Principal, name string) {
	if !h.preflight(w, r, allowPost, r.Method == http.MethodPost) {
		return
	}
	ct, hasCT := r.Header["Content-Type"]
	if hasCT && !isJSON(ct[0]) {
		problem.Write(w, problem.New(http.StatusUnsupportedMediaType, "the body must be application/json: the capability's arguments as a JSON object"))
		return
	}
	key, msg := idempotencyKey(r.Header)
	if msg != "" {
		problem.Write(w, problem.New(http.StatusBadRequest, msg))
		return
	}
	body, status, msg := h.readBody(r)
	if status != 0 {
		problem.Write(w, problem.New(status, msg))
		return
	}
	args := bytes.TrimSpace(body)
	if len(args) > 0 {
		if !hasCT {
			problem.Write(w, problem.New(http.StatusUnsupportedMediaType, "a body needs Content-Type: application/json"))
			return
		}
		if !json.Valid(args) {
			problem.Write(w, problem.New(http.StatusBadRequest, "the body is not valid JSON; it must be the capability's arguments as a JSON object"))
			return
		}
	}

	ctx, cancel := r.Context(), context.CancelFunc(nil)
	if h.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, h.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	ctx = dispatch.WithOrigin(ctx, dispatch.Origin{Protocol: Protocol, ProtocolVersion: ProtocolVersion, RequestID: requestID(r.Header)})
	if key != "" {
		ctx = dispatch.WithIdempotencyKey(ctx, key)
	}
	c := call{h: h, w: w, r: r, p: p, name: name}
	if h.tracer != nil {
		var end func()
		ctx, end = c.startSpan(ctx)
		defer end()
	}
	c.ctx = ctx
	res, err := c.invokeGate(args)
	if err != nil {
		c.failed(err)
		return
	}
	c.succeeded(res)
}

// isJSON reports whether the media type ct is JSON: application/json, or
// a structured type of it (application/…+json).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// readBody reads the whole body up to the limit. A non-zero status says
// why it could not.
func (h *Handler) readBody(r *http.Request) ([]byte, int, string) {
	if r.ContentLength > h.maxBody {
		return nil, http.StatusRequestEntityTooLarge, h.tooLarge()
	}
	if r.Body == nil {
		return nil, 0, ""
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, h.maxBody+1))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, http.StatusRequestEntityTooLarge, h.tooLarge()
		case errors.As(err, &ne) && ne.Timeout():
			return nil, http.StatusRequestTimeout, "the body did not arrive in time"
		}
		return nil, http.StatusBadRequest, "the body could not be read"
	}
	if int64(len(b)) > h.maxBody {
		return nil, http.StatusRequestEntityTooLarge, h.tooLarge()
	}
	return b, 0, ""
}

func (h *Handler) tooLarge() string {
	return "the body exceeds " + strconv.FormatInt(h.maxBody, 10) + " bytes (http.max_body_bytes)"
}

// requestID is the client's X-Request-Id when it is one the audit trail
// can keep: 1 to 128 printable ASCII characters. Anything else is no id.
func requestID(hd http.Header) string {
	v := hd["X-Request-Id"]
	if len(v) != 1 || len(v[0]) == 0 || len(v[0]) > maxRequestIDBytes {
		return ""
	}
	for i := 0; i < len(v[0]); i++ {
		if c := v[0][i]; c < '!' || c > '~' {
			return ""
		}
	}
	return v[0]
}

// clip cuts s to at most n bytes, on a character boundary, marking the
// cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
