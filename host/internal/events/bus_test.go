package events_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var fastBackoff = events.Backoff{Min: 10 * time.Millisecond, Max: 50 * time.Millisecond}

// TestEmbeddedContract runs the contract against the host's default bus:
// each bus a store of its own, reopened over the same directory.
func TestEmbeddedContract(t *testing.T) {
	type store struct {
		dir  string
		size int
	}
	var mu sync.Mutex
	stores := map[events.Bus]store{}
	open := func(t *testing.T, s store) events.Bus {
		bus := eventstest.EmbeddedIn(t, s.dir, events.EmbeddedConfig{BufferSize: s.size, Backoff: fastBackoff})
		mu.Lock()
		stores[bus] = s
		mu.Unlock()
		return bus
	}
	eventstest.RunContract(t, eventstest.Harness{
		New: func(t *testing.T, size int) events.Bus { return open(t, store{t.TempDir(), size}) },
		Reopen: func(t *testing.T, old events.Bus) events.Bus {
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			s := stores[old]
			mu.Unlock()
			return open(t, s)
		},
		Leftovers: func(t *testing.T, bus events.Bus) []string {
			names, err := bus.(*events.NATS).ConsumerNames(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return names
		},
	})
}

var natsSeq atomic.Int64

func TestNATSContract(t *testing.T) {
	url := eventstest.NATSURL(t)
	open := func(t *testing.T, stream string, size int) *events.NATS {
		t.Helper()
		bus, err := events.OpenNATS(context.Background(), events.NATSConfig{
			URL:           url,
			Stream:        stream,
			SubjectPrefix: "capgate_test." + stream,
			BufferSize:    size,
			Backoff:       fastBackoff,
			Logger:        quiet,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bus.Close() })
		return bus
	}
	sizes := map[events.Bus]struct {
		stream string
		size   int
	}{}
	eventstest.RunContract(t, eventstest.Harness{
		New: func(t *testing.T, size int) events.Bus {
			stream := fmt.Sprintf("CAPGATE_TEST_%d_%d", time.Now().UnixNano(), natsSeq.Add(1))
			bus := open(t, stream, size)
			sizes[bus] = struct {
				stream string
				size   int
			}{stream, size}
			t.Cleanup(func() {
				// A bus of its own, as the test may have closed the others.
				admin := open(t, stream, size)
				if err := admin.DeleteStream(context.Background()); err != nil {
					t.Errorf("cleanup: %v", err)
				}
			})
			return bus
		},
		Reopen: func(t *testing.T, old events.Bus) events.Bus {
			if err := old.Close(); err != nil {
				t.Fatal(err)
			}
			s := sizes[old]
			bus := open(t, s.stream, s.size)
			sizes[bus] = s
			return bus
		},
		Leftovers: func(t *testing.T, bus events.Bus) []string {
			names, err := bus.(*events.NATS).ConsumerNames(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return names
		},
	})
}

func TestOpenNATSIsIdempotent(t *testing.T) {
	url := eventstest.NATSURL(t)
	stream := fmt.Sprintf("CAPGATE_TEST_IDEM_%d", time.Now().UnixNano())
	cfg := events.NATSConfig{URL: url, Stream: stream, SubjectPrefix: "capgate_test." + stream, BufferSize: 10, Logger: quiet}
	a, err := events.OpenNATS(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer a.DeleteStream(context.Background())
	c1, err := a.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.BufferSize = 20 // a second host with a changed size updates the stream
	b, err := events.OpenNATS(context.Background(), cfg)
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	defer b.Close()
	c2, err := b.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "b2"})
	if err != nil {
		t.Fatal(err)
	}
	if c2 != c1+1 {
		t.Fatalf("cursor after reopen = %d, want %d: the stream was not kept", c2, c1+1)
	}
	evs, _, err := a.Since(context.Background(), 0, 10)
	if err != nil || len(evs) != 2 || evs[1].ID != "b2" {
		t.Fatalf("Since over both hosts: %+v, %v", evs, err)
	}
}

func TestOpenNATSRejectsBadConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  events.NATSConfig
	}{
		{"no url", events.NATSConfig{}},
		{"bad stream name", events.NATSConfig{URL: "nats://127.0.0.1:1", Stream: "a.b"}},
		{"wildcard prefix", events.NATSConfig{URL: "nats://127.0.0.1:1", SubjectPrefix: "capgate.>"}},
		{"negative size", events.NATSConfig{URL: "nats://127.0.0.1:1", BufferSize: -1}},
		{"nothing listening", events.NATSConfig{URL: "nats://127.0.0.1:1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if bus, err := events.OpenNATS(context.Background(), tc.cfg); err == nil {
				bus.Close()
				t.Fatal("no error")
			}
		})
	}
}

// TestEmbeddedCloseLeavesNoGoroutines: Close stops the subscriptions,
// those waiting out a backoff included, and the embedded server.
func TestEmbeddedCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	bus, err := events.OpenEmbedded(context.Background(), events.EmbeddedConfig{Dir: t.TempDir(), BufferSize: 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		fail := i%2 == 0 // half of them sit in a backoff wait
		if _, err := bus.Subscribe(context.Background(), fmt.Sprintf("s%d", i), 0, func(context.Context, events.Event) error {
			if fail {
				return errors.New("failing")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSubscriberBehindRetentionStartsAtOldest: a subscription starting
// after a cursor whose successors were discarded begins at the oldest
// retained event.
func TestSubscriberBehindRetentionStartsAtOldest(t *testing.T) {
	bus := eventstest.Embedded(t, 3)
	for i := range 10 {
		if _, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan uint64, 10)
	if _, err := bus.Subscribe(context.Background(), "behind", 2, func(_ context.Context, e events.Event) error {
		got <- e.Cursor
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{8, 9, 10} {
		select {
		case c := <-got:
			if c != want {
				t.Fatalf("delivered %d, want %d", c, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing delivered, want %d", want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	b := events.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	cases := []struct {
		failures int
		want     time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{1000, time.Second},
	}
	for _, tc := range cases {
		if got := b.Delay(tc.failures); got != tc.want {
			t.Errorf("Delay(%d) = %v, want %v", tc.failures, got, tc.want)
		}
	}
	if got := (events.Backoff{}).Delay(1); got != events.DefaultBackoff.Min {
		t.Errorf("zero Backoff: Delay(1) = %v, want %v", got, events.DefaultBackoff.Min)
	}
}

// TestEmbeddedNATS checks the fallback make test uses on a machine without a
// NATS server: the embedded server carries a bus.
func TestEmbeddedNATS(t *testing.T) {
	bus, err := events.OpenNATS(context.Background(), events.NATSConfig{URL: eventstest.EmbeddedNATS(t), BufferSize: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	for i := range 3 {
		if _, err := bus.Publish(context.Background(), events.Event{Type: "catalogue.upsert", Entity: "booking.resource", ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	evs, oldest, err := bus.Since(context.Background(), 1, 10)
	if err != nil || oldest != 2 || len(evs) != 2 || evs[0].ID != "1" || evs[1].ID != "2" {
		t.Fatalf("Since(1) = %+v, oldest %d, %v; want ids 1, 2 from oldest 2", evs, oldest, err)
	}
}
