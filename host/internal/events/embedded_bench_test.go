package events_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
)

// The benchmarks below compare two cases side by side: each iteration runs
// both, one after the other, and reports each one's mean and their ratio,
// so that a noisy machine slows both alike. Their stores are under TMPDIR,
// which must be on a disk, not a tmpfs, for the numbers to mean anything.

// BenchmarkOpenEmbedded measures what the embedded bus adds to a host's
// start: opening (and closing, not timed) a fresh store, and one holding a
// full default window of DefaultBufferSize events.
//
//	go test -run '^$' -bench OpenEmbedded -count 5 ./host/internal/events
func BenchmarkOpenEmbedded(b *testing.B) {
	ctx := context.Background()
	open := func(dir string) (*events.NATS, time.Duration) {
		start := time.Now()
		bus, err := events.OpenEmbedded(ctx, events.EmbeddedConfig{Dir: dir, Logger: quiet})
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		return bus, took
	}
	closeBus := func(bus *events.NATS) {
		if err := bus.Close(); err != nil {
			b.Fatal(err)
		}
	}
	existing := b.TempDir()
	bus, _ := open(existing)
	for i := range events.DefaultBufferSize {
		if _, err := bus.Publish(ctx, events.Event{Type: "booking.created", Entity: "booking", ID: fmt.Sprint(i), UserID: "alice"}); err != nil {
			b.Fatal(err)
		}
	}
	closeBus(bus)
	fresh := b.TempDir()

	var freshTotal, existingTotal time.Duration
	n := 0
	for b.Loop() {
		bus, took := open(fmt.Sprintf("%s/%d", fresh, n))
		freshTotal += took
		closeBus(bus)
		bus, took = open(existing)
		existingTotal += took
		if st, err := bus.State(ctx); err != nil || st.Last != events.DefaultBufferSize {
			b.Fatalf("reopened store: %+v, %v", st, err)
		}
		closeBus(bus)
		n++
	}
	b.ReportMetric(float64(freshTotal.Microseconds())/float64(n)/1000, "fresh-ms/open")
	b.ReportMetric(float64(existingTotal.Microseconds())/float64(n)/1000, "existing-ms/open")
	b.ReportMetric(float64(existingTotal)/float64(freshTotal), "existing/fresh")
}

// BenchmarkEmbeddedPublish compares one acknowledged publish on the store's
// default, written to the OS before the acknowledgement and synced to disk
// in the background, with SyncAlways, synced to disk before it.
//
//	go test -run '^$' -bench EmbeddedPublish -count 5 ./host/internal/events
func BenchmarkEmbeddedPublish(b *testing.B) {
	ctx := context.Background()
	open := func(syncAlways bool) *events.NATS {
		bus, err := events.OpenEmbedded(ctx, events.EmbeddedConfig{Dir: b.TempDir(), SyncAlways: syncAlways, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bus.Close() })
		return bus
	}
	background, always := open(false), open(true)
	ev := events.Event{Type: "booking.created", Entity: "booking", ID: "bk_1", UserID: "alice", Data: []byte(`{"resource_id":"room-aurora"}`)}
	publish := func(bus *events.NATS) time.Duration {
		start := time.Now()
		if _, err := bus.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var backgroundTotal, alwaysTotal time.Duration
	n := 0
	for b.Loop() {
		backgroundTotal += publish(background)
		alwaysTotal += publish(always)
		n++
	}
	b.ReportMetric(float64(backgroundTotal.Nanoseconds())/float64(n)/1000, "background-µs/publish")
	b.ReportMetric(float64(alwaysTotal.Nanoseconds())/float64(n)/1000, "always-µs/publish")
	b.ReportMetric(float64(alwaysTotal)/float64(backgroundTotal), "always/background")
}
