package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/clientip"
	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/internal/dispatch"
)

// Routes the server answers.
const (
	MCPPath    = "/api/v1/mcp"
	HealthPath = "/healthz"
	LivePath   = "/livez"
)

// Defaults for zero Options fields.
const (
	DefaultRequestTimeout  = 30 * time.Second
	DefaultShutdownTimeout = 15 * time.Second
	DefaultMaxInFlight     = 1024
	// maxHeaderTimeout caps the time to receive request headers, however
	// long the request timeout: headers are small, and a trickle of them is
	// the cheapest way to hold a connection.
	maxHeaderTimeout = 10 * time.Second
	// writeGrace is how long after the handler's deadline a response may
	// still be written: the handler answers a timed-out call with a result,
	// and that answer must not be cut off by the write timeout.
	writeGrace  = 5 * time.Second
	idleTimeout = 2 * time.Minute
	maxHeader   = 64 << 10
)

// Authenticator maps an Authorization header value to a principal.
type Authenticator interface {
	Authenticate(authorization string) (dispatch.Principal, bool)
}

// Options configures a Server.
type Options struct {
	// Enabled is the master switch: when false the MCP endpoint answers
	// every request exactly like a path that does not exist.
	Enabled bool
	// Addr is the listen address for Start, e.g. "127.0.0.1:8080".
	Addr string
	// Version is the build version reported to MCP clients.
	Version string
	// Instructions is optional guidance for the model (see mcp.Options).
	Instructions string
	// MaxBodyBytes bounds a request body; 0 means mcp.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxInFlight bounds the MCP requests served at once; one more is
	// answered 503 at once. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// RequestTimeout bounds one request, from reading it to the handler's
	// deadline; 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// ShutdownTimeout bounds the drain when Start's context ends; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// AllowedOrigins lists browser origins that may call the endpoint.
	AllowedOrigins []string
	// Dispatcher is the gate every call goes through. Required.
	Dispatcher *dispatch.Dispatcher
	// Auth authenticates bearer tokens. Required.
	Auth Authenticator
	// OAuth, when set, accepts OAuth access tokens beside Auth's tokens
	// and publishes the protected resource metadata; a request without a
	// token it or Auth accepts then gets 401 with a challenge saying where
	// to get one, not 404. nil: the static tokens alone.
	OAuth OAuth
	// Records makes the platform's catalogue records MCP resources (see
	// mcp.Records); the zero value serves none.
	Records mcp.Records
	// Health reports the plugins' states for GET /healthz (503 while any
	// plugin does not run) and GET /livez (503 once any failed for good);
	// nil reports none (always 200).
	Health HealthFunc
	// Admin serves the admin API (AdminActionsPath) to admin-scope
	// tokens; nil serves none.
	Admin Admin
	// Audit serves the audit trail (AdminAuditPath) to admin-scope
	// tokens; nil serves none.
	Audit AuditReader
	// Approvals serves the held calls (AdminApprovalsPath) to admin-scope
	// tokens, and their decision to roles holding PermissionDecide; nil
	// serves none.
	Approvals Approvals
	// Inventory describes the host (AdminCapabilitiesPath, AdminPacksPath,
	// AdminPluginsPath, AdminTokensPath) to admin-scope tokens; nil serves
	// none.
	Inventory Inventory
	// Logger receives request logs (debug) and failures; nil means
	// slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told of every MCP request (the host's
	// metrics; see mcp.Options.Observe).
	Observe func(mcp.Operation)
	// Tracing, when set, traces every MCP request (see mcp.Tracing); nil
	// traces none.
	Tracing *mcp.Tracing
	// Tasks, when set, offers the MCP tasks extension (see
	// mcp.TaskOptions); nil offers none.
	Tasks *mcp.TaskOptions
	// Answers, when set, brings the answers of clients before MCP
	// 2026-07-28 to the calls that asked them (see mcp.Options.Answers).
	Answers *answers.Relay
	// Console serves the admin console at ConsolePath; nil serves none.
	Console http.Handler
	// ClientIP says which client a request comes from, for the admin
	// API's count of failed tokens; nil counts by the connection's peer.
	ClientIP *clientip.Resolver
}

