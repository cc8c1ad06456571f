package events_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
)

// publisherEnv makes the test binary a publisher for
// TestEmbeddedAckedEventsSurviveKill instead of running tests: it opens the
// embedded store in the directory the variable names and publishes into it
// until it is killed.
const publisherEnv = "CAPGATE_EVENTS_TEST_PUBLISHER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(publisherEnv); dir != "" {
		os.Exit(publishUntilKilled(dir))
	}
	os.Exit(m.Run())
}

// killBuffer retains more events than the publisher can publish before it
// is killed, so that every acknowledged event must still be there.
const killBuffer = 100_000

// publishUntilKilled prints the bus id, then "acked CURSOR ID" after each
// acknowledged publish. A parent that goes away takes it down with SIGPIPE
// on the next line.
func publishUntilKilled(dir string) int {
	ctx := context.Background()
	bus, err := events.OpenEmbedded(ctx, events.EmbeddedConfig{Dir: dir, BufferSize: killBuffer, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st, err := bus.State(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("id %s\n", st.ID)
	for i := range killBuffer {
		id := fmt.Sprintf("bk_%d", i)
		c, err := bus.Publish(ctx, events.Event{Type: "booking.created", Entity: "booking", ID: id, UserID: "alice"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("acked %d %s\n", c, id)
	}
	select {} // never closes the bus: only a kill ends it
}

// TestEmbeddedAckedEventsSurviveKill kills a process publishing into an
// embedded store with SIGKILL, mid-burst and without warning, and reopens
// the store: every event whose publish was acknowledged is there, under the
// same bus id, and the dead process's lock does not keep the store shut.
// While the publisher lives, opening its store is refused, naming it.
func TestEmbeddedAckedEventsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), publisherEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(out)
	next := func() (string, bool) {
		if !lines.Scan() {
			return "", false
		}
		return lines.Text(), true
	}
	first, ok := next()
	id, found := strings.CutPrefix(first, "id ")
	if !ok || !found {
		t.Fatalf("publisher said %q; stderr: %s", first, stderr.String())
	}
	acked := map[uint64]string{}
	record := func(line string) {
		var c uint64
		var evID string
		if _, err := fmt.Sscanf(line, "acked %d %s", &c, &evID); err != nil {
			t.Fatalf("publisher said %q: %v", line, err)
		}
		acked[c] = evID
	}
	for len(acked) < 300 {
		line, ok := next()
		if !ok {
			t.Fatalf("publisher stopped after %d events; stderr: %s", len(acked), stderr.String())
		}
		record(line)
	}

	_, err = events.OpenEmbedded(context.Background(), events.EmbeddedConfig{Dir: dir, Logger: quiet})
	want := fmt.Sprintf("the event store %s is in use: another capgate process (pid %d) holds its lock", dir, cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("opening a live publisher's store: err = %v, want it to say %q", err, want)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup runs
		t.Fatal(err)
	}
	killed = true
	// Whatever it printed before dying was acknowledged too.
	for {
		line, ok := next()
		if !ok {
			break
		}
		if strings.HasPrefix(line, "acked ") && strings.Count(line, " ") == 2 {
			record(line)
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != -1 {
		t.Fatalf("publisher ended with %v, want killed by a signal; stderr: %s", err, stderr.String())
	}

	bus := eventstest.EmbeddedIn(t, dir, events.EmbeddedConfig{BufferSize: killBuffer})
	st, err := bus.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != id {
		t.Errorf("bus id after the kill = %q, want %q", st.ID, id)
	}
	var last uint64
	for c := range acked {
		last = max(last, c)
	}
	if st.Last < last {
		t.Fatalf("store ends at cursor %d, but %d was acknowledged", st.Last, last)
	}
	evs, _, err := bus.Since(context.Background(), 0, int(st.Last))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]string{}
	for _, e := range evs {
		stored[e.Cursor] = e.ID
	}
	lost := 0
	for c, evID := range acked {
		if stored[c] != evID {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged event %d (%s) after the kill: %q", c, evID, stored[c])
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged events lost to kill -9", lost, len(acked))
	}
	t.Logf("%d acknowledged events, all kept; the store holds %d", len(acked), len(evs))
	// The reopened store goes on from where the dead process stopped.
	c, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "after"})
	if err != nil || c != st.Last+1 {
		t.Fatalf("publish after the kill: cursor %d, %v; want %d", c, err, st.Last+1)
	}
}

func TestEmbeddedStoreIsLockedToOneBus(t *testing.T) {
	dir := t.TempDir()
	bus := eventstest.EmbeddedIn(t, dir, events.EmbeddedConfig{BufferSize: 10})
	if _, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "b1"}); err != nil {
		t.Fatal(err)
	}
	_, err := events.OpenEmbedded(context.Background(), events.EmbeddedConfig{Dir: dir, Logger: quiet})
	if err == nil {
		t.Fatal("a second bus opened a store in use")
	}
	for _, want := range []string{dir, "is in use", "this process"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to mention %q", err, want)
		}
	}
	// The refused open left the first bus working.
	if evs, _, err := bus.Since(context.Background(), 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("first bus after the refused open: %v, %v", evs, err)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	// Once closed, the store is free again.
	again := eventstest.EmbeddedIn(t, dir, events.EmbeddedConfig{BufferSize: 10})
	if st, err := again.State(context.Background()); err != nil || st.Last != 1 {
		t.Fatalf("reopened: %+v, %v; want the event kept", st, err)
	}
}

func TestOpenEmbeddedRejectsBadConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		cfg  events.EmbeddedConfig
		want string
	}{
		{"no dir", events.EmbeddedConfig{}, "store directory is empty"},
		{"negative size", events.EmbeddedConfig{Dir: t.TempDir(), BufferSize: -1}, "buffer size must not be negative"},
		{"dir is a file", events.EmbeddedConfig{Dir: file}, "not-a-dir"},
		{"dir under a file", events.EmbeddedConfig{Dir: filepath.Join(file, "events")}, "create store directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Logger = quiet
			bus, err := events.OpenEmbedded(context.Background(), tc.cfg)
			if err == nil {
				bus.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestEmbeddedReopenAppliesBufferSize: a host restarted with a smaller
// events_buffer_size keeps the newest events that fit, under the same id.
func TestEmbeddedReopenAppliesBufferSize(t *testing.T) {
	dir := t.TempDir()
	bus := eventstest.EmbeddedIn(t, dir, events.EmbeddedConfig{BufferSize: 10})
	for i := range 8 {
		if _, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := bus.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.Close(); err != nil {
		t.Fatal(err)
	}
	bus = eventstest.EmbeddedIn(t, dir, events.EmbeddedConfig{BufferSize: 3})
	st, err := bus.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := (events.State{ID: before.ID, Oldest: 6, Last: 8}); st != want {
		t.Fatalf("state after reopening with 3 retained = %+v, want %+v", st, want)
	}
}

// TestEmbeddedListensOnNoPort: the embedded server is reached in-process
// only; opening it adds no socket to the process.
func TestEmbeddedListensOnNoPort(t *testing.T) {
	before, err := sockets()
	if err != nil {
		t.Skipf("cannot list this process's sockets: %v", err)
	}
	bus := eventstest.Embedded(t, 10)
	if _, err := bus.Publish(context.Background(), events.Event{Type: "booking.created", Entity: "booking", ID: "b1"}); err != nil {
		t.Fatal(err)
	}
	after, err := sockets()
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("sockets open: %d before the embedded bus, %d with it", before, after)
	}
}

// sockets counts the file descriptors of this process that are sockets.
func sockets() (int, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if _, err := strconv.Atoi(fd.Name()); err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n, nil
}
