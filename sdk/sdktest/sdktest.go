// Package sdktest runs a plugin in a test exactly as the host runs it, in
// process and without a built binary: the SDK's own plugin server and the
// host's own client of the Calls stream, connected over gRPC, the host's
// services served back over the go-plugin broker, and every call through
// the host's real gate and registry:
//
//  1. pack: the capability's pack is on (every pack is, unless
//     Host.DisabledPacks turns it off);
//  2. user binding: an action needs a principal bound to a user;
//  3. scope: a read-scope principal calls only read capabilities;
//  4. permission: the principal's role holds the capability's permission
//     (Host.Roles; by default every role holds every permission);
//  5. arguments: they are checked against the input schema;
//  6. ownership: an owner-guarded capability's target belongs to the
//     principal's user (admin scope excepted), decided by the plugin's
//     Owner in the same call.
//
// The result is then checked against the output schema. A refusal is a
// *sdk.RefusedError naming its step, a failure the agent can act on an
// *sdk.Error (the gate's own argument check included), so a plugin's tests
// assert every refusal of their own capabilities:
//
//	_, err := c.Invoke(ctx, "notes.delete", bob, map[string]any{"id": alicesNote})
//	if sdk.RefusedAt(err) != sdk.StepOwnership { ... }
//
// Nested calls a handler makes (sdk.Call.Invoke) pass the same gate as its
// caller.
package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
)

// Client calls a plugin started by Start or added to a Host.
type Client struct {
	rpc   capgatev1.PluginServiceClient
	calls *pluginwire.CallStream
	host  *Host
	name  string // the plugin's name, as the host knows it

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

// Start serves p, configures it with config (marshalled to JSON; nil means
// no config block) and a fresh data directory, starts it, and returns a
// client. Everything stops when the test ends. A configuration or start
// error fails the test; use StartErr to test one. For plugins that use
// each other through the host (a provider and an indexer), or to set the
// gate's policy, use a Host.
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

// Describe returns the plugin's self-description, as the host reads it.
func (c *Client) Describe(ctx context.Context) (*capgatev1.DescribeResponse, error) {
	return c.rpc.Describe(ctx, &capgatev1.DescribeRequest{})
}

// Invoke calls a capability as pr through the gate, as the host does for
// an agent. args is marshalled to JSON (a json.RawMessage or []byte is
// sent as is). A refusal is a *sdk.RefusedError; a failure for the agent
// an *sdk.Error; a capability no added plugin provides wraps
// sdk.ErrUnknownCapability; anything else is an internal failure (the
// plugin's error, a result that breaks the output schema). Invoke works
// only on a started Host.
func (c *Client) Invoke(ctx context.Context, capability string, pr sdk.Principal, args any) (json.RawMessage, error) {
	raw, err := encode(args)
	if err != nil {
		return nil, err
	}
	return c.host.invoke(ctx, pr, capability, raw, 0)
}

// Call is Invoke for tests that expect success: it decodes the result into
// Out and fails the test on any error.
func Call[Out any](t testing.TB, c *Client, capability string, pr sdk.Principal, args any) Out {
	t.Helper()
	var out Out
	raw, err := c.Invoke(context.Background(), capability, pr, args)
	if err != nil {
		t.Fatalf("%s: %v", capability, err)
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
