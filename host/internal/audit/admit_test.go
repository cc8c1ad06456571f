package audit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
)

// pendingRows counts the pending records left in the store's database.
func pendingRows(t *testing.T, e *audittest.Env) int {
	t.Helper()
	var n int
	if err := e.Raw().QueryRow(`SELECT count(*) FROM audit_pending`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAdmitThenSettle: an admitted call's record is durable before Admit
// returns, many admitted at once share transactions, and the outcome's
// record replaces it: one record per call in the trail, no pending row
// left.
func TestAdmitThenSettle(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			dsn, dir := engine.where(t)
			e := &audittest.Env{T: t, DSN: dsn, Dir: dir}
			s := e.Open()
			w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour})
			const calls = 40
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for i := range calls {
				wg.Go(func() {
					r := audittest.Rec(fmt.Sprintf("c%03d", i), "booking.create", time.Duration(i)*time.Millisecond)
					r.ID = fmt.Sprintf("ad-%03d", i)
					if err := w.Admit(context.Background(), r); err != nil {
						errs <- err
						return
					}
					// Once Admit returns, the record survives a crash: it is in
					// the database, not in the writer's memory.
					errs <- w.Settle(r)
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if st := w.Stats(); st.Pending != calls {
				t.Errorf("pending %d, want %d", st.Pending, calls)
			}
			// Settled records are written at once, not at the hour's flush.
			eventually(t, "the outcomes are written", func() bool { return w.Stats().Written == calls })
			closeWriter(t, w)
			recs := audittest.All(t, s, audit.Filter{})
			if len(recs) != calls {
				t.Fatalf("%d records, want one per call (%d)", len(recs), calls)
			}
			for _, r := range recs {
				if r.Outcome != audit.OutcomeOK {
					t.Fatalf("record %s outcome %q, want ok", r.RequestID, r.Outcome)
				}
			}
			if n := pendingRows(t, e); n != 0 {
				t.Errorf("%d pending rows left, want none", n)
			}
		})
	}
}

// TestAdmittedCallSurvivesACrash: a host that stops between Admit and
// Settle (no Close, no Settle) leaves the record in the database; the
// next writer on the same store appends it as interrupted once it is
// older than the grace, and only once.
func TestAdmittedCallSurvivesACrash(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			dsn, dir := engine.where(t)
			e := &audittest.Env{T: t, DSN: dsn, Dir: dir}
			s := e.Open()
			// This writer's grace is longer than the record's age: it must
			// not take it for interrupted before it "crashes".
			w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour, PendingGrace: 3 * time.Hour})
			r := audittest.Rec("crashed", "booking.create", 0)
			r.Time = time.Now().Add(-2 * time.Hour)
			r.ID = "crashed-1"
			if err := w.Admit(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			fresh := audittest.Rec("running", "booking.create", 0)
			fresh.Time = time.Now()
			fresh.ID = "running-1"
			if err := w.Admit(context.Background(), fresh); err != nil {
				t.Fatal(err)
			}
			// The crash: this writer is abandoned; another opens the store.
			s2 := e.Open()
			var logs syncBuffer
			w2 := newWriter(t, s2, audit.WriterConfig{FlushInterval: time.Hour, PendingGrace: time.Hour, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			defer func() {
				if t.Failed() {
					t.Log(logs.String())
				}
			}()
			eventually(t, "the old call is kept as interrupted", func() bool { return w2.Stats().Interrupted == 1 })
			recs := audittest.All(t, s2, audit.Filter{})
			if len(recs) != 1 || recs[0].ID != r.ID || recs[0].Outcome != audit.OutcomeInterrupted || recs[0].RequestID != "crashed" || recs[0].Reason == "" {
				t.Fatalf("records %+v; want the crashed call, interrupted", recs)
			}
			// The call still within the grace may still be running: left.
			if n := pendingRows(t, e); n != 1 {
				t.Errorf("%d pending rows, want the running call's", n)
			}
		})
	}
}

// TestAdmitFailsWhenTheStoreDoes: a store that refuses the pending record
// makes Admit fail, so the gate refuses the call; nothing is half kept.
func TestAdmitFailsWhenTheStoreDoes(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	repair := e.FailWrites("")
	defer repair()
	// FailWrites refuses inserts of records; refuse pending ones as well.
	if _, err := e.Raw().Exec(`CREATE TRIGGER audit_test_refuse_pending BEFORE INSERT ON audit_pending BEGIN SELECT RAISE(ABORT, 'refused by test'); END`); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, s, audit.WriterConfig{AppendTimeout: time.Second})
	r := audittest.Rec("x", "booking.create", 0)
	r.ID = "refused-1"
	if err := w.Admit(context.Background(), r); err == nil {
		t.Fatal("Admit succeeded with the store refusing it")
	}
	if n := pendingRows(t, e); n != 0 {
		t.Errorf("%d pending rows after a refused admit", n)
	}
}

// TestTokenShare: one token flooding the queue is dropped at its share,
// while another token's records and every settled record still go in,
// and the writer stays healthy: the flood cost only its own records.
func TestTokenShare(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	repair := e.FailWrites("") // nothing drains: the queue only fills
	w := newWriter(t, s, audit.WriterConfig{QueueSize: 100, BatchSize: 10, TokenShare: 25, FlushInterval: 5 * time.Millisecond})
	flood := 0
	for i := range 1000 {
		r := audittest.Rec(fmt.Sprintf("g%04d", i), "nope.unknown", 0)
		r.TokenLabel = "guest"
		r.Decision, r.Outcome, r.Step = audit.Refused, "", "unknown_capability"
		switch err := w.Write(r); {
		case err == nil:
			flood++
		case !errors.Is(err, audit.ErrTokenShare) || !errors.Is(err, audit.ErrQueueFull):
			t.Fatalf("flood record %d: %v, want ErrTokenShare", i, err)
		}
	}
	if flood != 25 {
		t.Errorf("%d of the guest's records queued, want its share of 25", flood)
	}
	for i := range 20 {
		r := audittest.Rec(fmt.Sprintf("a%03d", i), "booking.create", 0)
		r.TokenLabel = "alice"
		if err := w.Write(r); err != nil {
			t.Fatalf("alice's record %d beside the flood: %v", i, err)
		}
	}
	repair()
	eventually(t, "every queued record is written", func() bool { return w.Stats().Written == 45 })
}

// TestFullQueueIsUnhealthy: a queue at its bound counts as unavailable,
// so actions are refused rather than run with records that may be
// dropped; it is healthy again once the queue drains.
func TestFullQueueIsUnhealthy(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	w := newWriter(t, s, audit.WriterConfig{QueueSize: 10, BatchSize: 5, FlushInterval: time.Hour})
	repair := e.FailWrites("")
	for i := range 10 {
		r := audittest.Rec(fmt.Sprintf("r%02d", i), "booking.list", 0)
		r.TokenLabel = fmt.Sprintf("t%d", i)
		mustWrite(t, w, r)
	}
	if w.Healthy() {
		t.Fatal("healthy with the queue at its bound")
	}
	r := audittest.Rec("act", "booking.create", 0)
	r.ID = "act-1"
	if err := w.Admit(context.Background(), r); !errors.Is(err, audit.ErrQueueFull) {
		t.Fatalf("Admit with the queue full: %v, want ErrQueueFull", err)
	}
	repair()
	eventually(t, "the queue drains and the writer is healthy", func() bool { return w.Healthy() && w.Stats().Written == 10 })
}
