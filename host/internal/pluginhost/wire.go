package pluginhost

import (
	"context"
	"errors"
	"strings"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// windowSize is the fixed HTTP/2 flow-control window of the plugin link.
// Fixing it (on both ends: the SDK sets the same) turns off gRPC's
// bandwidth estimator, which keeps sending pings while calls flow; a local
// socket has no bandwidth to discover.
const windowSize = 1 << 20

// dialOptions are the plugin link's client options. A message the plugin
// sends may carry a result of up to maxResult bytes plus its framing; a
// larger one ends the call stream (gRPC refuses it), and the supervisor
// restarts the plugin that sent it.
func dialOptions(maxResult int) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResult + messageOverhead)),
	}
}

// messageOverhead is room for what a response carries besides its result.
const messageOverhead = 64 << 10

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
