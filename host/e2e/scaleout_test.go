package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/internal/dispatch"
)

// replicaPair starts two capgate processes on different ports and data
// directories that share one PostgreSQL database (the booking plugin's dsn)
// and one JetStream stream, as two replicas behind a load balancer do.
// more edits each replica's config first, given its directory.
func replicaPair(t *testing.T, more ...func(dir string) func(string) string) (r1, r2 *host) {
	t.Helper()
	needE2E(t)
	pg := postgresBackend(t)
	url := eventstest.NATSURL(t)
	stream := fmt.Sprintf("CAPGATE_E2E_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		bus, err := events.OpenNATS(context.Background(), events.NATSConfig{URL: url, Stream: stream, SubjectPrefix: "capgate.stream." + stream})
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer bus.Close()
		if err := bus.DeleteStream(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// The events pack too, so a replica can poll what the other published;
	// and the host's own records on the shared database, as
	// deploy/capgate-replica.yaml has them.
	edit := func(cfg string) string {
		cfg = strings.Replace(cfg, "packs: {booking: true, search: true",
			fmt.Sprintf("events: {nats_url: %q, stream: %s}\ndatabase: {dsn: %q}\npacks: {booking: true, search: true, events: true", url, stream, pg.dsn), 1)
		return strings.Replace(cfg, "customer: [", "customer: [events.read, ", 1)
	}
	start := func() *host {
		dir := t.TempDir()
		return startHostWith(t, dir, pg.bookingConfig, func(cfg string) string {
			for _, m := range more {
				cfg = m(dir)(cfg)
			}
			return edit(cfg)
		})
	}
	return start(), start()
}

// freeSlot is a free slot of resource tomorrow, as r sees it.
func freeSlot(t *testing.T, c *mcpClient, r *host, resource string) string {
	t.Helper()
	raw, err := c.mustCall(t, r, tokenAlice, "booking.availability", map[string]any{
		"resource_id": resource, "date": time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly),
	})
	if err != nil {
		t.Fatal(err)
	}
	var av struct {
		FreeSlots []struct {
			Start string `json:"start"`
		} `json:"free_slots"`
	}
	if err := json.Unmarshal(raw, &av); err != nil || len(av.FreeSlots) == 0 {
		t.Fatalf("availability of %s: %s (%v)", resource, raw, err)
	}
	return av.FreeSlots[len(av.FreeSlots)/2].Start
}

// TestReplicas: two replicas over one PostgreSQL and one JetStream stream
// behave as one capgate.
func TestReplicas(t *testing.T) {
	r1, r2 := replicaPair(t)
	replicas := []*host{r1, r2}
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}

	t.Run("created on one, read and cancelled on the other", func(t *testing.T) {
		raw, err := c.mustCall(t, r1, tokenAlice, "booking.create", map[string]any{
			"resource_id": "room-borealis", "start": freeSlot(t, c, r1, "room-borealis"),
		})
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &b); err != nil || b.ID == "" {
			t.Fatalf("create: %s", raw)
		}
		if _, err := c.mustCall(t, r2, tokenAlice, "booking.get", map[string]any{"id": b.ID}); err != nil {
			t.Fatalf("get on replica 2: %v", err)
		}
		// Ownership is decided from the shared database on either replica.
		if o := c.call(r2, tokenBob, "booking.cancel", map[string]any{"id": b.ID}); o.rpcErr == nil || !strings.Contains(string(o.rpcErr), "ownership") {
			t.Errorf("bob cancelling alice's booking on replica 2: %v, want the ownership refusal", o)
		}
		raw, err = c.mustCall(t, r2, tokenAlice, "booking.cancel", map[string]any{"id": b.ID})
		if err != nil || !strings.Contains(string(raw), `"already_cancelled":false`) {
			t.Fatalf("cancel on replica 2: %s, %v", raw, err)
		}
	})

	t.Run("50 cancels over both replicas, one cancels", func(t *testing.T) {
		raw, err := c.mustCall(t, r1, tokenAlice, "booking.create", map[string]any{
			"resource_id": "room-aurora", "start": freeSlot(t, c, r1, "room-aurora"),
		})
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &b)
		outs := race(50, func(i int) dsOutcome {
			return c.call(replicas[i%2], tokenAlice, "booking.cancel", map[string]any{"id": b.ID})
		})
		cancelled, already := 0, 0
		for _, o := range outs {
			switch {
			case o.err != nil || o.rpcErr != nil || o.isError:
				t.Errorf("cancel: %v", o)
			case strings.Contains(string(o.structured), `"already_cancelled":false`):
				cancelled++
			default:
				already++
			}
		}
		if cancelled != 1 || already != 49 {
			t.Errorf("%d cancelled and %d already cancelled, want 1 and 49", cancelled, already)
		}
	})

	t.Run("50 creates of one slot over both replicas, one booking", func(t *testing.T) {
		slot := freeSlot(t, c, r1, "court-1")
		tokens := []string{tokenAlice, tokenBob}
		outs := race(50, func(i int) dsOutcome {
			return c.call(replicas[i%2], tokens[(i/2)%2], "booking.create", map[string]any{"resource_id": "court-1", "start": slot})
		})
		won, taken := 0, 0
		for _, o := range outs {
			switch {
			case o.err != nil || o.rpcErr != nil:
				t.Errorf("create: %v", o)
			case o.isError && strings.Contains(o.text, "already booked"):
				taken++
			case o.isError:
				t.Errorf("create: %v", o)
			default:
				won++
			}
		}
		if won != 1 || taken != 49 {
			t.Errorf("%d bookings and %d refused as taken, want 1 and 49", won, taken)
		}
	})

	t.Run("an idempotency key is honoured across replicas", func(t *testing.T) {
		// The answer of a create on replica 1 is lost; the client retries
		// with the same key, and the load balancer sends it to replica 2:
		// the first outcome comes back, and nothing is booked twice. 20
		// racing repeats over both replicas book nothing more either.
		args := map[string]any{"resource_id": "room-cirrus", "start": freeSlot(t, c, r1, "room-cirrus")}
		meta := map[string]any{dispatch.MetaIdempotencyKey: fmt.Sprintf("replicas-%d", time.Now().UnixNano())}
		first := c.callMeta(r1, tokenAlice, "booking.create", args, meta)
		if first.err != nil || first.rpcErr != nil || first.isError {
			t.Fatalf("create on replica 1: %s", first)
		}
		again := c.callMeta(r2, tokenAlice, "booking.create", args, meta)
		if string(again.structured) != string(first.structured) || again.isError {
			t.Errorf("the repeat on replica 2 = %s, want the first outcome %s", again, first.structured)
		}
		outs := race(20, func(i int) dsOutcome { return c.callMeta(replicas[i%2], tokenAlice, "booking.create", args, meta) })
		for _, o := range outs {
			if o.err != nil || o.rpcErr != nil || o.isError || string(o.structured) != string(first.structured) {
				t.Errorf("a racing repeat: %s", o)
			}
		}
		// Without the key the slot is taken: there is exactly one booking.
		if o := c.call(r2, tokenAlice, "booking.create", args); !o.isError || !strings.Contains(o.text, "already booked") {
			t.Errorf("a create without the key: %s, want the slot already booked", o)
		}
	})

	t.Run("events published on one are polled on the other", func(t *testing.T) {
		raw, err := c.mustCall(t, r1, tokenAlice, "booking.create", map[string]any{
			"resource_id": "room-cirrus", "start": freeSlot(t, c, r1, "room-cirrus"),
		})
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &b)
		var seen []string
		for after, more := 0.0, true; more; {
			raw, err := c.mustCall(t, r2, tokenAlice, "events.poll", map[string]any{"after": after})
			if err != nil {
				t.Fatal(err)
			}
			var page struct {
				Events []struct {
					Type string `json:"type"`
					ID   string `json:"id"`
				} `json:"events"`
				Next float64 `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatal(err)
			}
			for _, e := range page.Events {
				seen = append(seen, e.Type+"/"+e.ID)
			}
			after, more = page.Next, page.Next != after
		}
		if !slices.Contains(seen, "booking.created/"+b.ID) {
			t.Errorf("replica 2 polls %v, want booking.created/%s from replica 1", seen, b.ID)
		}
	})

	t.Run("each replica's index follows the shared stream", func(t *testing.T) {
		if _, err := c.mustCall(t, r1, tokenAdmin, "booking.add_resource", map[string]any{
			"id": "room-replica", "name": "Replica room", "kind": "room", "description": "Room with a harpsichord.",
			"capacity": 4, "slot_minutes": 60, "opens": "08:00", "closes": "18:00",
		}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for _, r := range replicas {
			for {
				raw, err := c.mustCall(t, r, tokenGuest, "platform.search", map[string]any{"query": "harpsichord"})
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(raw), `"id":"room-replica"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: platform.search does not find the resource added on replica 1: %s", r.base, raw)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
}

// race runs n calls at once and returns their outcomes in call order.
func race(n int, call func(i int) dsOutcome) []dsOutcome {
	outs := make([]dsOutcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			outs[i] = call(i)
		})
	}
	close(start)
	wg.Wait()
	return outs
}
