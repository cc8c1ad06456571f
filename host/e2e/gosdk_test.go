package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersions are the MCP revisions capgate serves.
var protocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// The capabilities of the booking and search packs, by what they do.
var (
	bookingReads   = []string{"booking.availability", "booking.get", "booking.list", "booking.resources"}
	bookingActions = []string{"booking.cancel", "booking.create"}
	bookingAll     = sortedUnion(bookingReads, bookingActions)
	// searchTools are the search pack's capabilities: reads under
	// catalogue.read, which every role of the test config holds.
	searchTools = []string{"platform.get", "platform.list", "platform.search"}
	// allTools is every capability; readTools those a read scope, or a
	// token bound to no user, may call.
	allTools  = sortedUnion(bookingAll, searchTools)
	readTools = sortedUnion(bookingReads, searchTools)
	// adminTools adds what only the admin role (booking.admin) may call.
	adminTools = sortedUnion(allTools, []string{"booking.add_resource"})
	// guestTools are the capabilities under the catalogue.read permission,
	// the only one the guest role holds.
	guestTools = sortedUnion([]string{"booking.availability", "booking.resources"}, searchTools)
)

// The catalogue as the search pack and MCP resources show it.
const (
	catalogueEntity = "booking.resource"
	// recordTemplate is the one resource template: a record per entity
	// type the booking plugin provides.
	recordTemplate = "capgate://" + catalogueEntity + "/{id}"
	// demoResource is a resource of the demo seed, found by its name.
	demoResource = "room-aurora"
	// maxResults is the host's max_results (its default: the test config
	// sets none), the most items one resources/list page may hold.
	maxResults = 20
)

func recordURI(id string) string { return "capgate://" + catalogueEntity + "/" + id }

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
				tokenAlice:   allTools,
				tokenBob:     allTools,
				tokenAdmin:   adminTools,
				tokenReader:  readTools,  // read scope: no actions
				tokenService: readTools,  // bound to no user: no actions
				tokenGuest:   guestTools, // catalogue.read only
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

			// The catalogue, searched and read as tools and as resources,
			// by a customer and by a guest (catalogue.read is all it holds).
			// Every token of the test config holds catalogue.read, so there
			// is no refusal to check here.
			for _, tok := range []string{tokenAlice, tokenGuest} {
				checkCatalogue(t, sessions[tok], tok, version)
			}
		})
	}
}

// catalogue is booking.resources' list: each resource's full record by id.
func catalogue(t *testing.T, s *session, who string) map[string]json.RawMessage {
	t.Helper()
	var out struct {
		Resources []json.RawMessage `json:"resources"`
	}
	callTool(t, s, "booking.resources", nil).mustSucceed(t, "booking.resources as "+who, &out)
	records := map[string]json.RawMessage{}
	for _, r := range out.Resources {
		var head struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(r, &head); err != nil || head.ID == "" || records[head.ID] != nil {
			t.Fatalf("booking.resources as %s: a resource without an id of its own: %s", who, r)
		}
		records[head.ID] = r
	}
	if records[demoResource] == nil {
		t.Fatalf("booking.resources as %s: no %s among %d resources", who, demoResource, len(records))
	}
	return records
}

// searchHit is one hit of platform.search.
type searchHit struct {
	Entity  string  `json:"entity"`
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Snippet string  `json:"snippet"`
	Score   float64 `json:"score"`
}

func search(t *testing.T, s *session, who, query string) []searchHit {
	t.Helper()
	var out struct {
		Hits []searchHit `json:"hits"`
	}
	callTool(t, s, "platform.search", map[string]any{"query": query}).mustSucceed(t, "platform.search "+strconv.Quote(query)+" as "+who, &out)
	return out.Hits
}

