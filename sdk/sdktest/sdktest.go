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
	"sync"
	"testing"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// ToolError is a failure the plugin reported as a result for the agent.
type ToolError struct {
	Code    capgatev1.ToolError_Code
	Message string
}

func (e *ToolError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Client calls a plugin started by Start or added to a Host.
type Client struct {
	rpc  capgatev1.PluginServiceClient
	host *Host
	name string // the plugin's name, as the host knows it

	stop     func() error
	stopOnce sync.Once
	stopErr  error
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
	var out []Event
	for _, e := range c.host.events {
		if e.publisher == c.name {
			out = append(out, e.Event)
		}
	}
	return out
}

// Start serves p over gRPC, configures it with config (marshalled to JSON;
// nil means no config block) and a fresh data directory, starts it, and
// returns a client. Everything stops when the test ends. A configuration
// or start error fails the test; use StartErr to test one. For plugins that
// use each other through the host (a provider and an indexer), use a Host.
func Start(t testing.TB, p *sdk.Plugin, config any) *Client {
	t.Helper()
	c, err := StartErr(t, p, config)
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	return c
}

// StartErr is Start that returns the configuration or start error instead of
// failing.
func StartErr(t testing.TB, p *sdk.Plugin, config any) (*Client, error) {
	return StartIn(t, p, config, t.TempDir())
}

// StartIn is StartErr with a chosen data directory, to test what a plugin
// does on its second start over the same data.
func StartIn(t testing.TB, p *sdk.Plugin, config any, dataDir string) (*Client, error) {
	t.Helper()
	h := NewHost(t)
	c, err := h.Add(p, config, dataDir)
	if err != nil {
		return nil, err
	}
	if err := h.Start(context.Background(), false); err != nil {
		return nil, err
	}
	return c, nil
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
	// While the call runs, the plugin may call other capabilities as pr.
	id := c.host.beginCall(pr)
	defer c.host.endCall(id)
	resp, err := c.rpc.Invoke(ctx, &capgatev1.InvokeRequest{
		Capability: capability,
		Arguments:  raw,
		Principal:  &capgatev1.Principal{Role: pr.Role, Scope: pr.Scope, UserId: pr.UserID},
		CallId:     id,
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
