package sdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.opentelemetry.io/otel"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/nodump"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Serve runs the plugin until the host stops it, then runs the OnClose
// functions. Call it from main; started by hand (not by a capgate host) it
// explains that it is a plugin and exits.
func Serve(p *Plugin) {
	// First, before the host hands over any config: a sibling plugin of the
	// same user must not read this one's environment or memory.
	if err := nodump.Set(); err != nil {
		p.logger.Warn("other processes of this user can read this plugin's environment", "err", err)
	}
	srv := newServer(p)
	// The process is the plugin's: instrumentation that takes the global
	// provider (otel.Tracer, libraries' own spans) records into the calls'
	// traces, and outgoing requests carry them on.
	otel.SetTracerProvider(srv.tracing.provider)
	otel.SetTextMapPropagator(w3c)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pluginwire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			capgatev1.ProtocolVersion: pluginwire.PluginSet(srv),
		},
		GRPCServer: newGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: p.name, Output: os.Stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
	if err := p.close(); err != nil {
		p.logger.Error("close plugin", "err", err)
		os.Exit(1)
	}
}

// DefaultMaxResults is Env.MaxResults when the host sets none, as the
// host's own default.
const DefaultMaxResults = 20

// streamWorkers is how many goroutines serve calls of the Calls stream and
// stay alive between them (see workerPool). A call that finds every worker
// busy still gets a goroutine of its own, so the number bounds nothing; it is
// sized for a host under heavy load.
const streamWorkers = 64

// newGRPCServer is go-plugin's server with the plugin link's options (a
// fixed flow-control window, the message limit). Calls themselves run on
// workerPool.
func newGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	return grpc.NewServer(append(opts, pluginwire.ServerOptions()...)...)
}

func (p *Plugin) close() error {
	var errs []error
	for i := len(p.closers) - 1; i >= 0; i-- {
		errs = append(errs, p.closers[i]())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// server implements the PluginService for one Plugin.
type server struct {
	capgatev1.UnimplementedPluginServiceServer
	p         *Plugin
	closeOnce sync.Once
	closeErr  error

	mu         sync.Mutex
	configured bool
	started    bool
	env        Env // as handed to OnConfigure, for OnStart
	broker     *plugin.GRPCBroker
	host       *grpc.ClientConn
	maxResult  int // the host's max_result_bytes; 0: no limit of its own

	workers workerPool // runs the calls of the Calls stream
	tracing *tracing   // records the spans of the calls the host traces
}

// newServer returns the gRPC service of p, for Serve and (through internal/sdkserver)
// package sdktest.
func newServer(p *Plugin) *server { return &server{p: p, tracing: newTracing()} }

func init() {
	sdkserver.NewServer = func(p any) sdkserver.Server { return newServer(p.(*Plugin)) }
}

// Close runs the plugin's OnClose functions once, as Serve does when the
// host stops the plugin; package sdktest calls it when a test ends.
func (s *server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.p.close() })
	return s.closeErr
}

func (s *server) SetBroker(b *plugin.GRPCBroker) { s.broker = b }

func (s *server) Configure(ctx context.Context, req *capgatev1.ConfigureRequest) (*capgatev1.ConfigureResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.configured {
		return nil, status.Error(codes.FailedPrecondition, "plugin is already configured")
	}
	if req.CheckOnly {
		return s.checkConfig(ctx, req)
	}
	if s.broker != nil && req.HostBrokerId != 0 {
		// Dial lazily: the host serves its services on this stream id.
		// Nested calls return results of up to the host's limit.
		conn, err := s.broker.DialWithOptions(req.HostBrokerId,
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(max(int(req.MaxResultBytes), 4<<20)+64<<10)))
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "reach host services: %v", err)
		}
		s.host = conn
		s.p.OnClose(conn.Close)
	}
	env := Env{
		DataDir: req.DataDir, config: req.ConfigJson, read: new(atomic.Bool), Logger: s.p.logger,
		HostVersion: req.HostVersion, MaxResults: int(req.MaxResults),
	}
	if env.MaxResults < 1 {
		env.MaxResults = DefaultMaxResults
	}
	if s.host != nil {
		env.host = s.host
	}
	s.env = env
	s.maxResult = int(min(req.MaxResultBytes, 1<<40))
	if s.p.configure != nil {
		if err := s.p.configure(ctx, env); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	// Strict by default: a block no code read is an operator's mistake
	// (a misspelt plugin, an option of another one) that would otherwise
	// pass in silence.
	if keys := configKeys(req.ConfigJson); len(keys) > 0 && !env.read.Load() {
		return nil, status.Error(codes.InvalidArgument, unreadConfig(keys).Error())
	}
	s.configured = true
	return &capgatev1.ConfigureResponse{}, nil
}

// checkConfig answers a check-only Configure (`capgate validate`): the
// config block is decoded and checked as a real Configure would, and
// nothing is built, opened or dialled. The plugin stays unconfigured, so
// it serves no call and no Start.
func (s *server) checkConfig(ctx context.Context, req *capgatev1.ConfigureRequest) (*capgatev1.ConfigureResponse, error) {
	check, ok := checker(s.p)
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition,
			"plugin %s cannot check its config without configuring itself (it sets OnConfigure rather than using sdk.Configure)", s.p.name)
	}
	env := Env{
		DataDir: req.DataDir, config: req.ConfigJson, read: new(atomic.Bool), Logger: s.p.logger,
		HostVersion: req.HostVersion, MaxResults: int(req.MaxResults),
	}
	if env.MaxResults < 1 {
		env.MaxResults = DefaultMaxResults
	}
	if err := check(ctx, env); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if keys := configKeys(req.ConfigJson); len(keys) > 0 && !env.read.Load() {
		return nil, status.Error(codes.InvalidArgument, unreadConfig(keys).Error())
	}
	return &capgatev1.ConfigureResponse{}, nil
}