// checkCatalogue checks, as who, that the booking catalogue is the same
// whichever way it is read: platform.search finds a resource by its name
// (and through a typo), platform.get returns the record booking.resources
// shows, and the MCP resources (one template, every record listed once
// across pages, a record read by URI) say the same.
func checkCatalogue(t *testing.T, s *session, who, version string) {
	t.Helper()
	records := catalogue(t, s, who)
	var want struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(records[demoResource], &want); err != nil || want.Name == "" {
		t.Fatalf("booking.resources as %s: %s has no name: %s", who, demoResource, records[demoResource])
	}

	// Search: the name finds the resource first, and a one-letter typo
	// still finds it.
	hits := search(t, s, who, "aurora")
	if len(hits) == 0 || hits[0].Entity != catalogueEntity || hits[0].ID != demoResource {
		t.Errorf("platform.search \"aurora\" as %s: hits %+v, want %s/%s first", who, hits, catalogueEntity, demoResource)
	} else if hits[0].Title != want.Name || hits[0].Score <= 0 {
		t.Errorf("platform.search \"aurora\" as %s: first hit %+v, want title %q and a positive score", who, hits[0], want.Name)
	}
	if hits := search(t, s, who, "auroa"); !slices.ContainsFunc(hits, func(h searchHit) bool {
		return h.Entity == catalogueEntity && h.ID == demoResource
	}) {
		t.Errorf("platform.search \"auroa\" (a typo) as %s: hits %+v, want %s among them", who, hits, demoResource)
	}

	// platform.get returns the record booking.resources shows.
	var got struct {
		Entity string          `json:"entity"`
		ID     string          `json:"id"`
		Record json.RawMessage `json:"record"`
	}
	callTool(t, s, "platform.get", map[string]any{"entity": catalogueEntity, "id": demoResource}).
		mustSucceed(t, "platform.get "+demoResource+" as "+who, &got)
	if got.Entity != catalogueEntity || got.ID != demoResource || !jsonEqual(got.Record, records[demoResource]) {
		t.Errorf("platform.get %s as %s = %s %s %s, want the record booking.resources shows: %s",
			demoResource, who, got.Entity, got.ID, got.Record, records[demoResource])
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// One resource template, for the one entity type provided.
	tmpls, err := s.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatalf("resources/templates/list as %s: %v", who, err)
	}
	if len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != recordTemplate ||
		tmpls.ResourceTemplates[0].MIMEType != "application/json" {
		b, _ := json.Marshal(tmpls.ResourceTemplates)
		t.Errorf("resources/templates/list as %s = %s, want the one template %s (application/json)", who, b, recordTemplate)
	}

	// resources/list, page by page: every resource exactly once, no page
	// longer than max_results, so a catalogue longer than that takes
	// several pages.
	seen := map[string]int{}
	pages := 0
	params := &mcp.ListResourcesParams{}
	for {
		pages++
		if pages > 1000 {
			t.Fatalf("resources/list as %s: still a next cursor after 1000 pages", who)
		}
		page, err := s.ListResources(ctx, params)
		if err != nil {
			t.Fatalf("resources/list page %d as %s: %v", pages, who, err)
		}
		if len(page.Resources) > maxResults {
			t.Errorf("resources/list page %d as %s: %d resources, more than max_results %d", pages, who, len(page.Resources), maxResults)
		}
		for _, r := range page.Resources {
			id, ok := strings.CutPrefix(r.URI, recordURI(""))
			if !ok || id == "" || r.Name != id || r.MIMEType != "application/json" {
				t.Errorf("resources/list as %s: resource %+v, want %s with name <id>, application/json", who, r, recordURI("<id>"))
				continue
			}
			seen[id]++
			// The title arrived with 2025-06-18; before it, the
			// description carries it.
			title := r.Title
			if version < "2025-06-18" {
				title = r.Description
			}
			var rec struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(records[id], &rec); records[id] != nil && title != rec.Name {
				t.Errorf("resources/list as %s: %s titled %q, want its name %q", who, r.URI, title, rec.Name)
			}
		}
		if page.NextCursor == "" {
			break
		}
		params = &mcp.ListResourcesParams{Cursor: page.NextCursor}
	}
	for id, n := range seen {
		switch {
		case records[id] == nil:
			t.Errorf("resources/list as %s: %s, which booking.resources does not list", who, recordURI(id))
		case n != 1:
			t.Errorf("resources/list as %s: %s listed %d times", who, recordURI(id), n)
		}
	}
	for id := range records {
		if seen[id] == 0 {
			t.Errorf("resources/list as %s: %s missing", who, recordURI(id))
		}
	}
	if min := (len(records) + maxResults - 1) / maxResults; pages < min {
		t.Errorf("resources/list as %s: %d resources in %d pages, want at least %d of at most %d", who, len(records), pages, min, maxResults)
	}

	// resources/read of a record is the record platform.get returns.
	read, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: recordURI(demoResource)})
	if err != nil {
		t.Fatalf("resources/read %s as %s: %v", recordURI(demoResource), who, err)
	}
	if len(read.Contents) != 1 {
		t.Fatalf("resources/read %s as %s: %d contents, want 1", recordURI(demoResource), who, len(read.Contents))
	}
	c := read.Contents[0]
	if c.URI != recordURI(demoResource) || c.MIMEType != "application/json" || !jsonEqual([]byte(c.Text), got.Record) {
		t.Errorf("resources/read %s as %s = %s %s %s, want platform.get's record %s", recordURI(demoResource), who, c.URI, c.MIMEType, c.Text, got.Record)
	}

	// A record that does not exist is the revision's resource-not-found
	// error: -32002 until 2025-11-25, -32602 since 2026-07-28.
	missing := recordURI("no-such-resource")
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: missing}); err == nil {
		t.Errorf("resources/read %s as %s: no error", missing, who)
	} else {
		wantCode := int64(-32002)
		if version >= "2026-07-28" {
			wantCode = -32602
		}
		var resp struct {
			Error *jsonrpc.Error `json:"error"`
		}
		if json.Unmarshal(s.wire.lastBody(), &resp) != nil || resp.Error == nil || resp.Error.Code != wantCode {
			t.Errorf("resources/read %s as %s: %v (wire %s), want JSON-RPC error %d", missing, who, err, s.wire.lastBody(), wantCode)
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
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
