package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
)

// TestFloodCannotHideAnAction: a read-only guest floods the endpoint with
// calls to a capability that does not exist while alice books. The
// guest is throttled at its own limit (10 a minute, after which every
// call is refused at rate_limit), and every booking alice was told about
// has its record in the trail: the flood cannot push an action's record
// out.
func TestFloodCannotHideAnAction(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens:
  - {token: flood-guest-1, label: guest, role: g, scope: read}
  - {token: flood-alice-1, label: alice, role: r, scope: action, user_id: alice}
roles: {r: [booking.read, booking.write, catalogue.read], g: [catalogue.read]}
packs: {booking: true}
limits: {per_token: {rate: 10/m}}
plugins: [{name: booking, path: %s, config: {seed: demo}}]
`, dir, bookingBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	_, addr, stop := serveApp(t, cfg, nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	call := func(token, name string, args any) (string, error) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": args}})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/mcp", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return string(raw), err
	}

	// The flood: 32 connections for three seconds.
	var (
		wg                     sync.WaitGroup
		sent, unknown, limited atomic.Int64
		stopFlood              atomic.Bool
	)
	for range 32 {
		wg.Go(func() {
			for !stopFlood.Load() {
				raw, err := call("flood-guest-1", "nope.unknown", map[string]any{})
				if err != nil {
					continue
				}
				sent.Add(1)
				switch {
				case strings.Contains(raw, `"step":"rate_limit"`):
					limited.Add(1)
				case strings.Contains(raw, "unknown tool"):
					unknown.Add(1)
				}
			}
		})
	}
	// Meanwhile alice books five free slots.
	raw, err := call("flood-alice-1", "booking.availability", map[string]any{"resource_id": "room-aurora", "days": 7})
	if err != nil {
		t.Fatal(err)
	}
	var avail struct {
		Result struct {
			StructuredContent struct {
				FreeSlots []struct{ Start string } `json:"free_slots"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(raw), &avail); err != nil || len(avail.Result.StructuredContent.FreeSlots) < 5 {
		t.Fatalf("availability: %s", raw)
	}
	booked := 0
	for _, slot := range avail.Result.StructuredContent.FreeSlots[:5] {
		raw, err := call("flood-alice-1", "booking.create", map[string]any{"resource_id": "room-aurora", "start": slot.Start})
		switch {
		case err != nil:
			t.Fatal(err)
		case strings.Contains(raw, `"status":"active"`):
			booked++
		case !strings.Contains(raw, `"step":"audit"`):
			// Refused for want of its record is allowed; anything else is not.
			t.Fatalf("booking.create beside the flood: %s", raw)
		}
	}
	time.Sleep(3 * time.Second)
	stopFlood.Store(true)
	wg.Wait()
	stop()

	if n := unknown.Load(); n != 10 {
		t.Errorf("the guest's flood got %d answers past its limit of 10 a minute", n)
	}
	if limited.Load() != sent.Load()-unknown.Load() || sent.Load() < 100 {
		t.Errorf("of %d flood calls, %d were refused at rate_limit and %d answered unknown", sent.Load(), limited.Load(), unknown.Load())
	}
	if booked == 0 {
		t.Fatal("no booking went through beside the flood")
	}
	store, err := audit.Open(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	page, err := store.Query(context.Background(), audit.Filter{TokenLabel: "alice", Capability: "booking.create", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, r := range page.Records {
		if r.Outcome == audit.OutcomeOK {
			ok++
		}
	}
	if ok != booked {
		t.Errorf("alice made %d bookings; the trail has %d of them: %+v", booked, ok, page.Records)
	}
	t.Logf("flood: %d calls, %d refused at rate_limit; alice: %d bookings, all recorded", sent.Load(), limited.Load(), booked)
}