func (s *server) Start(ctx context.Context, req *capgatev1.StartRequest) (_ *capgatev1.StartResponse, err error) {
	s.mu.Lock()
	configured, started := s.configured, s.started
	// Only a Start that will run OnStart counts: one refused as too early
	// must not make the real one look like a repeat.
	s.started = configured
	env := s.env
	s.mu.Unlock()
	switch {
	case !configured:
		return nil, status.Error(codes.FailedPrecondition, "plugin is not configured yet")
	case started:
		return nil, status.Error(codes.FailedPrecondition, "plugin is already started")
	}
	// Not under s.mu: OnStart may reach the plugin's own entities through
	// the host, and calls must be served meanwhile.
	if s.p.start != nil {
		defer s.recoverInto("start", &err)
		if err := s.p.start(ctx, env, Start{Rebuild: req.Rebuild}); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
	}
	return &capgatev1.StartResponse{}, nil
}

func (s *server) Describe(context.Context, *capgatev1.DescribeRequest) (*capgatev1.DescribeResponse, error) {
	caps := make([]*capgatev1.Capability, len(s.p.tools))
	for i, t := range s.p.tools {
		caps[i] = t.desc
	}
	_, checks := checker(s.p)
	return &capgatev1.DescribeResponse{Name: s.p.name, Version: s.p.version, Capabilities: caps, Entities: s.p.entities,
		ChecksConfig: checks, ChecksOwnerOnly: true,
		Resources: s.p.resources, ResourceTemplates: s.p.resourceTemplates, Prompts: s.p.promptDescs()}, nil
}

func (s *server) ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.configured {
		return status.Error(codes.FailedPrecondition, "plugin is not configured yet")
	}
	return nil
}

func (s *server) lookup(name string) (*tool, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	t, ok := s.p.byName[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "plugin %s has no capability %q", s.p.name, name)
	}
	return t, nil
}

// invoke runs one call: the ownership step when the host asks for it, then
// the handler, on arguments decoded once.
func (s *server) invoke(ctx context.Context, req *capgatev1.InvokeRequest, n *notifier) (resp *capgatev1.InvokeResponse, err error) {
	t, err := s.lookup(req.Capability)
	if err != nil {
		return nil, err
	}
	defer s.recoverInto(req.Capability, &err)
	pr := req.GetPrincipal()
	call := Call{ID: req.CallId, Principal: Principal{Role: pr.GetRole(), Scope: Scope(pr.GetScope()), UserID: pr.GetUserId()},
		notices: n, asks: newAsking(req)}
	if s.host != nil {
		call.host = s.host
	}
	out, refused, err := t.invoke(ctx, call, req.Arguments, req.OwnerCheck)
	switch {
	case refused:
		return &capgatev1.InvokeResponse{Refusal: &capgatev1.Refusal{Step: string(StepOwnership),
			Reason: dispatch.OwnershipReason}}, nil
	case err != nil:
		if ir, aerr := call.asks.inputRequired(err); ir != nil || aerr != nil {
			if aerr != nil {
				return nil, s.internal(req.Capability, req.CallId, aerr)
			}
			return &capgatev1.InvokeResponse{InputRequired: ir}, nil
		}
		if u := (*unreachable)(nil); errors.As(err, &u) {
			s.p.logger.Warn("the database is unreachable", "capability", req.Capability, "call_id", req.CallId, "err", u.cause)
		}
		if te, ok := asWireError(err); ok {
			return &capgatev1.InvokeResponse{Error: te}, nil
		}
		return nil, s.internal(req.Capability, req.CallId, err)
	}
	resp = &capgatev1.InvokeResponse{Result: out.result, Content: out.content}
	// The result and its blocks are one answer, under one limit.
	if n := len(out.result) + contentBytes(out.content); s.maxResult > 0 && n > s.maxResult {
		// Sent, it would end the host's call stream for every caller; the
		// agent can ask for less.
		s.p.logger.Warn("result over the host's limit", "capability", req.Capability, "call_id", req.CallId,
			"bytes", n, "limit", s.maxResult)
		return &capgatev1.InvokeResponse{Error: &capgatev1.ToolError{Code: capgatev1.ToolError_CODE_INVALID_INPUT,
			Message: resultTooLarge(req.Capability, n, s.maxResult)}}, nil
	}
	return resp, nil
}

// contentBytes is the size of blocks on the wire.
func contentBytes(blocks []*capgatev1.Content) int {
	n := 0
	for _, c := range blocks {
		n += proto.Size(c)
	}
	return n
}

// internal keeps a handler's own error text in the plugin's log and gives
// the host a status it can log; the agent only learns that the call failed.
func (s *server) internal(capability, callID string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	s.p.logger.Error("capability failed", "capability", capability, "call_id", callID, "err", err)
	return status.Errorf(codes.Internal, "%s failed: %v", capability, err)
}

// resultTooLarge is what the agent reads for a result over the host's
// limit: what happened, and what to do about it.
func resultTooLarge(capability string, n, limit int) string {
	return fmt.Sprintf("the result of %s is %d bytes, more than this server's limit of %d bytes: ask for less (a smaller limit or a narrower request)", capability, n, limit)
}

// recoverInto turns a handler panic into an internal error: one bad call
// must not take the plugin, and every other caller's work, down with it.
func (s *server) recoverInto(capability string, err *error) {
	if r := recover(); r != nil {
		s.p.logger.Error("capability panicked", "capability", capability, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "%s failed", capability)
	}
}
