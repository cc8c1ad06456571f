// Package pluginwire binds the capgate gRPC contract to go-plugin for the
// SDK and its test harness. The host has its own binding: it must not import
// the SDK's internals, and the SDK must not import the host.
package pluginwire

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Handshake is the go-plugin handshake of contract version 1.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  capgatev1.ProtocolVersion,
	MagicCookieKey:   capgatev1.MagicCookieKey,
	MagicCookieValue: capgatev1.MagicCookieValue,
}

// Server is a PluginService implementation that also needs the broker, to
// reach the host's services.
type Server interface {
	capgatev1.PluginServiceServer
	SetBroker(*plugin.GRPCBroker)
}

// Plugin is the go-plugin glue. Impl is set on the plugin side; the client
// side (used by sdktest) returns a Client.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Server
}

// Client is what the client side of the plugin dispenses.
type Client struct {
	capgatev1.PluginServiceClient
	Broker *plugin.GRPCBroker
}

// GRPCServer registers the plugin's service.
func (p *Plugin) GRPCServer(b *plugin.GRPCBroker, s *grpc.Server) error {
	p.Impl.SetBroker(b)
	capgatev1.RegisterPluginServiceServer(s, p.Impl)
	return nil
}

// GRPCClient returns a client of the plugin's service.
func (p *Plugin) GRPCClient(_ context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{PluginServiceClient: capgatev1.NewPluginServiceClient(c), Broker: b}, nil
}
