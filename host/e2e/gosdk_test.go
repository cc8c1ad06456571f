package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersions are the MCP revisions capgate serves.
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// The booking capabilities, by what they do.
var (
	bookingReads   = []string{"booking.availability", "booking.get", "booking.list", "booking.resources"}
	bookingActions = []string{"booking.cancel", "booking.create"}
	bookingAll     = sortedUnion(bookingReads, bookingActions)
	// guestTools are the capabilities under the catalogue.read permission,
	// the only one the guest role holds.
	guestTools = []string{"booking.availability", "booking.resources"}
)

func sortedUnion(a, b []string) []string {
	return slices.Sorted(slices.Values(append(slices.Clone(a), b...)))
}

// booking is one item of booking.list.
type booking struct {
	ID         string `json:"id"`
	ResourceID string `json:"resource_id"`
	Start      string `json:"start"`
	End        string `json:"end"`
	Status     string `json:"status"`
}

// bearerTransport presents a token the way an MCP client over HTTP does,
// with an Authorization header on every request, and keeps the body of the
// last response so a test can read a JSON-RPC error as it was on the wire.
type bearerTransport struct {
	token string
	mu    sync.Mutex
	last  []byte
}

func (b *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.last = body
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (b *bearerTransport) lastBody() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// session is a Go SDK client session and the wire under it.
type session struct {
	*mcp.ClientSession
	wire *bearerTransport
}

// connect opens a Go SDK client session to the host as token, asking for the
// given protocol version, and checks that it was granted.
func connect(t *testing.T, h *host, token, version string) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wire := &bearerTransport{token: token}
	client := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             h.url(),
		HTTPClient:           &http.Client{Transport: wire},
		DisableStandaloneSSE: true, // capgate is stateless: there is no stream to open
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect as %s at %s: %v", token, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("connect as %s asking for %s: server chose protocol version %s", token, version, got)
	}
	return &session{ClientSession: cs, wire: wire}
}

// callResult is a tools/call outcome: a result (possibly isError) or a
// JSON-RPC error.
type callResult struct {
	isError bool
	data    json.RawMessage // structured content, or the JSON of the first text block
	text    string
	// rpcErr is the JSON-RPC error as the server sent it, and sdkErr what
	// the SDK made of it. (The Go SDK reads code -32003 as its own internal
	// "client is closing" and reports ErrConnectionClosed, dropping the
	// code and data; the wire keeps them.)
	rpcErr *jsonrpc.Error
	sdkErr error
}

func callTool(t *testing.T, s *session, name string, args map[string]any) callResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var resp struct {
			Error *jsonrpc.Error `json:"error"`
		}
		if json.Unmarshal(s.wire.lastBody(), &resp) != nil || resp.Error == nil {
			t.Fatalf("tools/call %s: %v (and no JSON-RPC error on the wire)", name, err)
		}
		return callResult{rpcErr: resp.Error, sdkErr: err}
	}
	out := callResult{isError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out.text = tc.Text
			break
		}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		out.data = b
	} else if json.Valid([]byte(out.text)) {
		out.data = json.RawMessage(out.text)
	}
	return out
}

// mustSucceed decodes a successful call's payload into v.
func (r callResult) mustSucceed(t *testing.T, what string, v any) {
	t.Helper()
	if r.rpcErr != nil {
		t.Fatalf("%s: JSON-RPC error %d %s (data %s)", what, r.rpcErr.Code, r.rpcErr.Message, r.rpcErr.Data)
	}
	if r.isError {
		t.Fatalf("%s: tool error: %s", what, r.text)
	}
	if err := json.Unmarshal(r.data, v); err != nil {
		t.Fatalf("%s: decoding %q: %v", what, r.data, err)
	}
}

