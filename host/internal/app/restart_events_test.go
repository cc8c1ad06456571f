package app_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/app"
)

// TestEventsPollSurvivesRestart: on the default bus (events.nats_url
// empty), an agent's events.poll cursor from before a restart of the host
// goes on after it to exactly the events made since, none skipped and none
// repeated, because the events live in <data_dir>/events.
func TestEventsPollSurvivesRestart(t *testing.T) {
	cfg := bookingConfig(t, "", "")
	book := func(addr, resource string, hour int) string {
		t.Helper()
		slot := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 3).Add(time.Duration(hour) * time.Hour).Format(time.RFC3339)
		out, msg := mcpTool(t, addr, "test-alice-1", "booking.create", map[string]any{"resource_id": resource, "start": slot})
		if msg != "" {
			t.Fatalf("booking.create %s at %s: %s", resource, slot, msg)
		}
		return out["id"].(string)
	}

	addr, stop := serveSearch(t, cfg, nil)
	start := drainEvents(t, addr, "test-alice-1") // past the seed's catalogue events
	first := []string{book(addr, "room-borealis", 9), book(addr, "room-borealis", 10)}
	got, kept := pollEvents(t, addr, "test-alice-1", start)
	want := []string{"booking.created/" + first[0] + "/alice", "booking.created/" + first[1] + "/alice"}
	if !slices.Equal(got, want) || kept != start+2 {
		t.Fatalf("before the restart: %v next %v; want %v next %v", got, kept, want, start+2)
	}
	stop()

	addr, _ = serveSearch(t, cfg, nil)
	// Nothing new yet: the old cursor is neither too old nor past the end.
	if got, next := pollEvents(t, addr, "test-alice-1", kept); len(got) != 0 || next != kept {
		t.Fatalf("right after the restart, polling after %v: %v next %v; want nothing, next %v", kept, got, next, kept)
	}
	second := book(addr, "room-borealis", 11)
	if _, msg := mcpTool(t, addr, "test-alice-1", "booking.cancel", map[string]any{"id": second}); msg != "" {
		t.Fatalf("booking.cancel: %s", msg)
	}
	later := []string{"booking.created/" + second + "/alice", "booking.cancelled/" + second + "/alice"}
	for _, tok := range []string{"test-alice-1", "test-admin-1"} {
		if got, next := pollEvents(t, addr, tok, kept); !slices.Equal(got, later) || next != kept+2 {
			t.Errorf("%s polls after %v: %v next %v; want %v next %v", tok, kept, got, next, later, kept+2)
		}
	}
	// From the cursor before the first bookings: each event once, in order,
	// across the restart.
	if got, _ := pollEvents(t, addr, "test-alice-1", start); !slices.Equal(got, append(want, later...)) {
		t.Errorf("polling after %v: %v; want %v", start, got, append(want, later...))
	}
}

// TestSecondHostOnADataDirIsRefused: a host cannot start on a data_dir
// whose event store a running host holds, and the error says why.
func TestSecondHostOnADataDirIsRefused(t *testing.T) {
	cfg := bookingConfig(t, "", "")
	serveSearch(t, cfg, nil)
	a, err := app.New(context.Background(), cfg, quiet())
	if err == nil {
		a.Close()
		t.Fatal("a second host started on a data_dir in use")
	}
	// Both hosts are in this test's process; the events package's tests
	// show the message naming another process by its pid.
	want := fmt.Sprintf("data_dir: events: the event store %s is in use", filepath.Join(cfg.DataDir, "events"))
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to say %q", err, want)
	}
}