// Server is capgate's HTTP server: the MCP endpoint and a health check.
type Server struct {
	opts   Options
	echo   *echo.Echo
	http   *http.Server
	log    *slog.Logger
	active atomic.Int64 // MCP requests being served
	// refused counts requests refused as busy since busyLogged (unix
	// nanoseconds), when the last line saying so was written.
	refused    atomic.Int64
	busyLogged atomic.Int64
	// mcp is the MCP adapter, whose background tasks Shutdown stops.
	mcp *mcp.Handler
	// guard throttles failed tokens on the admin API.
	guard *adminGuard
}

// busyLogEvery spaces the lines saying requests were refused as busy: a
// flood must not become a flood of log lines.
const busyLogEvery = 10 * time.Second

// New builds the server. It panics when Dispatcher or Auth is missing, as
// that is a wiring mistake no request could recover from.
func New(opts Options) *Server {
	if opts.Dispatcher == nil || opts.Auth == nil {
		panic("server.New: Options.Dispatcher and Options.Auth are required")
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	s := &Server{opts: opts, log: opts.Logger, guard: newAdminGuard()}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(s.recoverPanics, s.logRequests)

	adapter := mcp.New(opts.Dispatcher, mcp.Options{
		RequestTimeout: opts.RequestTimeout,
		Version:        opts.Version,
		Instructions:   opts.Instructions,
		MaxBodyBytes:   opts.MaxBodyBytes,
		AllowedOrigins: opts.AllowedOrigins,
		Records:        opts.Records,
		Logger:         opts.Logger,
		Observe:        opts.Observe,
		Tracing:        opts.Tracing,
		Tasks:          opts.Tasks,
		Answers:        opts.Answers,
	})
	s.mcp = adapter
	endpoint := s.authenticated(func(c echo.Context, p dispatch.Principal) error {
		// Bounded before the body is read: the requests held at once,
		// and so the memory their bodies take, stay bounded however many
		// clients connect.
		if n := s.active.Add(1); n > int64(s.opts.MaxInFlight) {
			s.active.Add(-1)
			return s.busy(c)
		}
		defer s.active.Add(-1)
		adapter.Serve(c.Response(), c.Request(), p)
		return nil
	})
	// Every method reaches the same handler, so an outsider learns nothing
	// from the status: methods echo routes get Any, and the path's
	// not-found route catches methods it does not (which echo would
	// otherwise answer 405, revealing the path).
	e.Any(MCPPath, endpoint)
	e.RouteNotFound(MCPPath, endpoint)
	e.GET(AdminActionsPath, s.adminOnly(s.getActions))
	e.PUT(AdminActionsPath, s.adminOnly(s.putActions))
	e.GET(AdminAuditPath, s.auditOnly(s.getAudit))
	e.GET(AdminApprovalsPath, s.approvalsOnly(false, s.listApprovals))
	e.GET(adminApprovalPath, s.approvalsOnly(false, s.getApproval))
	e.POST(adminApprovalPath+"/:verb", func(c echo.Context) error {
		if v := c.Param("verb"); v != "approve" && v != "reject" {
			return echo.ErrNotFound
		}
		return s.approvalsOnly(true, s.decideApproval)(c)
	})
	s.routeInventory(e)
	s.routeConsole(e)
	s.routeOAuth(e)
	s.routeREST(e)
	e.GET(HealthPath, s.health)
	e.HEAD(HealthPath, s.health)
	e.GET(LivePath, s.live)
	e.HEAD(LivePath, s.live)
	s.echo = e

	s.http = &http.Server{
		Addr:              opts.Addr,
		Handler:           e,
		ReadHeaderTimeout: min(opts.RequestTimeout, maxHeaderTimeout),
		ReadTimeout:       opts.RequestTimeout,
		WriteTimeout:      opts.RequestTimeout + writeGrace,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeader,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// Handler returns the HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.echo }

// Start listens on Options.Addr and serves until ctx ends, then drains
// in-flight requests for up to Options.ShutdownTimeout.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("listen on %q: %w", s.opts.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends or Shutdown is called. When ctx ends it
// drains in-flight requests for up to Options.ShutdownTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.log.Info("http server listening", slog.String("addr", ln.Addr().String()))
	served := make(chan error, 1)
	go func() { served <- s.http.Serve(ln) }()
	select {
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := s.Shutdown(drain); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests to
// finish, then cancels the MCP tasks still running here and waits for
// their ends to be stored, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.log.Info("http server draining")
	if err := s.http.Shutdown(ctx); err != nil {
		return fmt.Errorf("drain http server: %w", err)
	}
	if err := s.mcp.StopTasks(ctx); err != nil {
		return err
	}
	return nil
}

// principalHandler is a handler that runs only for an authenticated caller.
type principalHandler func(echo.Context, dispatch.Principal) error

// authenticated admits only callers with a known bearer token while the
// endpoint is enabled. Everyone else gets echo's own not-found answer, byte
// for byte, so the endpoint cannot be told from a path that does not exist
// — unless OAuth is on, when a client must be told where to get a token
// (authenticateOAuth). The principal goes to next as an argument rather
// than through the echo context's map, which would allocate on every
// request.
func (s *Server) authenticated(next principalHandler) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.opts.Enabled {
			return echo.ErrNotFound
		}
		authz := c.Request().Header.Get(echo.HeaderAuthorization)
		if s.opts.OAuth != nil {
			return s.authenticateOAuth(c, authz, next)
		}
		if authz == "" {
			return echo.ErrNotFound
		}
		p, ok := s.opts.Auth.Authenticate(authz)
		if !ok {
			return echo.ErrNotFound
		}
		return next(c, p)
	}
}

// busy answers a request over MaxInFlight: 503 with Retry-After, and a
// JSON-RPC error saying why, so a client backs off instead of queuing.
func (s *Server) busy(c echo.Context) error {
	s.noteBusy(c)
	return c.JSONBlob(http.StatusServiceUnavailable, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"server busy: `+
		strconv.Itoa(s.opts.MaxInFlight)+` requests in flight (http.max_in_flight); retry shortly"}}`))
}

