package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
)

// bookingConfig is a host with the booking plugin and its demo seed, on
// the embedded bus when natsURL is empty.
func bookingConfig(t *testing.T, natsURL, stream string) *config.Config {
	t.Helper()
	evs := ""
	if natsURL != "" {
		evs = fmt.Sprintf("events: {nats_url: %q, stream: %s}\n", natsURL, stream)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
events_buffer_size: 100
tokens:
  - {token: test-alice-1, role: customer, scope: action, user_id: alice}
  - {token: test-bob-123, role: customer, scope: action, user_id: bob}
  - {token: test-guest-1, role: customer, scope: read}
  - {token: test-admin-1, role: admin, scope: admin, user_id: ops}
roles: {customer: [booking.read, booking.write, catalogue.read, events.read], admin: ["*"]}
packs: {booking: true, events: true}
%splugins: [{name: booking, path: %s, config: {seed: demo}}]
`, t.TempDir(), evs, bookingBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var streamSeq atomic.Int64

// uniqueStream names a stream of the test's own on a shared NATS server and
// deletes it when the test ends.
func uniqueStream(t *testing.T, url string) string {
	t.Helper()
	stream := fmt.Sprintf("CAPGATE_APPTEST_%d_%d", time.Now().UnixNano(), streamSeq.Add(1))
	t.Cleanup(func() {
		bus, err := events.OpenNATS(context.Background(), events.NATSConfig{URL: url, Stream: stream, SubjectPrefix: app.SubjectPrefix(stream)})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer bus.Close()
		if err := bus.DeleteStream(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return stream
}

// newBookingApp assembles a host with the booking plugin on the named bus:
// "embedded" (the default, in the data directory), or "nats" on a stream
// of its own.
func newBookingApp(t *testing.T, bus string) *app.App {
	t.Helper()
	cfg := bookingConfig(t, "", "")
	if bus == "nats" {
		url := eventstest.NATSURL(t)
		cfg = bookingConfig(t, url, uniqueStream(t, url))
	}
	a, err := app.New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPluginsPublishOnTheBus: the booking plugin's seed events, published
// over the host service while it is configured, are on the host's bus.
func TestPluginsPublishOnTheBus(t *testing.T) {
	for _, bus := range []string{"embedded", "nats"} {
		t.Run(bus, func(t *testing.T) {
			a := newBookingApp(t, bus)
			defer a.Serve(canceled(), listen(t)) // stops at once, closing everything
			evs, _, err := a.Bus().Since(context.Background(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			// One catalogue.upsert per seeded resource, each resource once.
			ids := map[string]bool{}
			for _, ev := range evs {
				if ev.Type != "catalogue.upsert" || ev.Entity != "booking.resource" || ev.UserID != "" || ev.At.IsZero() || ids[ev.ID] {
					t.Errorf("event %+v", ev)
				}
				ids[ev.ID] = true
			}
			if !ids["room-aurora"] || !ids["court-1"] {
				t.Fatalf("bus holds %+v, want the seed's catalogue.upsert events", evs)
			}
		})
	}
}

func TestUnreachableNATSIsAStartupError(t *testing.T) {
	cfg := bookingConfig(t, "nats://127.0.0.1:1", "CAPGATE_EVENTS")
	a, err := app.New(context.Background(), cfg, quiet())
	if err == nil {
		a.Serve(canceled(), listen(t))
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "events.nats_url nats://127.0.0.1:1") {
		t.Fatalf("error %q does not name events.nats_url", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// mcpTool calls a tool over the served MCP endpoint and returns its
// structured result, or the text of a tool error or JSON-RPC error.
func mcpTool(t *testing.T, addr, token, name string, args any) (map[string]any, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rpc struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
			Content           []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(resp.Body)
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A call that told its caller something mid-call (a log message,
		// progress) is an event stream whose last event is the response.
		msg = nil
		for line := range strings.Lines(string(raw)) {
			if data, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				msg = []byte(data)
			}
		}
	}
	if err := json.Unmarshal(msg, &rpc); err != nil {
		t.Fatalf("%s: %d %s", name, resp.StatusCode, raw)
	}
	switch {
	case rpc.Error != nil:
		return nil, rpc.Error.Message
	case rpc.Result.IsError:
		return nil, rpc.Result.Content[0].Text
	}
	return rpc.Result.StructuredContent, ""
}

// pollEvents returns "type/id" of each event token sees after cursor after.
func pollEvents(t *testing.T, addr, token string, after float64) ([]string, float64) {
	t.Helper()
	out, msg := mcpTool(t, addr, token, "events.poll", map[string]any{"after": after})
	if msg != "" {
		t.Fatalf("events.poll as %s: %s", token, msg)
	}
	var got []string
	for _, e := range out["events"].([]any) {
		ev := e.(map[string]any)
		got = append(got, fmt.Sprintf("%s/%s/%s", ev["type"], ev["id"], ev["user_id"]))
	}
	return got, out["next"].(float64)
}

// drainEvents polls until nothing newer is left and returns the cursor to
// poll after.
func drainEvents(t *testing.T, addr, token string) float64 {
	t.Helper()
	var next float64
	for {
		got, n := pollEvents(t, addr, token, next)
		if len(got) == 0 && n == next {
			return next
		}
		next = n
	}
}

// TestEventsPollThroughTheGate books and cancels through MCP, then reads
// the events back: the owner and an admin see them, a stranger and an
// unbound token do not, and everyone sees the catalogue.
func TestEventsPollThroughTheGate(t *testing.T) {
	for _, bus := range []string{"embedded", "nats"} {
		t.Run(bus, func(t *testing.T) {
			a := newBookingApp(t, bus)
			ln := listen(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Serve(ctx, ln) }()
			defer func() { cancel(); <-done }()
			addr := ln.Addr().String()

			resources, msg := mcpTool(t, addr, "test-alice-1", "booking.resources", map[string]any{})
			if msg != "" {
				t.Fatal(msg)
			}
			seeded := len(resources["resources"].([]any))
			start := drainEvents(t, addr, "test-alice-1")
			if start != float64(seeded) {
				t.Fatalf("after the seed, next = %v; want %d (one catalogue.upsert per resource)", start, seeded)
			}
			slot := time.Now().UTC().Truncate(24 * time.Hour).Add(24*time.Hour + 11*time.Hour + 30*time.Minute).Format(time.RFC3339)
			created, msg := mcpTool(t, addr, "test-alice-1", "booking.create", map[string]any{"resource_id": "room-borealis", "start": slot})
			if msg != "" {
				t.Fatalf("booking.create: %s", msg)
			}
			id := created["id"].(string)
			if _, msg := mcpTool(t, addr, "test-alice-1", "booking.cancel", map[string]any{"id": id}); msg != "" {
				t.Fatalf("booking.cancel: %s", msg)
			}
			want := []string{"booking.created/" + id + "/alice", "booking.cancelled/" + id + "/alice"}
			for _, tok := range []string{"test-alice-1", "test-admin-1"} {
				if got, next := pollEvents(t, addr, tok, start); fmt.Sprint(got) != fmt.Sprint(want) || next != start+2 {
					t.Errorf("%s polls %v next %v; want %v next %v", tok, got, next, want, start+2)
				}
			}
			for _, tok := range []string{"test-bob-123", "test-guest-1"} {
				// next moves past what they may not see, so they do not read it again.
				if got, next := pollEvents(t, addr, tok, start); len(got) != 0 || next != start+2 {
					t.Errorf("%s polls %v next %v; want nothing, next %v", tok, got, next, start+2)
				}
				if got, _ := pollEvents(t, addr, tok, 0); len(got) != min(seeded, 20) || !strings.HasPrefix(got[0], "catalogue.upsert/") {
					t.Errorf("%s sees %v from the start; want the catalogue events, a page of them", tok, got)
				}
			}
		})
	}
}

// TestEventsPackIsGated: with the pack off the tool does not exist; a role
// without events.read is refused at the permission step.
func TestEventsPackIsGated(t *testing.T) {
	cfg := bookingConfig(t, "", "")
	cfg.Roles["customer"] = []string{"booking.read"}
	cfg.Packs["events"] = true
	a, err := app.New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	if _, msg := mcpTool(t, ln.Addr().String(), "test-alice-1", "events.poll", map[string]any{}); !strings.Contains(msg, `does not hold permission "events.read"`) {
		t.Errorf("without events.read: %q", msg)
	}
}

func TestPluginNamedCapgateIsRefused(t *testing.T) {
	cfg := bookingConfig(t, "", "")
	cfg.Plugins[0].Name = "capgate"
	if _, err := app.New(context.Background(), cfg, quiet()); err == nil || !strings.Contains(err.Error(), `plugins[0].name: "capgate" is reserved`) {
		t.Fatalf("err = %v", err)
	}
}
