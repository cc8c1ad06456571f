// Package pluginwire is the one binding of the capgate gRPC contract to
// go-plugin, shared by the host, the SDK and the SDK's test harness: the
// handshake, the gRPC options of both ends of the plugin link, the
// go-plugin glue, the client of the Calls stream and the translation of a
// plugin's answers into the gate's terms. Both ends import it, so they
// cannot disagree on a window size or a message limit.
package pluginwire

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Handshake is the go-plugin handshake of the contract.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  capgatev1.ProtocolVersion,
	MagicCookieKey:   capgatev1.MagicCookieKey,
	MagicCookieValue: capgatev1.MagicCookieValue,
}

// windowSize is the fixed HTTP/2 flow-control window of the plugin link.
// Fixing it on both ends turns off gRPC's bandwidth estimator, which keeps
// sending pings while calls flow; a local socket has no bandwidth to
// discover.
const windowSize = 1 << 20

// MaxRequestBytes bounds one message from the host to a plugin. The host's
// own limit on a request body (at most 64 MiB) bounds a call's arguments
// first; gRPC's default of 4 MiB would end the whole call stream on a
// larger one.
const MaxRequestBytes = 80 << 20

// MessageOverhead is room for what a response carries besides its result:
// its framing and the spans of a traced call.
const MessageOverhead = 64<<10 + MaxCallSpansBytes

// Bounds on the spans a plugin sends back with one traced call
// (CallsResponse.trace_spans). The SDK keeps within them; the host drops
// what does not.
const (
	// MaxCallSpansBytes bounds the encoded spans of one call.
	MaxCallSpansBytes = 64 << 10
	// MaxCallSpans bounds how many spans one call sends.
	MaxCallSpans = 128
)

// ServerOptions are the plugin end's gRPC server options.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
	}
}

// DialOptions are the host end's client options. A message the plugin sends
// may carry a result of up to maxResult bytes plus its framing; a larger
// one ends the call stream (gRPC refuses it).
func DialOptions(maxResult int) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxResult + MessageOverhead)),
	}
}

// Server is a PluginService implementation that also needs the broker, to
// reach the host's services.
type Server interface {
	capgatev1.PluginServiceServer
	SetBroker(*plugin.GRPCBroker)
}

// Plugin is the go-plugin glue. Impl is set on the plugin's end; the host's
// end dispenses a *Client.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Server
}

// Client is what the host's end of the plugin dispenses.
type Client struct {
	capgatev1.PluginServiceClient
	Broker *plugin.GRPCBroker
}

// GRPCServer registers the plugin's service.
func (p *Plugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("pluginwire: no PluginService to serve")
	}
	p.Impl.SetBroker(b)
	capgatev1.RegisterPluginServiceServer(s, p.Impl)
	return nil
}

// GRPCClient returns a client of the plugin's service.
func (p *Plugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{PluginServiceClient: capgatev1.NewPluginServiceClient(c), Broker: b}, nil
}

// PluginSet is the go-plugin plugin set of the contract.
func PluginSet(impl Server) plugin.PluginSet {
	return plugin.PluginSet{capgatev1.PluginName: &Plugin{Impl: impl}}
}