// noteBusy sets Retry-After on a request refused as busy, and counts and
// now and then logs such refusals.
func (s *Server) noteBusy(c echo.Context) {
	c.Response().Header().Set("Retry-After", "1")
	n := s.refused.Add(1)
	now := time.Now().UnixNano()
	if last := s.busyLogged.Load(); now-last >= int64(busyLogEvery) && s.busyLogged.CompareAndSwap(last, now) {
		s.refused.Add(-n)
		s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "http: busy, requests refused",
			slog.Int64("refused", n), slog.Int("max_in_flight", s.opts.MaxInFlight))
	}
}

// recoverPanics turns a panic into a logged 500 instead of a dropped
// connection. The answer is echo's generic one: no detail leaves the host.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.LogAttrs(c.Request().Context(), slog.LevelError, "http: handler panicked",
				slog.String("method", c.Request().Method), slog.String("path", c.Request().URL.Path),
				slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			err = echo.ErrInternalServerError
		}()
		return next(c)
	}
}

// logRequests logs each request at debug level. The Authorization header
// is never logged. The check comes first so a server not at debug level
// pays nothing.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			return next(c)
		}
		start := time.Now()
		err := next(c)
		if err != nil {
			// Let echo write the error now so the status logged is the one
			// sent; the error is then spent.
			c.Error(err)
			err = nil
		}
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", c.Response().Status), slog.Int64("bytes", c.Response().Size),
			slog.Duration("duration", time.Since(start)), slog.String("remote", r.RemoteAddr))
		return err
	}
}
