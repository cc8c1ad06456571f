package app_test

import (
	"context"
	"fmt"
	"net"
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
// the in-process bus when natsURL is empty.
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

// TestPluginsPublishOnTheBus: the booking plugin's seed events, published
// over the host service while it is configured, are on the host's bus.
func TestPluginsPublishOnTheBus(t *testing.T) {
	for _, bus := range []string{"in-process", "nats"} {
		t.Run(bus, func(t *testing.T) {
			cfg := bookingConfig(t, "", "")
			if bus == "nats" {
				url := eventstest.NATSURL(t)
				cfg = bookingConfig(t, url, uniqueStream(t, url))
			}
			a, err := app.New(context.Background(), cfg, quiet())
			if err != nil {
				t.Fatal(err)
			}
			defer a.Serve(canceled(), listen(t)) // stops at once, closing everything
			evs, _, err := a.Bus().Since(context.Background(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 7 {
				t.Fatalf("bus holds %d events, want the 7 seed catalogue.upsert: %+v", len(evs), evs)
			}
			for _, ev := range evs {
				if ev.Type != "catalogue.upsert" || ev.Entity != "booking.resource" || ev.UserID != "" || ev.At.IsZero() {
					t.Errorf("event %+v", ev)
				}
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
