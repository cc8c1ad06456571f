package events

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// restartable is a NATS server of the test's own that it can stop and
// start again on the same port and store, as an operator's server restarts.
type restartable struct {
	t    *testing.T
	port int
	dir  string
	srv  *server.Server
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, port: server.RANDOM_PORT, dir: t.TempDir()}
	r.start()
	r.port = r.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", r.port) }

func (r *restartable) start() {
	r.t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: r.port, JetStream: true, StoreDir: r.dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		r.t.Fatalf("NATS server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		r.t.Fatal("NATS server did not become ready")
	}
	r.srv = srv
}

func (r *restartable) stop() {
	if r.srv != nil {
		r.srv.Shutdown()
		r.srv.WaitForShutdown()
		r.srv = nil
	}
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

func openWithOutbox(t *testing.T, url, outbox string) *NATS {
	t.Helper()
	bus, err := OpenNATS(context.Background(), NATSConfig{
		URL: url, Stream: "OUTBOX", SubjectPrefix: "outbox_test", Logger: quietLog,
		OutboxDir: outbox, PublishWait: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	return bus
}

// waitStream waits until the stream holds want events, at most 30 s, and
// returns their IDs in order.
func waitStream(t *testing.T, bus *NATS, want int) []string {
	t.Helper()
	var ids []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		evs, _, err := bus.Since(context.Background(), 0, 100)
		ids = ids[:0]
		for _, ev := range evs {
			ids = append(ids, ev.ID)
		}
		if err == nil && len(evs) >= want && !bus.out.waiting() {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %v (err %v), want %d events; outbox waiting %v", ids, err, want, bus.out.waiting())
		}
	}
}

func publish(t *testing.T, bus *NATS, id string) uint64 {
	t.Helper()
	cur, err := bus.Publish(context.Background(), Event{Type: "thing.done", Entity: "thing", ID: id})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
	return cur
}

func kept(t *testing.T, dir string) int {
	t.Helper()
	n, err := countKept(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutboxKeepsEventsWhileNATSIsAway: with the server stopped, Publish
// keeps events on disk instead of waiting on the server, and once it is
// back they reach the stream in order, each exactly once (the copies the
// client buffered while reconnecting are deduplicated by message id).
func TestOutboxKeepsEventsWhileNATSIsAway(t *testing.T) {
	srv := newRestartable(t)
	dir := t.TempDir()
	bus := openWithOutbox(t, srv.url(), dir)
	if cur := publish(t, bus, "a"); cur == 0 {
		t.Fatal("publish with the server up: cursor 0, want the stream sequence")
	}

	srv.stop()
	for _, id := range []string{"b", "c", "d"} {
		if cur := publish(t, bus, id); cur != 0 {
			t.Fatalf("publish %s with the server away: cursor %d, want 0 (kept)", id, cur)
		}
	}
	if n := kept(t, dir); n != 3 {
		t.Fatalf("outbox holds %d events, want 3", n)
	}

	srv.start()
	if got := strings.Join(waitStream(t, bus, 4), ","); got != "a,b,c,d" {
		t.Fatalf("stream holds %s, want a,b,c,d", got)
	}
	if n := kept(t, dir); n != 0 {
		t.Fatalf("outbox still holds %d events", n)
	}
	// Published directly again once the outbox is empty.
	if cur := publish(t, bus, "e"); cur != 5 {
		t.Fatalf("publish after recovery: cursor %d, want 5", cur)
	}
}

// TestOutboxSurvivesTheHost: events kept when the host stops are sent by
// the next host opening the same outbox.
func TestOutboxSurvivesTheHost(t *testing.T) {
	srv := newRestartable(t)
	dir := t.TempDir()
	bus := openWithOutbox(t, srv.url(), dir)
	publish(t, bus, "a")
	srv.stop()
	publish(t, bus, "b")
	if err := bus.Close(); err != nil && !strings.Contains(err.Error(), "flush") {
		t.Fatal(err)
	}
	if n := kept(t, dir); n != 1 {
		t.Fatalf("outbox holds %d events after close, want 1", n)
	}

	srv.start()
	next := openWithOutbox(t, srv.url(), dir)
	if got := strings.Join(waitStream(t, next, 2), ","); got != "a,b" {
		t.Fatalf("stream holds %s, want a,b", got)
	}
}

// TestOutboxSendsAnEventOnce: an event kept after the server stored it (its
// acknowledgement lost) is stored once, not twice.
func TestOutboxSendsAnEventOnce(t *testing.T) {
	srv := newRestartable(t)
	dir := t.TempDir()
	bus := openWithOutbox(t, srv.url(), dir)
	m := message{MsgID: "same-id", Subject: "outbox_test.thing.done", Body: []byte(`{"type":"thing.done","entity":"thing","id":"a","at":"2026-01-01T00:00:00Z"}`)}
	if _, err := bus.send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if err := bus.out.keep(m); err != nil {
		t.Fatal(err)
	}
	if got := waitStream(t, bus, 1); len(got) != 1 {
		t.Fatalf("stream holds %v, want one event", got)
	}
	if cur := publish(t, bus, "b"); cur != 2 {
		t.Fatalf("next cursor %d, want 2: the kept copy was stored again", cur)
	}
}

// TestOutboxSetsAsideWhatCannotBeRead: a damaged file does not block the
// events behind it.
func TestOutboxSetsAsideWhatCannotBeRead(t *testing.T) {
	srv := newRestartable(t)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/00000000000000000001.json", []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	bus := openWithOutbox(t, srv.url(), dir)
	publish(t, bus, "a") // kept behind the damaged file, or sent once it is set aside
	if got := strings.Join(waitStream(t, bus, 1), ","); got != "a" {
		t.Fatalf("stream holds %s, want a", got)
	}
	if _, err := os.Stat(dir + "/00000000000000000001.json" + outboxSetAs); err != nil {
		t.Fatalf("the damaged file was not set aside: %v", err)
	}
}