// wantRefusal checks that the call was refused by the gate at step.
func (r callResult) wantRefusal(t *testing.T, what, step string) {
	t.Helper()
	if r.rpcErr == nil {
		t.Errorf("%s: got a result (isError=%v, %s), want JSON-RPC error -32003 at step %q", what, r.isError, r.text, step)
		return
	}
	if r.sdkErr == nil || !strings.Contains(r.sdkErr.Error(), r.rpcErr.Message) {
		t.Errorf("%s: the Go SDK reported %v, want an error carrying %q", what, r.sdkErr, r.rpcErr.Message)
	}
	if r.rpcErr.Code != -32003 {
		t.Errorf("%s: JSON-RPC error %d %q, want -32003", what, r.rpcErr.Code, r.rpcErr.Message)
	}
	var data struct {
		Step string `json:"step"`
	}
	if err := json.Unmarshal(r.rpcErr.Data, &data); err != nil || data.Step != step {
		t.Errorf("%s: error data %s, want step %q", what, r.rpcErr.Data, step)
	}
}

func listBookings(t *testing.T, cs *session, who string) []booking {
	t.Helper()
	var out struct {
		Bookings []booking `json:"bookings"`
	}
	callTool(t, cs, "booking.list", nil).mustSucceed(t, "booking.list as "+who, &out)
	for _, b := range out.Bookings {
		if b.ID == "" || b.ResourceID == "" || b.Start == "" || b.End == "" || b.Status == "" {
			t.Errorf("booking.list as %s: incomplete booking %+v", who, b)
		}
	}
	return out.Bookings
}

func toolNames(t *testing.T, cs *session) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestGoSDKClient runs a full session with the official Go SDK client
// against the real binary, once per protocol version capgate serves, each
// on a freshly seeded host.
func TestGoSDKClient(t *testing.T) {
	needE2E(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			h := startHost(t)
			alice := connect(t, h, tokenAlice, version)
			if info := alice.InitializeResult().ServerInfo; info == nil || info.Name == "" {
				t.Errorf("server announced no serverInfo name")
			}

			// Each token sees exactly the tools its gate lets it call.
			wantTools := map[string][]string{
				tokenAlice:   bookingAll,
				tokenBob:     bookingAll,
				tokenAdmin:   bookingAll,
				tokenReader:  bookingReads, // read scope: no actions
				tokenService: bookingReads, // bound to no user: no actions
				tokenGuest:   guestTools,   // catalogue.read only
			}
			sessions := map[string]*session{tokenAlice: alice}
			for _, tok := range []string{tokenBob, tokenReader, tokenService, tokenGuest, tokenAdmin} {
				sessions[tok] = connect(t, h, tok, version)
			}
			for tok, want := range wantTools {
				if got := toolNames(t, sessions[tok]); !slices.Equal(got, want) {
					t.Errorf("tools/list as %s = %q, want %q", tok, got, want)
				}
			}

			// alice sees her two seeded bookings and cancels one.
			mine := listBookings(t, alice, "alice")
			if len(mine) != 2 {
				t.Fatalf("booking.list as alice: %d bookings, want the 2 seeded: %+v", len(mine), mine)
			}
			target := mine[0]
			if target.Status == "cancelled" {
				t.Fatalf("seeded booking %s is already cancelled", target.ID)
			}
			var cancel struct {
				AlreadyCancelled bool `json:"already_cancelled"`
			}
			callTool(t, alice, "booking.cancel", map[string]any{"id": target.ID}).mustSucceed(t, "booking.cancel own", &cancel)
			if cancel.AlreadyCancelled {
				t.Errorf("first booking.cancel of %s said already_cancelled", target.ID)
			}
			if st := statusOf(listBookings(t, alice, "alice"), target.ID); st != "cancelled" {
				t.Errorf("after booking.cancel, booking %s has status %q, want cancelled", target.ID, st)
			}
			// Cancelling again is not an error, and says so.
			cancel.AlreadyCancelled = false
			callTool(t, alice, "booking.cancel", map[string]any{"id": target.ID}).mustSucceed(t, "booking.cancel again", &cancel)
			if !cancel.AlreadyCancelled {
				t.Errorf("second booking.cancel of %s did not say already_cancelled", target.ID)
			}

			// bob's booking is refused to alice at the ownership step, and
			// stays booked.
			bobs := listBookings(t, sessions[tokenBob], "bob")
			if len(bobs) != 1 {
				t.Fatalf("booking.list as bob: %d bookings, want the 1 seeded: %+v", len(bobs), bobs)
			}
			callTool(t, alice, "booking.cancel", map[string]any{"id": bobs[0].ID}).wantRefusal(t, "alice cancels bob's booking", "ownership")
			callTool(t, alice, "booking.get", map[string]any{"id": bobs[0].ID}).wantRefusal(t, "alice gets bob's booking", "ownership")
			if st := statusOf(listBookings(t, sessions[tokenBob], "bob"), bobs[0].ID); st != bobs[0].Status {
				t.Errorf("bob's booking went from %q to %q after a refused cancel", bobs[0].Status, st)
			}

			// A read token, bound to alice, cannot act even on her booking.
			other := mine[1].ID
			callTool(t, sessions[tokenReader], "booking.cancel", map[string]any{"id": other}).wantRefusal(t, "read token cancels", "scope")
			// An action token bound to nobody cannot act.
			callTool(t, sessions[tokenService], "booking.cancel", map[string]any{"id": other}).wantRefusal(t, "unbound token cancels", "user_binding")
			// The guest role does not hold booking.read.
			callTool(t, sessions[tokenGuest], "booking.list", nil).wantRefusal(t, "guest lists bookings", "permission")
			if st := statusOf(listBookings(t, alice, "alice"), other); st == "cancelled" {
				t.Errorf("booking %s was cancelled by a refused call", other)
			}

			// The admin bypasses ownership.
			var got json.RawMessage
			callTool(t, sessions[tokenAdmin], "booking.get", map[string]any{"id": bobs[0].ID}).mustSucceed(t, "admin gets bob's booking", &got)
			if !strings.Contains(string(got), `"`+bobs[0].ID+`"`) {
				t.Errorf("admin booking.get %s returned %s", bobs[0].ID, got)
			}

			// An unknown tool is invalid params, not a refusal.
			if r := callTool(t, alice, "booking.nope", nil); r.rpcErr == nil || r.rpcErr.Code != -32602 {
				t.Errorf("unknown tool: got %+v, want JSON-RPC error -32602", r)
			}
		})
	}
}

