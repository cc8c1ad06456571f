package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/host/internal/events"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// windowSize is the fixed HTTP/2 flow-control window of the plugin link.
// Fixing it (on both ends: the SDK sets the same) turns off gRPC's
// bandwidth estimator, which keeps sending pings while calls flow; a local
// socket has no bandwidth to discover.
const windowSize = 1 << 20

var grpcDialOptions = []grpc.DialOption{
	grpc.WithInitialWindowSize(windowSize),
	grpc.WithInitialConnWindowSize(windowSize),
}

// grpcPlugin is the host side of the go-plugin binding.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

type wireClient struct {
	rpc    capgatev1.PluginServiceClient
	broker *plugin.GRPCBroker
}

func (grpcPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("the host does not serve plugins")
}

func (grpcPlugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &wireClient{rpc: capgatev1.NewPluginServiceClient(c), broker: b}, nil
}

// hostService is what plugins may call back. It has no call-bound methods
// yet; those (events, nested invocations) take the InvokeRequest's call_id.
type hostService struct {
	capgatev1.UnimplementedHostServiceServer
	plugin string     // the plugin's name, for the log
	bus    events.Bus // nil: publishing is refused
	log    *slog.Logger
}

// Publish validates the plugin's event and puts it on the bus.
func (h hostService) Publish(ctx context.Context, req *capgatev1.PublishRequest) (*capgatev1.PublishResponse, error) {
	if h.bus == nil {
		return nil, status.Error(codes.Unavailable, "this host has no event bus")
	}
	ev := events.Event{Type: req.Type, Entity: req.Entity, ID: req.Id, UserID: req.UserId}
	if len(req.Data) > 0 {
		ev.Data = json.RawMessage(req.Data)
	}
	if err := ev.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cursor, err := h.bus.Publish(ctx, ev)
	switch {
	case errors.Is(err, events.ErrInvalidEvent):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		h.log.Warn("publishing a plugin's event failed", "plugin", h.plugin, "type", ev.Type, "err", err)
		return nil, status.Errorf(codes.Unavailable, "event bus: %v", err)
	}
	return &capgatev1.PublishResponse{Cursor: cursor}, nil
}

func (hostService) Ping(context.Context, *capgatev1.PingRequest) (*capgatev1.PingResponse, error) {
	return &capgatev1.PingResponse{}, nil
}

// statusMessage returns the text of a gRPC status without the
// "rpc error: code = ... desc =" framing, which says nothing to an operator.
func statusMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

// explainStart adds the likely cause to go-plugin's start errors.
func explainStart(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return errors.New("its SHA-256 does not match the configured sha256 (the binary changed; verify it and update the digest)")
	case strings.Contains(msg, "Incompatible API version"):
		return errors.New("it speaks an incompatible plugin protocol version (rebuild it against this capgate's sdk)")
	case strings.Contains(msg, "exited before we could connect") || strings.Contains(msg, "plugin exited") ||
		strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return errors.New("it exited before the handshake (is it a capgate plugin built with sdk.Serve? see its log lines above)")
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return errors.New("it wrote something other than the go-plugin handshake to stdout (is it a capgate plugin built with sdk.Serve?)")
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return errors.New("it did not complete the handshake in time")
	}
	return err
}
