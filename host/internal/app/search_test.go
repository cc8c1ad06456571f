package app_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/sdk/platform"
)

// searchConfig is a host with the booking plugin (demo seed) and the search
// plugin over dataDir, on the embedded bus when natsURL is empty.
func searchConfig(t *testing.T, dataDir, natsURL, stream string) *config.Config {
	t.Helper()
	evs := ""
	if natsURL != "" {
		evs = fmt.Sprintf("events: {nats_url: %q, stream: %s}\n", natsURL, stream)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
events_buffer_size: 1000
max_results: 5
tokens:
  - {token: test-guest-1, role: guest, scope: read}
  - {token: test-nosrch-1, role: outsider, scope: read}
  - {token: test-admin-1, role: admin, scope: admin, user_id: ops}
roles: {guest: [catalogue.read, events.read], outsider: [events.read], admin: ["*"]}
packs: {booking: true, events: true, search: true}
%splugins:
  - {name: booking, path: %s, config: {seed: demo}}
  - {name: search, path: %s}
`, dataDir, evs, bookingBin, searchBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// logSink collects the host's JSON log records, plugins' included.
type logSink struct{ mcptest.LogBuffer }

// records returns the attributes of every record with message msg.
func (s *logSink) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(s.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// serveSearch builds and serves a host; stop ends it and waits until its
// plugins are gone.
func serveSearch(t *testing.T, cfg *config.Config, sink *logSink) (addr string, stop func()) {
	t.Helper()
	_, addr, stop = serveApp(t, cfg, sink)
	return addr, stop
}

// serveApp is serveSearch, also returning the App (to reload it).
func serveApp(t *testing.T, cfg *config.Config, sink *logSink) (a *app.App, addr string, stop func()) {
	t.Helper()
	opts := quiet()
	if sink != nil {
		opts.Logger = slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	a, err := app.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return a, ln.Addr().String(), stop
}

// rpc sends one JSON-RPC request and returns its result or error object.
func rpc(t *testing.T, addr, token, method string, params any) (result, rpcErr map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
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
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, raw)
	}
	return out.Result, out.Error
}

// hitIDs runs platform.search and returns "entity/id" of each hit.
func hitIDs(t *testing.T, addr, token string, args map[string]any) []string {
	t.Helper()
	out, msg := mcpTool(t, addr, token, platform.SearchName, args)
	if msg != "" {
		t.Fatalf("%s %v: %s", platform.SearchName, args, msg)
	}
	var ids []string
	for _, h := range out["hits"].([]any) {
		hit := h.(map[string]any)
		ids = append(ids, fmt.Sprintf("%s/%s", hit["entity"], hit["id"]))
	}
	return ids
}

// eventually polls cond until it holds, failing after a deadline: the
// index applies events asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after 15s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func busConfig(t *testing.T, bus, dataDir string) *config.Config {
	if bus == "nats" {
		url := eventstest.NATSURL(t)
		return searchConfig(t, dataDir, url, uniqueStream(t, url))
	}
	return searchConfig(t, dataDir, "", "")
}

const aurora = "booking.resource/room-aurora"

// TestSearchThroughTheGate searches, reads and lists the demo catalogue
// through MCP, on both buses, and sees a resource added through MCP become
// searchable and show up in events.poll.
func TestSearchThroughTheGate(t *testing.T) {
	for _, bus := range []string{"embedded", "nats"} {
		t.Run(bus, func(t *testing.T) {
			addr, _ := serveSearch(t, busConfig(t, bus, t.TempDir()), nil)
			const guest = "test-guest-1"

			for _, q := range []map[string]any{
				{"query": "aurora"},
				{"query": "auroa"},                                // one-letter typo
				{"query": "auro"},                                 // prefix
				{"query": "\"video-conferencing kit\""},           // phrase
				{"query": "aurora", "entity": "booking.resource"}, // entity filter
			} {
				ids := hitIDs(t, addr, guest, q)
				if len(ids) == 0 || ids[0] != aurora || len(ids) > 5 {
					t.Errorf("search %v = %v, want %s first and at most max_results (5) hits", q, ids, aurora)
				}
			}
			if ids := hitIDs(t, addr, guest, map[string]any{"query": "room", "limit": 50}); len(ids) != 5 {
				t.Errorf("search for a common word with limit 50 = %v, want max_results (5) hits", ids)
			}
			for _, tc := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"query": "  "}, "query"},
				{map[string]any{"query": "aurora", "entity": "shop.invoice"}, "booking.resource"},
			} {
				if _, msg := mcpTool(t, addr, guest, platform.SearchName, tc.args); !strings.Contains(msg, tc.want) {
					t.Errorf("search %v: error %q, want one mentioning %q", tc.args, msg, tc.want)
				}
			}

			got, msg := mcpTool(t, addr, guest, platform.GetName, map[string]any{"entity": "booking.resource", "id": "room-aurora"})
			if msg != "" || got["record"].(map[string]any)["name"] != "Aurora" {
				t.Fatalf("%s = %v, %q; want the Aurora record", platform.GetName, got, msg)
			}
			if _, msg := mcpTool(t, addr, guest, platform.GetName, map[string]any{"entity": "booking.resource", "id": "room-nowhere"}); !strings.Contains(msg, "room-nowhere") {
				t.Errorf("%s of an unknown id: %q, want a not-found error naming it", platform.GetName, msg)
			}

			// The same record as a resource, through the same gate.
			res, rerr := rpc(t, addr, guest, "resources/read", map[string]any{"uri": "capgate://booking.resource/room-aurora"})
			if rerr != nil {
				t.Fatalf("resources/read: %v", rerr)
			}
			var rec map[string]any
			text := res["contents"].([]any)[0].(map[string]any)["text"].(string)
			if err := json.Unmarshal([]byte(text), &rec); err != nil || !equalJSON(rec, got["record"]) {
				t.Errorf("resources/read = %s, want the platform.get record %v", text, got["record"])
			}
			_, toolErr := rpc(t, addr, "test-nosrch-1", "tools/call", map[string]any{"name": platform.GetName, "arguments": map[string]any{"entity": "booking.resource", "id": "room-aurora"}})
			_, readErr := rpc(t, addr, "test-nosrch-1", "resources/read", map[string]any{"uri": "capgate://booking.resource/room-aurora"})
			if toolErr == nil || !equalJSON(toolErr, readErr) {
				t.Errorf("refusals differ: tools/call %v, resources/read %v", toolErr, readErr)
			}

			// resources/list pages through every resource once.
			resources, _ := mcpTool(t, addr, guest, "booking.resources", map[string]any{})
			var uris []string
			cursor := ""
			for page := 0; page < 100; page++ {
				params := map[string]any{}
				if cursor != "" {
					params["cursor"] = cursor
				}
				res, rerr := rpc(t, addr, guest, "resources/list", params)
				if rerr != nil {
					t.Fatal(rerr)
				}
				for _, r := range res["resources"].([]any) {
					uris = append(uris, r.(map[string]any)["uri"].(string))
				}
				cursor, _ = res["nextCursor"].(string)
				if cursor == "" {
					break
				}
			}
			if want := len(resources["resources"].([]any)); len(uris) != want || len(slices.Compact(slices.Sorted(slices.Values(uris)))) != want {
				t.Errorf("resources/list gave %d URIs (%d distinct), want each of the %d resources once", len(uris), len(slices.Compact(slices.Sorted(slices.Values(uris)))), want)
			}

			// Freshness: a resource added through MCP becomes searchable, and
			// its catalogue event is visible to everyone.
			_, msg = mcpTool(t, addr, "test-admin-1", "booking.add_resource", map[string]any{
				"id": "room-zenith", "name": "Zenith", "kind": "room", "description": "Meditation room with floor cushions.",
				"capacity": 6, "slot_minutes": 30, "opens": "07:00", "closes": "22:00",
			})
			if msg != "" {
				t.Fatalf("booking.add_resource: %s", msg)
			}
			eventually(t, "the new resource is searchable", func() bool {
				return slices.Equal(hitIDs(t, addr, guest, map[string]any{"query": "meditation"}), []string{"booking.resource/room-zenith"})
			})
			var evs []string
			for next, more := 0.0, true; more; {
				page, n := pollEvents(t, addr, guest, next)
				evs, more, next = append(evs, page...), n != next, n
			}
			if !slices.Contains(evs, "catalogue.upsert/room-zenith/<nil>") && !slices.Contains(evs, "catalogue.upsert/room-zenith/") {
				t.Errorf("events.poll = %v, want the catalogue.upsert of room-zenith", evs)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestBlockedEntityIndexesNothing: a plugin declaring shop.invoice stops
// start-up before the search plugin syncs, so its index stays empty.
func TestBlockedEntityIndexesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-guest-1, role: guest, scope: read}]
roles: {guest: [catalogue.read]}
packs: {search: true}
plugins:
  - {name: search, path: %s}
  - {name: leaky, path: %s}
`, dir, searchBin, leakyBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = app.New(context.Background(), cfg, quiet())
	if err == nil || !strings.Contains(err.Error(), `plugin "leaky" declares entity type "shop.invoice"`) {
		t.Fatalf("New = %v, want the shop.invoice refusal naming the plugin", err)
	}
	// The same data directory without the leaky plugin: the index is empty.
	cfg.Plugins = cfg.Plugins[:1]
	addr, _ := serveSearch(t, cfg, nil)
	res, rerr := rpc(t, addr, "test-guest-1", "tools/call", map[string]any{"name": platform.ListName, "arguments": map[string]any{}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if items := res["structuredContent"].(map[string]any)["items"].([]any); len(items) != 0 {
		t.Errorf("index holds %v after a refused start", items)
	}
}

// TestSearchIndexResumesAfterRestart stops a host, lets the catalogue change
// meanwhile (as another replica sharing the database and the stream would),
// and restarts it: on either bus, external JetStream or the embedded store
// in the data dir, the index resumes from the cursor it kept and applies
// exactly the missed events, each once.
func TestSearchIndexResumesAfterRestart(t *testing.T) {
	for _, bus := range []string{"nats", "embedded"} {
		t.Run(bus, func(t *testing.T) {
			dir := t.TempDir()
			cfg := busConfig(t, bus, dir)
			sink := &logSink{}
			addr, stop := serveSearch(t, cfg, sink)
			if _, msg := mcpTool(t, addr, "test-admin-1", "booking.add_resource", map[string]any{
				"id": "room-zenith", "name": "Zenith", "kind": "room", "description": "Meditation room.",
				"capacity": 6, "slot_minutes": 30, "opens": "07:00", "closes": "22:00",
			}); msg != "" {
				t.Fatal(msg)
			}
			eventually(t, "zenith searchable", func() bool {
				return len(hitIDs(t, addr, "test-guest-1", map[string]any{"query": "meditation"})) == 1
			})
			stop()

			// While the host is down: two resources appear in the shared
			// database and are announced on the bus.
			db, err := sql.Open("sqlite", filepath.Join(dir, "plugins", "booking", "booking.db"))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"booth-one", "booth-two"} {
				if _, err := db.Exec(`INSERT INTO resources (id, name, kind, description, location, capacity, slot_minutes, opens_minute, closes_minute)
					VALUES (?, ?, 'booth', 'Soundproof phone booth with a quokka mural.', 'Floor 1', 1, 30, 480, 1200)`, id, id); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			b, err := app.OpenBus(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"booth-one", "booth-two"} {
				if _, err := b.Publish(context.Background(), events.Event{Type: "catalogue.upsert", Entity: "booking.resource", ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			b.Close()

			addr, _ = serveSearch(t, cfg, sink)
			eventually(t, "both booths searchable after the restart", func() bool {
				return len(hitIDs(t, addr, "test-guest-1", map[string]any{"query": "quokka"})) == 2
			})
			if got := hitIDs(t, addr, "test-guest-1", map[string]any{"query": "meditation"}); len(got) != 1 {
				t.Errorf("zenith after the restart: %v", got)
			}
			ready := sink.records("search index ready")
			if len(ready) != 2 {
				t.Fatalf("%d 'search index ready' records, want one per start", len(ready))
			}
			if resumed := ready[1]["resumed"]; resumed != true {
				t.Errorf("second start resumed = %v, want true", resumed)
			}
			// Plugin log lines reach the host's log a moment after the
			// index changed.
			eventually(t, "three applied events logged", func() bool { return len(sink.records("applied catalogue event")) >= 3 })
			applied := map[float64]int{}
			var ids []string
			for _, r := range sink.records("applied catalogue event") {
				applied[r["cursor"].(float64)]++
				ids = append(ids, fmt.Sprint(r["id"]))
			}
			for c, n := range applied {
				if n != 1 {
					t.Errorf("event %v applied %d times", c, n)
				}
			}
			slices.Sort(ids)
			if want := []string{"booth-one", "booth-two", "room-zenith"}; !slices.Equal(ids, want) {
				t.Errorf("applied events for %v, want exactly %v", ids, want)
			}
		})
	}
}
