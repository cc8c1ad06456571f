// Package sdktest runs a plugin's capabilities through the real gRPC
// contract, in-process: the same handshake-free gRPC server and client the
// host uses, connected over a local socket, with the host's services served
// back over the go-plugin broker. A plugin's tests need no built binary.
//
// The harness is not the gate: it does not check packs, scopes, permissions
// or ownership, and it does not validate arguments against the input schema.
// It exercises what the plugin itself does with a call.
package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/internal/pluginwire"
)

// ToolError is a failure the plugin reported as a result for the agent.
type ToolError struct {
	Code    capgatev1.ToolError_Code
	Message string
}

func (e *ToolError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Client calls a plugin started by Start.
type Client struct {
	rpc  capgatev1.PluginServiceClient
	host *hostService
}

// Event is an event the plugin published, as the host received it.
type Event struct {
	Cursor uint64
	Type   string
	Entity string
	ID     string
	UserID string
	Data   json.RawMessage
}

// Published returns the events the plugin has published so far, oldest
// first, including those published while it was configured. The harness
// records them without the host's validation.
func (c *Client) Published() []Event {
	c.host.mu.Lock()
	defer c.host.mu.Unlock()
	return slices.Clone(c.host.events)
}

// Start serves p over gRPC, configures it with config (marshalled to JSON;
// nil means no config block) and a fresh data directory, and returns a
// client. Everything stops when the test ends. A configuration error fails
// the test; use StartErr to test one.
func Start(t testing.TB, p *sdk.Plugin, config any) *Client {
	t.Helper()
	c, err := StartErr(t, p, config)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	return c
}

// StartErr is Start that returns the configuration error instead of failing.
func StartErr(t testing.TB, p *sdk.Plugin, config any) (*Client, error) {
	return StartIn(t, p, config, t.TempDir())
}

// StartIn is StartErr with a chosen data directory, to test what a plugin
// does on its second start over the same data.
func StartIn(t testing.TB, p *sdk.Plugin, config any, dataDir string) (*Client, error) {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		capgatev1.PluginName: &pluginwire.Plugin{Impl: sdk.NewServer(p)},
	})
	// Closing the client asks the server to shut down, as the host does
	// when it stops a plugin; stopping the server again would race it.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(capgatev1.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense: %w", err)
	}
	wc := raw.(*pluginwire.Client)

	// Serve the host's services on the broker, as the host does.
	hostID := wc.Broker.NextId()
	host := &hostService{}
	go wc.Broker.AcceptAndServe(hostID, func(opts []grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(opts...)
		capgatev1.RegisterHostServiceServer(s, host)
		return s
	})

	cfg := []byte("{}")
	if config != nil {
		if cfg, err = json.Marshal(config); err != nil {
			return nil, fmt.Errorf("marshal config: %w", err)
		}
	}
	_, err = wc.Configure(context.Background(), &capgatev1.ConfigureRequest{
		ConfigJson: cfg, DataDir: dataDir, HostBrokerId: hostID, HostVersion: "sdktest",
	})
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	return &Client{rpc: wc.PluginServiceClient, host: host}, nil
}

type hostService struct {
	capgatev1.UnimplementedHostServiceServer
	mu     sync.Mutex
	events []Event
}

func (h *hostService) Publish(_ context.Context, req *capgatev1.PublishRequest) (*capgatev1.PublishResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := Event{Cursor: uint64(len(h.events)) + 1, Type: req.Type, Entity: req.Entity, ID: req.Id, UserID: req.UserId}
	if len(req.Data) > 0 {
		ev.Data = json.RawMessage(slices.Clone(req.Data))
	}
	h.events = append(h.events, ev)
	return &capgatev1.PublishResponse{Cursor: ev.Cursor}, nil
}

func (*hostService) Ping(context.Context, *capgatev1.PingRequest) (*capgatev1.PingResponse, error) {
	return &capgatev1.PingResponse{}, nil
}

// Describe returns the plugin's self-description.
func (c *Client) Describe(ctx context.Context) (*capgatev1.DescribeResponse, error) {
	return c.rpc.Describe(ctx, &capgatev1.DescribeRequest{})
}

// Invoke calls a capability as pr. args is marshalled to JSON (a
// json.RawMessage or []byte is sent as is). A failure the plugin reports for
// the agent is returned as a *ToolError; err is for transport and internal
// failures.
func (c *Client) Invoke(ctx context.Context, capability string, pr sdk.Principal, args any) (json.RawMessage, *ToolError, error) {
	raw, err := encode(args)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.rpc.Invoke(ctx, &capgatev1.InvokeRequest{
		Capability: capability,
		Arguments:  raw,
		Principal:  &capgatev1.Principal{Role: pr.Role, Scope: pr.Scope, UserId: pr.UserID},
		CallId:     "sdktest",
	})
	if err != nil {
		return nil, nil, err
	}
	if e := resp.GetError(); e != nil {
		return nil, &ToolError{Code: e.Code, Message: e.Message}, nil
	}
	return resp.Result, nil, nil
}

// ResolveOwner asks who owns the target of an owner-guarded capability.
func (c *Client) ResolveOwner(ctx context.Context, capability string, args any) (string, *ToolError, error) {
	raw, err := encode(args)
	if err != nil {
		return "", nil, err
	}
	resp, err := c.rpc.ResolveOwner(ctx, &capgatev1.ResolveOwnerRequest{Capability: capability, Arguments: raw})
	if err != nil {
		return "", nil, err
	}
	if e := resp.GetError(); e != nil {
		return "", &ToolError{Code: e.Code, Message: e.Message}, nil
	}
	return resp.OwnerUserId, nil, nil
}

// Call is Invoke for tests that expect success: it decodes the result into
// Out and fails the test on any error.
func Call[Out any](t testing.TB, c *Client, capability string, pr sdk.Principal, args any) Out {
	t.Helper()
	var out Out
	raw, te, err := c.Invoke(context.Background(), capability, pr, args)
	if err != nil {
		t.Fatalf("%s: %v", capability, err)
	}
	if te != nil {
		t.Fatalf("%s: %v", capability, te)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: decode result %s: %v", capability, raw, err)
	}
	return out
}

func encode(args any) ([]byte, error) {
	switch a := args.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		return a, nil
	case []byte:
		return a, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("marshal arguments: %w", err)
	}
	return b, nil
}
