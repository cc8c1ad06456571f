package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// bearer adds the token to every request the SDK client sends and records
// what went over the wire.
type bearer struct {
	token string
	next  http.RoundTripper

	mu    sync.Mutex
	calls []wireCall
}

type wireCall struct {
	method, mcpMethod, version string
	status                     int
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.next.RoundTrip(r)
	if err == nil {
		b.mu.Lock()
		b.calls = append(b.calls, wireCall{r.Method, r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Protocol-Version"), resp.StatusCode})
		b.mu.Unlock()
	}
	return resp, err
}

// TestOfficialSDKClient runs a whole session with the official Go SDK
// client at every protocol version: connect (server/discover or
// initialize), list tools, call a tool, and read a refusal, a tool error and
// a missing resource the way an agent would.
func TestOfficialSDKClient(t *testing.T) {
	cases := []struct {
		name      string
		requested string // "" lets the client pick (it prefers 2026-07-28)
		want      string
	}{
		{"client default", "", mcp.Version20260728},
		{"2026-07-28", mcp.Version20260728, mcp.Version20260728},
		{"2025-11-25", mcp.Version20251125, mcp.Version20251125},
		{"2025-06-18", mcp.Version20250618, mcp.Version20250618},
		{"2025-03-26", mcp.Version20250326, mcp.Version20250326},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			ts := httptest.NewServer(f.srv.Handler())
			defer ts.Close()
			rt := &bearer{token: aliceToken, next: http.DefaultTransport}
			client := sdk.NewClient(&sdk.Implementation{Name: "capgate-test", Version: "0.0.1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			session, err := client.Connect(ctx, &sdk.StreamableClientTransport{
				Endpoint:   ts.URL + MCPPath,
				HTTPClient: &http.Client{Transport: rt},
				MaxRetries: -1,
			}, &sdk.ClientSessionOptions{ProtocolVersion: tc.requested})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer session.Close()

			init := session.InitializeResult()
			if init.ProtocolVersion != tc.want {
				t.Fatalf("negotiated %s, want %s", init.ProtocolVersion, tc.want)
			}
			if init.ServerInfo == nil || init.ServerInfo.Name != "capgate" || init.ServerInfo.Version != "9.9.9" {
				t.Fatalf("serverInfo = %+v", init.ServerInfo)
			}

			tools, err := session.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			var want []string
			for _, e := range f.platform.Dispatcher.Visible(mcptest.Alice) {
				want = append(want, e.Name)
			}
			if !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v", names, want)
			}

			res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: mcptest.BookingGet, Arguments: map[string]any{"id": "b-1"}})
			if err != nil {
				t.Fatalf("tools/call: %v", err)
			}
			if res.IsError || len(res.Content) != 1 {
				t.Fatalf("result = %+v", res)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			var booking map[string]any
			if err := json.Unmarshal([]byte(text), &booking); err != nil || booking["title"] != "Dentist" {
				t.Fatalf("text content = %q", text)
			}
			if tc.want != mcp.Version20250326 {
				got, _ := json.Marshal(res.StructuredContent)
				if err := json.Unmarshal(got, &booking); err != nil || booking["owner"] != mcptest.Alice.UserID {
					t.Fatalf("structuredContent = %s", got)
				}
			}

			// Bob's booking: the gate refuses at the ownership step. The
			// SDK client reads any -32003 as its own "client is closing"
			// sentinel, so it reports ErrConnectionClosed and keeps only the
			// message: the reason still reaches the agent, the data does not
			// (the wire shape is checked in the mcp package's tests), and the
			// session carries on.
			_, err = session.CallTool(ctx, &sdk.CallToolParams{Name: mcptest.Cancel, Arguments: map[string]any{"id": "b-2"}})
			if err == nil || !strings.Contains(err.Error(), "forbidden: the target does not belong to this token's user") {
				t.Fatalf("refusal = %v, want the gate's reason", err)
			}
			var rpcErr *jsonrpc.Error

			// A missing booking is the agent's to handle: an isError result.
			res, err = session.CallTool(ctx, &sdk.CallToolParams{Name: mcptest.BookingGet, Arguments: map[string]any{"id": "b-9"}})
			if err != nil || !res.IsError {
				t.Fatalf("missing booking: %+v, %v", res, err)
			}

			_, err = session.ReadResource(ctx, &sdk.ReadResourceParams{URI: "capgate://nothing"})
			if !errors.As(err, &rpcErr) || (rpcErr.Code != -32002 && rpcErr.Code != -32602) {
				t.Fatalf("resources/read = %v", err)
			}
			if tc.want != mcp.Version20260728 {
				if err := session.Ping(ctx, nil); err != nil {
					t.Fatalf("ping: %v", err)
				}
			}

			rt.mu.Lock()
			defer rt.mu.Unlock()
			for _, c := range rt.calls {
				switch {
				case c.method == http.MethodGet && c.status == http.StatusMethodNotAllowed:
					// The standalone stream of the handshake revisions;
					// a stateless server declines it.
				case c.method == http.MethodPost && (c.status == 200 || c.status == 202):
				case c.method == http.MethodDelete:
				default:
					t.Errorf("unexpected exchange %+v", c)
				}
				if tc.want == mcp.Version20260728 && c.method == http.MethodPost && c.mcpMethod == "" {
					t.Errorf("2026-07-28 request without Mcp-Method: %+v", c)
				}
			}
		})
	}
}
