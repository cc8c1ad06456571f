package switches_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/switches"
	"github.com/capgate/capgate/sdk/pgtest"
)

// engines opens two stores on one database of each engine, as two
// replicas (or a replica and the command line) would.
func engines(t *testing.T) map[string]func(t *testing.T) (*switches.Store, *switches.Store) {
	open := func(t *testing.T, dsn, dir string) *switches.Store {
		t.Helper()
		s, err := switches.Open(context.Background(), dsn, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return map[string]func(t *testing.T) (*switches.Store, *switches.Store){
		"sqlite": func(t *testing.T) (*switches.Store, *switches.Store) {
			dir := t.TempDir()
			return open(t, "", dir), open(t, "", dir)
		},
		"postgres": func(t *testing.T) (*switches.Store, *switches.Store) {
			dsn := pgtest.SchemaDSN(t)
			return open(t, dsn, ""), open(t, dsn, "")
		},
	}
}

// TestKillSwitchIsShared: a switch thrown through one store is read by
// the other, with who and when; released, it reads on again.
func TestKillSwitchIsShared(t *testing.T) {
	for name, pair := range engines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, b := pair(t)
			if st, err := b.Get(ctx); err != nil || st != (switches.State{}) {
				t.Fatalf("never set: %+v, %v; want actions on", st, err)
			}
			before := time.Now().Add(-time.Second)
			if _, err := a.SetActionsOff(ctx, true, "ops-console"); err != nil {
				t.Fatal(err)
			}
			st, err := b.Get(ctx)
			if err != nil || !st.ActionsOff || st.ChangedBy != "ops-console" || st.ChangedAt.Before(before) {
				t.Fatalf("after off: %+v, %v", st, err)
			}
			long := strings.Repeat("é", switches.MaxChangedBy)
			if _, err := b.SetActionsOff(ctx, false, long); err != nil {
				t.Fatal(err)
			}
			st, err = a.Get(ctx)
			if err != nil || st.ActionsOff || len(st.ChangedBy) > switches.MaxChangedBy || !strings.HasPrefix(long, st.ChangedBy) {
				t.Fatalf("after on: %+v, %v", st, err)
			}
		})
	}
}

// TestWatch: the watcher reports the first state and each change, and a
// store that cannot be read keeps the last state and says so once.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	a, err := switches.Open(ctx, "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := switches.Open(ctx, "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []bool
		logs bytes.Buffer
	)
	got := func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), seen...) }
	log := slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Watch(ctx, 10*time.Millisecond, log, func(st switches.State) {
			mu.Lock()
			seen = append(seen, st.ActionsOff)
			mu.Unlock()
		})
	}()
	waitFor(t, func() bool { return len(got()) == 1 })
	if _, err := a.SetActionsOff(ctx, true, "t"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(got()) == 2 })
	if g := got(); g[0] || !g[1] {
		t.Fatalf("states seen %v, want on then off", g)
	}
	// The watcher's database goes away: it keeps what it knew and warns once.
	b.Close()
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "keeping the last one known")
	})
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	warnings := strings.Count(logs.String(), "keeping the last one known")
	mu.Unlock()
	if warnings != 1 || len(got()) != 2 {
		t.Errorf("after the store closed: %d warnings, states %v", warnings, got())
	}
	cancel()
	<-done
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