// TestNoTokenIs404 checks that the endpoint does not exist for a caller
// without a valid bearer token: the same flat 404 for none, an unknown one
// and a malformed header, whatever the request.
func TestNoTokenIs404(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	for name, auth := range map[string]string{
		"none":          "",
		"unknown token": "Bearer demo-mallory",
		"wrong scheme":  "Basic " + tokenAlice,
		"empty bearer":  "Bearer ",
	} {
		t.Run(name, func(t *testing.T) {
			if code := postInitialize(t, h, auth); code != http.StatusNotFound {
				t.Errorf("POST %s with Authorization %q: HTTP %d, want 404", mcpPath, auth, code)
			}
		})
	}
	// The Go SDK client without a token cannot even connect.
	client := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url(), DisableStandaloneSSE: true, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Errorf("Go SDK client connected without a token")
	} else if !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "Not Found") {
		t.Errorf("Go SDK connect without a token: %v, want a 404", err)
	}
	// And a valid token reaches it, so the 404s above are about the token.
	if code := postInitialize(t, h, "Bearer "+tokenAlice); code != http.StatusOK {
		t.Errorf("POST initialize with %s: HTTP %d, want 200", tokenAlice, code)
	}
}

// postInitialize sends a raw initialize request with the given
// Authorization header (none when empty) and returns the HTTP status.
func postInitialize(t *testing.T, h *host, auth string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"0"}}}`
	req, err := http.NewRequest(http.MethodPost, h.url(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func statusOf(bs []booking, id string) string {
	for _, b := range bs {
		if b.ID == id {
			return b.Status
		}
	}
	return ""
}
