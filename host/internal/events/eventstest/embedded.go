package eventstest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/capgate/capgate/host/internal/events"
)

// Embedded opens the host's default bus, an embedded JetStream store, in a
// directory of the test's own, retaining bufferSize events, and closes it
// at cleanup. Its warnings and errors go to the test's log.
func Embedded(t testing.TB, bufferSize int) *events.NATS {
	t.Helper()
	return EmbeddedIn(t, t.TempDir(), events.EmbeddedConfig{BufferSize: bufferSize})
}

// EmbeddedIn opens an embedded bus with cfg over dir, which may hold the
// store of a bus opened (and closed) before, and closes it at cleanup.
// cfg.Dir is set to dir; a nil cfg.Logger logs to the test's log.
func EmbeddedIn(t testing.TB, dir string, cfg events.EmbeddedConfig) *events.NATS {
	t.Helper()
	cfg.Dir = dir
	if cfg.Logger == nil {
		cfg.Logger = TestLogger(t)
	}
	bus, err := events.OpenEmbedded(context.Background(), cfg)
	if err != nil {
		t.Fatalf("embedded event bus in %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return bus
}

// TestLogger logs warnings and errors to t's log until t's cleanup, and
// drops them after: a testing.T must not be logged to once its test is done.
func TestLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs after the buses close
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
