package tasks_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/sdk/pgtest"
)

// clock is a time the tests move instead of sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// opener opens a store on the engine under test; every store one opener
// returns shares one database, as replicas do.
type opener func(t *testing.T, c *clock) *tasks.Store

func TestStoreSQLite(t *testing.T) {
	runContract(t, func(t *testing.T) opener {
		path := filepath.Join(t.TempDir(), tasks.FileName)
		return func(t *testing.T, c *clock) *tasks.Store {
			s, err := tasks.OpenSQLite(context.Background(), path, nil, tasks.WithClock(c.now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func TestStorePostgres(t *testing.T) {
	runContract(t, func(t *testing.T) opener {
		dsn := pgtest.SchemaDSN(t)
		return func(t *testing.T, c *clock) *tasks.Store {
			s, err := tasks.OpenPostgres(context.Background(), dsn, nil, tasks.WithClock(c.now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

func TestOpenSQLiteDefault(t *testing.T) {
	dir := t.TempDir()
	s, err := tasks.Open(context.Background(), "", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := tasks.Open(context.Background(), "", filepath.Join(dir, "missing"), nil); err == nil {
		t.Fatal("a missing data directory opened a store")
	}
	if _, err := tasks.Open(context.Background(), "mysql://x", dir, nil); err == nil || !strings.Contains(err.Error(), "tasks config") {
		t.Fatalf("an unknown engine: %v", err)
	}
}

var alice = tasks.Owner{TokenLabel: "tokens-0", UserID: "alice"}

func newTask() tasks.New {
	return tasks.New{Owner: alice, Capability: "report.build", ArgsSHA256: sha256.Sum256([]byte(`{"x":1}`)), TTL: time.Hour}
}

func runContract(t *testing.T, fresh func(t *testing.T) opener) {
	ctx := context.Background()
	setup := func(t *testing.T) (*tasks.Store, opener, *clock) {
		open := fresh(t)
		c := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 123e6, time.UTC)}
		return open(t, c), open, c
	}

	t.Run("RoundTrip", func(t *testing.T) {
		s, _, c := setup(t)
		n := newTask()
		n.Message = "started"
		tk, err := s.Create(ctx, n, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tk.ID, "tk_") || len(tk.ID) < 20 {
			t.Fatalf("id %q", tk.ID)
		}
		got, err := s.Get(ctx, alice, tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tasks.Working || got.Capability != "report.build" || got.ArgsSHA256 != n.ArgsSHA256 || got.Owner != alice ||
			got.Message != "started" || got.Outcome != nil {
			t.Fatalf("got %+v", got)
		}
		// Milliseconds survive both engines: lastUpdatedAt is that precise.
		if !got.CreatedAt.Equal(c.now()) || !got.UpdatedAt.Equal(c.now()) || got.TTL() != time.Hour {
			t.Fatalf("times %v %v ttl %v", got.CreatedAt, got.UpdatedAt, got.TTL())
		}
		c.advance(1500 * time.Millisecond)
		ended, err := s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{"content":[]}`), Message: "done"})
		if err != nil || !ended {
			t.Fatalf("finish: %v %v", ended, err)
		}
		got, _ = s.Get(ctx, alice, tk.ID)
		if got.Status != tasks.Completed || string(got.Outcome) != `{"content":[]}` || got.Message != "done" ||
			got.UpdatedAt.Sub(got.CreatedAt) != 1500*time.Millisecond {
			t.Fatalf("after finish %+v", got)
		}
		// The first end stands.
		ended, err = s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Failed, Payload: []byte(`{"code":-32603}`)})
		if err != nil || ended {
			t.Fatalf("second finish: %v %v", ended, err)
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Completed {
			t.Fatalf("second finish changed it: %+v", got)
		}
	})

	t.Run("OwnerOnly", func(t *testing.T) {
		s, _, _ := setup(t)
		tk, err := s.Create(ctx, newTask(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []tasks.Owner{{TokenLabel: "tokens-1", UserID: "alice"}, {TokenLabel: "tokens-0", UserID: "bob"}, {}} {
			if _, err := s.Get(ctx, o, tk.ID); !errors.Is(err, tasks.ErrNotFound) {
				t.Fatalf("%+v read alice's task: %v", o, err)
			}
			if _, err := s.Cancel(ctx, o, tk.ID, ""); !errors.Is(err, tasks.ErrNotFound) {
				t.Fatalf("%+v cancelled alice's task: %v", o, err)
			}
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Working {
			t.Fatalf("another's cancel changed it: %+v", got)
		}
		_, err = s.Get(ctx, alice, "tk_nosuchtask")
		if !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("missing: %v", err)
		}
		// A caller's ID is quoted bounded.
		_, err = s.Get(ctx, alice, strings.Repeat("x", 10000))
		if !errors.Is(err, tasks.ErrNotFound) || len(err.Error()) > 200 {
			t.Fatalf("long id: %v", err)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		s, _, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		c.advance(time.Second)
		got, err := s.Cancel(ctx, alice, tk.ID, "cancelled by the client")
		if err != nil || got.Status != tasks.Cancelled || got.Message != "cancelled by the client" || !got.UpdatedAt.Equal(c.now()) {
			t.Fatalf("cancel: %+v %v", got, err)
		}
		if st, err := s.Status(ctx, tk.ID); err != nil || st != tasks.Cancelled {
			t.Fatalf("status: %v %v", st, err)
		}
		// The run's end is dropped.
		if ended, err := s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{}`)}); err != nil || ended {
			t.Fatalf("finish after cancel: %v %v", ended, err)
		}
		// Again, and after an end: no error, nothing changes.
		if got, err := s.Cancel(ctx, alice, tk.ID, "again"); err != nil || got.Status != tasks.Cancelled || got.Message != "cancelled by the client" {
			t.Fatalf("cancel again: %+v %v", got, err)
		}
		done, _ := s.Create(ctx, newTask(), 0)
		s.Finish(ctx, done.ID, tasks.Outcome{Status: tasks.Failed, Payload: []byte(`{"code":-32603,"message":"x"}`)})
		if got, err := s.Cancel(ctx, alice, done.ID, ""); err != nil || got.Status != tasks.Failed {
			t.Fatalf("cancel after the end: %+v %v", got, err)
		}
		if _, err := s.Status(ctx, "tk_none"); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("status of none: %v", err)
		}
	})

	t.Run("Progress", func(t *testing.T) {
		s, _, _ := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		if ok, err := s.Progress(ctx, tk.ID, tasks.Working, "approved"); err != nil || !ok {
			t.Fatalf("progress: %v %v", ok, err)
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Working || got.Message != "approved" {
			t.Fatalf("got %+v", got)
		}
		// Waiting on the client is Park's, with its requests; an end is
		// Finish's.
		for _, st := range []tasks.Status{tasks.InputRequired, tasks.Completed} {
			if _, err := s.Progress(ctx, tk.ID, st, ""); !errors.Is(err, tasks.ErrInvalid) {
				t.Fatalf("progress to %s: %v", st, err)
			}
		}
		s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Cancelled})
		if ok, err := s.Progress(ctx, tk.ID, tasks.Working, ""); err != nil || ok {
			t.Fatalf("progress after the end: %v %v", ok, err)
		}
	})

	t.Run("TTL", func(t *testing.T) {
		s, _, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		c.advance(time.Hour - time.Millisecond)
		if _, err := s.Get(ctx, alice, tk.ID); err != nil {
			t.Fatalf("before its TTL: %v", err)
		}
		c.advance(time.Millisecond)
		if _, err := s.Get(ctx, alice, tk.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("at its TTL: %v", err)
		}
		if _, err := s.Cancel(ctx, alice, tk.ID, ""); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("cancel at its TTL: %v", err)
		}
	})

	t.Run("Bound", func(t *testing.T) {
		s, _, c := setup(t)
		var ids []string
		for range 2 {
			tk, err := s.Create(ctx, newTask(), 2)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tk.ID)
		}
		if _, err := s.Create(ctx, newTask(), 2); !errors.Is(err, tasks.ErrTooMany) {
			t.Fatalf("third: %v", err)
		}
		// Another principal has its own count.
		other := newTask()
		other.Owner.UserID = "bob"
		if _, err := s.Create(ctx, other, 2); err != nil {
			t.Fatal(err)
		}
		// An ended task no longer counts, nor an expired one.
		s.Finish(ctx, ids[0], tasks.Outcome{Status: tasks.Cancelled})
		if _, err := s.Create(ctx, newTask(), 2); err != nil {
			t.Fatalf("after an end: %v", err)
		}
		c.advance(2 * time.Hour)
		if _, err := s.Create(ctx, newTask(), 2); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		s, _, _ := setup(t)
		bad := []func(*tasks.New){
			func(n *tasks.New) { n.Capability = "" },
			func(n *tasks.New) { n.Capability = strings.Repeat("c", tasks.MaxField+1) },
			func(n *tasks.New) { n.Owner.TokenLabel = "\xff" },
			func(n *tasks.New) { n.Owner.UserID = strings.Repeat("u", tasks.MaxField+1) },
			func(n *tasks.New) { n.TTL = time.Millisecond },
			func(n *tasks.New) { n.TTL = tasks.MaxTTL + time.Second },
			func(n *tasks.New) { n.Message = strings.Repeat("m", tasks.MaxMessage+1) },
			func(n *tasks.New) { n.ApprovalID = strings.Repeat("a", tasks.MaxField+1) },
		}
		for i, f := range bad {
			n := newTask()
			f(&n)
			if _, err := s.Create(ctx, n, 0); !errors.Is(err, tasks.ErrInvalid) {
				t.Errorf("case %d: %v", i, err)
			}
		}
		if _, err := s.Create(ctx, newTask(), -1); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("negative bound: %v", err)
		}
		tk, _ := s.Create(ctx, newTask(), 0)
		for i, o := range []tasks.Outcome{
			{Status: tasks.Working},
			{Status: "done", Payload: []byte(`{}`)},
			{Status: tasks.Completed},
			{Status: tasks.Failed, Payload: []byte{}},
			{Status: tasks.Cancelled, Payload: []byte(`{}`)},
			{Status: tasks.Completed, Payload: []byte(`{}`), Message: "\xff"},
		} {
			if _, err := s.Finish(ctx, tk.ID, o); !errors.Is(err, tasks.ErrInvalid) {
				t.Errorf("outcome %d: %v", i, err)
			}
		}
		if got, _ := s.Get(ctx, alice, tk.ID); got.Status != tasks.Working {
			t.Fatalf("an invalid end changed it: %+v", got)
		}
		if _, err := s.Cancel(ctx, alice, tk.ID, strings.Repeat("m", tasks.MaxMessage+1)); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("long cancel message: %v", err)
		}
		if _, _, err := s.Sweep(ctx, time.Now(), nil); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("sweep without a lost outcome: %v", err)
		}
	})

	t.Run("Sweep", func(t *testing.T) {
		s, _, c := setup(t)
		short := newTask()
		short.TTL = time.Minute
		gone, _ := s.Create(ctx, short, 0)
		lost, _ := s.Create(ctx, newTask(), 0)
		done, _ := s.Create(ctx, newTask(), 0)
		s.Finish(ctx, done.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{}`)})
		c.advance(10 * time.Minute)
		young, _ := s.Create(ctx, newTask(), 0)
		heldTask := newTask()
		heldTask.ApprovalID = "ap_1"
		c.advance(-10 * time.Minute)
		held, _ := s.Create(ctx, heldTask, 0)
		c.advance(10 * time.Minute)
		deleted, ended, err := s.Sweep(ctx, c.now().Add(-5*time.Minute), []byte(`{"code":-32603,"message":"lost"}`))
		if err != nil || deleted != 1 || ended != 1 {
			t.Fatalf("sweep: %d %d %v", deleted, ended, err)
		}
		if _, err := s.Status(ctx, gone.ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("expired task kept: %v", err)
		}
		if got, _ := s.Get(ctx, alice, lost.ID); got.Status != tasks.Failed || string(got.Outcome) != `{"code":-32603,"message":"lost"}` {
			t.Fatalf("lost task: %+v", got)
		}
		if got, _ := s.Get(ctx, alice, done.ID); got.Status != tasks.Completed {
			t.Fatalf("finished task: %+v", got)
		}
		if got, _ := s.Get(ctx, alice, young.ID); got.Status != tasks.Working {
			t.Fatalf("young task: %+v", got)
		}
		// A held call's task waits for its human, not for a run.
		if got, _ := s.Get(ctx, alice, held.ID); got.Status != tasks.Working || got.ApprovalID != "ap_1" {
			t.Fatalf("held task: %+v", got)
		}
	})

	t.Run("Replicas", func(t *testing.T) {
		// Two stores on one database: what one creates the other answers
		// at once, and of a run ending and a cancel racing, one wins.
		s, open, c := setup(t)
		other := open(t, c)
		for range 20 {
			tk, err := s.Create(ctx, newTask(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.Get(ctx, alice, tk.ID); err != nil {
				t.Fatalf("created on one, read on the other: %v", err)
			}
			var wins atomic.Int32
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				if ok, err := s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{}`)}); err != nil {
					t.Error(err)
				} else if ok {
					wins.Add(1)
				}
			}()
			go func() {
				defer wg.Done()
				if ok, err := other.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Cancelled}); err != nil {
					t.Error(err)
				} else if ok {
					wins.Add(1)
				}
			}()
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("%d ends won", wins.Load())
			}
		}
	})

	runInputContract(t, setup)

	t.Run("Restart", func(t *testing.T) {
		s, open, c := setup(t)
		tk, _ := s.Create(ctx, newTask(), 0)
		s.Finish(ctx, tk.ID, tasks.Outcome{Status: tasks.Completed, Payload: []byte(`{"content":[{"type":"text","text":"ok"}]}`)})
		s.Close()
		again := open(t, c)
		got, err := again.Get(ctx, alice, tk.ID)
		if err != nil || got.Status != tasks.Completed || !strings.Contains(string(got.Outcome), `"ok"`) {
			t.Fatalf("after reopening: %+v %v", got, err)
		}
	})
}
