package pluginhost_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/host/internal/pluginhost"
)

func publisher(events string) pluginhost.Spec {
	return pluginhost.Spec{Name: "publisher", Path: filepath.Join(bins, "publisher"),
		Config: json.RawMessage(`{"events":` + events + `}`), ConfigPath: "plugins[0]"}
}

func startWithBus(t *testing.T, bus events.Bus, spec pluginhost.Spec) error {
	t.Helper()
	h, err := pluginhost.Start(context.Background(), []pluginhost.Spec{spec}, pluginhost.Options{
		DataDir: t.TempDir(), HostVersion: "test", StartTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Events: bus,
	})
	if h != nil {
		t.Cleanup(h.Stop)
	}
	return err
}

func TestPluginPublishes(t *testing.T) {
	bus := eventstest.Embedded(t, 10)
	err := startWithBus(t, bus, publisher(`[
		{"type":"booking.created","entity":"booking","id":"b1","user_id":"alice","data":{"resource_id":"r1"}},
		{"type":"catalogue.upsert","entity":"booking.resource","id":"r1"}]`))
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := bus.Since(context.Background(), 0, 10)
	if err != nil || len(evs) != 2 {
		t.Fatalf("bus holds %+v, %v", evs, err)
	}
	if e := evs[0]; e.Cursor != 1 || e.Type != "booking.created" || e.Entity != "booking" || e.ID != "b1" || e.UserID != "alice" || string(e.Data) != `{"resource_id":"r1"}` {
		t.Errorf("first event %+v", e)
	}
	if e := evs[1]; e.UserID != "" || e.Data != nil {
		t.Errorf("second event %+v; want no user and no data", e)
	}
}

func TestPluginPublishRefused(t *testing.T) {
	bus := eventstest.Embedded(t, 10)
	closed := eventstest.Embedded(t, 10)
	closed.Close()
	for _, tc := range []struct {
		name   string
		bus    events.Bus
		events string
		want   string
	}{
		{"malformed type", bus, `[{"type":"Booking Created","entity":"booking","id":"b1"}]`, `events[0]: publish Booking Created: InvalidArgument: invalid event: type "Booking Created" is not dotted`},
		{"no id", bus, `[{"type":"booking.created","entity":"booking"}]`, "InvalidArgument: invalid event: id is empty"},
		{"no entity", bus, `[{"type":"booking.created","id":"b1"}]`, "InvalidArgument: invalid event: entity is empty"},
		{"no bus", nil, `[{"type":"booking.created","entity":"booking","id":"b1"}]`, "Unavailable: this host has no event bus"},
		{"closed bus", closed, `[{"type":"booking.created","entity":"booking","id":"b1"}]`, "Unavailable: event bus: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startWithBus(t, tc.bus, publisher(tc.events))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `plugins[0]: plugin "publisher"`) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
		})
	}
	if evs, _, _ := bus.Since(context.Background(), 0, 10); len(evs) != 0 {
		t.Errorf("refused events reached the bus: %+v", evs)
	}
}
