package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
	"github.com/capgate/capgate/sdk/pgtest"
)

var fastBackoff = audit.Backoff{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond}

// engines are where writer tests run: each gives a fresh database.
var engines = []struct {
	name  string
	where audittest.Where
}{
	{"sqlite", func(t *testing.T) (string, string) { return "", t.TempDir() }},
	{"postgres", func(t *testing.T) (string, string) { return pgtest.SchemaDSN(t), "" }},
}

func sqliteEnv(t *testing.T) *audittest.Env {
	return &audittest.Env{T: t, Dir: t.TempDir()}
}

// syncBuffer is a log destination safe for the writer's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newWriter(t *testing.T, s audit.Store, cfg audit.WriterConfig) *audit.Writer {
	t.Helper()
	if cfg.Backoff == (audit.Backoff{}) {
		cfg.Backoff = fastBackoff
	}
	w, err := audit.NewWriter(s, cfg)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

// eventually waits until cond holds; the deadline only catches a hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func closeWriter(t *testing.T, w *audit.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func mustWrite(t *testing.T, w *audit.Writer, r audit.Record) {
	t.Helper()
	if err := w.Write(r); err != nil {
		t.Fatalf("Write(%s): %v", r.RequestID, err)
	}
}

func seqNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

func wantStored(t *testing.T, s audit.Store, want []string) []audit.Record {
	t.Helper()
	got := audittest.All(t, s, audit.Filter{})
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r.RequestID
	}
	if strings.Join(ids, ",") != strings.Join(want, ",") {
		t.Fatalf("stored %d records %v; want %d %v", len(ids), ids, len(want), want)
	}
	return got
}

// TestWriterBatchesInOrder: full batches are written as they fill, and
// records keep the order they were written in.
func TestWriterBatchesInOrder(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	// The interval never comes: only full batches and Close write.
	w := newWriter(t, s, audit.WriterConfig{BatchSize: 10, FlushInterval: time.Hour})
	names := seqNames("r", 95)
	for _, n := range names {
		mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
	}
	eventually(t, "the 9 full batches are written", func() bool { return w.Stats().Written == 90 })
	if st := w.Stats(); st.Batches != 9 || st.Queued != 5 {
		t.Fatalf("stats %+v; want 9 batches written and 5 records queued", st)
	}
	closeWriter(t, w)
	if st := w.Stats(); st.Written != 95 || st.Batches != 10 || st.Queued != 0 || st.Dropped != 0 {
		t.Fatalf("stats after Close %+v; want 95 written in 10 batches, none queued or dropped", st)
	}
	got := wantStored(t, s, names)
	for i := 1; i < len(got); i++ {
		if got[i].ID <= got[i-1].ID {
			t.Fatalf("record %d has ID %s after %s; want increasing IDs", i, got[i].ID, got[i-1].ID)
		}
	}
}

// TestWriterFlushInterval: records of a batch that never fills reach the
// store at the interval, without Close.
func TestWriterFlushInterval(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	w := newWriter(t, s, audit.WriterConfig{BatchSize: 1000, FlushInterval: 10 * time.Millisecond})
	for _, n := range []string{"a", "b", "c"} {
		mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
	}
	eventually(t, "the interval writes the partial batch", func() bool { return w.Stats().Written == 3 })
	wantStored(t, s, []string{"a", "b", "c"})
}

// TestWriterFillsRecord: Write fills in the time and ID, bounds the
// record, and keeps its own copy of the arguments.
func TestWriterFillsRecord(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	now := audittest.T0.Add(90 * time.Minute)
	w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour, Now: func() time.Time { return now }})
	r := audittest.Rec("a", "booking.create", 0)
	r.Time = time.Time{}
	args := []byte(`{"x":"before"}`)
	r.Args = args
	r.Reason = strings.Repeat("z", 5000)
	mustWrite(t, w, r)
	copy(args, `{"x":"AFTERR"}`) // the caller reuses its buffer
	closeWriter(t, w)
	got := wantStored(t, s, []string{"a"})[0]
	if !got.Time.Equal(now) || len(got.ID) != audit.IDLen || string(got.Args) != `{"x":"before"}` || len(got.Reason) > audit.MaxReasonLen {
		t.Fatalf("stored time %v, ID %q, args %s, reason %d bytes; want %v, an ID, the args as written, at most %d bytes",
			got.Time, got.ID, got.Args, len(got.Reason), now, audit.MaxReasonLen)
	}
}

// TestWriterBackpressure: with the store refusing writes, the queue fills
// to its bound and further records are dropped and counted; once the
// store takes writes again the queued ones are written in order.
func TestWriterBackpressure(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	repair := e.FailWrites("")
	w := newWriter(t, s, audit.WriterConfig{QueueSize: 10, BatchSize: 5, FlushInterval: 5 * time.Millisecond, Log: log})
	const secret = "s3cret-argument-value"
	var accepted []string
	for i := range 15 {
		r := audittest.Rec(fmt.Sprintf("r%03d", i), "booking.create", 0)
		r.Args = json.RawMessage(`{"note":"` + secret + `"}`)
		switch err := w.Write(r); {
		case err == nil:
			accepted = append(accepted, r.RequestID)
		case errors.Is(err, audit.ErrQueueFull):
		default:
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if want := seqNames("r", 10); strings.Join(accepted, ",") != strings.Join(want, ",") {
		t.Fatalf("accepted %v; want the first 10", accepted)
	}
	if st := w.Stats(); st.Dropped != 5 || st.Queued != 10 {
		t.Fatalf("stats %+v; want 5 dropped, 10 queued", st)
	}
	eventually(t, "the writer reports the failing store", func() bool { return !w.Healthy() && w.Stats().Failures >= 2 })
	eventually(t, "the drops are logged", func() bool { return strings.Contains(logs.String(), "dropped_total=5") })
	repair()
	eventually(t, "the writer recovers", func() bool { return w.Healthy() && w.Stats().Written == 10 })
	wantStored(t, s, accepted)
	out := logs.String()
	for _, want := range []string{"audit store refused a batch", "audit records dropped", "audit store writes again"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("log holds a record's contents:\n%s", out)
	}
}

// TestWriterRecovers: on both engines, records written while the store
// refuses writes are kept, the writer is unhealthy, and once the store
// recovers every record is written, in order, and the writer is healthy.
func TestWriterRecovers(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			dsn, dir := engine.where(t)
			e := &audittest.Env{T: t, DSN: dsn, Dir: dir}
			s := e.Open()
			w := newWriter(t, s, audit.WriterConfig{BatchSize: 8, FlushInterval: 5 * time.Millisecond})
			mustWrite(t, w, audittest.Rec("before", "booking.create", 0))
			eventually(t, "the first record is written", func() bool { return w.Stats().Written == 1 })
			if !w.Healthy() {
				t.Fatal("unhealthy with a working store")
			}
			repair := e.FailWrites("")
			names := seqNames("r", 30)
			for _, n := range names[:10] {
				mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
			}
			eventually(t, "the writer reports the failing store", func() bool { return !w.Healthy() })
			for _, n := range names[10:] {
				mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
			}
			eventually(t, "several attempts fail", func() bool { return w.Stats().Failures >= 3 })
			if st := w.Stats(); st.Written != 1 || st.Queued != 30 {
				t.Fatalf("while failing: %+v; want 1 written, 30 queued", st)
			}
			repair()
			eventually(t, "the writer recovers", func() bool { return w.Healthy() && w.Stats().Written == 31 })
			wantStored(t, s, append([]string{"before"}, names...))
		})
	}
}

// TestWriterAppendTimeout: an Append that hangs (a table lock held
// elsewhere) counts as a failure after AppendTimeout, and the records are
// written once the lock is gone.
func TestWriterAppendTimeout(t *testing.T) {
	e := &audittest.Env{T: t, DSN: pgtest.SchemaDSN(t)}
	s := e.Open()
	raw := e.Raw()
	tx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`LOCK TABLE audit_sequence IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, s, audit.WriterConfig{FlushInterval: 5 * time.Millisecond, AppendTimeout: 50 * time.Millisecond})
	mustWrite(t, w, audittest.Rec("a", "booking.create", 0))
	eventually(t, "the hanging append fails", func() bool { return !w.Healthy() && w.Stats().Failures >= 1 })
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the writer recovers", func() bool { return w.Healthy() && w.Stats().Written == 1 })
	wantStored(t, s, []string{"a"})
}

// TestWriterClose: Close writes what is queued, then refuses records.
func TestWriterClose(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	w := newWriter(t, s, audit.WriterConfig{BatchSize: 100, FlushInterval: time.Hour})
	names := seqNames("r", 7)
	for _, n := range names {
		mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
	}
	closeWriter(t, w)
	wantStored(t, s, names)
	if err := w.Write(audittest.Rec("late", "booking.create", 0)); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("Write after Close = %v; want ErrClosed", err)
	}
	if w.Healthy() {
		t.Fatal("a closed writer reports healthy")
	}
	closeWriter(t, w) // again: same outcome
}

// TestWriterCloseRetries: Close keeps retrying a refusing store and
// succeeds once it recovers within ctx.
func TestWriterCloseRetries(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	repair := e.FailWrites("")
	w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour})
	names := seqNames("r", 3)
	for _, n := range names {
		mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
	}
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		closed <- w.Close(ctx)
	}()
	eventually(t, "Close's flush fails", func() bool { return w.Stats().Failures >= 2 })
	repair()
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantStored(t, s, names)
}

// TestWriterCloseGivesUp: when ctx ends before the store recovers, Close
// reports the records not written, and counts them lost.
func TestWriterCloseGivesUp(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	e.FailWrites("")
	var logs syncBuffer
	w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, n := range seqNames("r", 4) {
		mustWrite(t, w, audittest.Rec(n, "booking.create", 0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := w.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "4 records not written") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v; want an error counting 4 records not written, for the deadline", err)
	}
	if st := w.Stats(); st.Lost != 4 || st.Queued != 0 {
		t.Fatalf("stats %+v; want 4 lost, none queued", st)
	}
	if !strings.Contains(logs.String(), "audit records lost") {
		t.Fatalf("log lacks the loss:\n%s", logs.String())
	}
}

// TestWriterInvalid: invalid records and configurations are refused with
// ErrInvalid, and nothing is queued.
func TestWriterInvalid(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	w := newWriter(t, s, audit.WriterConfig{FlushInterval: time.Hour})
	bad := audittest.Rec("a", "booking.create", 0)
	bad.Decision = "perhaps"
	if err := w.Write(bad); !errors.Is(err, audit.ErrInvalid) {
		t.Fatalf("Write(invalid) = %v; want ErrInvalid", err)
	}
	if st := w.Stats(); st.Queued != 0 || st.Dropped != 0 {
		t.Fatalf("stats %+v; want nothing queued or dropped", st)
	}
	if _, err := audit.NewWriter(nil, audit.WriterConfig{}); !errors.Is(err, audit.ErrInvalid) {
		t.Fatalf("NewWriter(nil store) = %v; want ErrInvalid", err)
	}
	for _, tc := range []struct {
		cfg  audit.WriterConfig
		want string
	}{
		{audit.WriterConfig{QueueSize: -1}, "queue size is negative"},
		{audit.WriterConfig{BatchSize: -1}, "batch size is negative"},
		{audit.WriterConfig{FlushInterval: -time.Second}, "flush interval is negative"},
		{audit.WriterConfig{AppendTimeout: -time.Second}, "append timeout is negative"},
		{audit.WriterConfig{Retention: -time.Hour}, "retention is negative"},
		{audit.WriterConfig{RetentionInterval: -time.Hour}, "retention interval is negative"},
		{audit.WriterConfig{Backoff: audit.Backoff{Min: -1}}, "backoff is negative"},
		{audit.WriterConfig{Backoff: audit.Backoff{Min: time.Second, Max: time.Millisecond}}, "backoff max 1ms is below its min 1s"},
		{audit.WriterConfig{QueueSize: 10, BatchSize: 11}, "batch size 11 exceeds its queue size 10"},
	} {
		if w, err := audit.NewWriter(s, tc.cfg); !errors.Is(err, audit.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			if err == nil {
				_ = w.Close(context.Background())
			}
			t.Errorf("NewWriter(%+v) = %v; want ErrInvalid saying %q", tc.cfg, err, tc.want)
		}
	}
	// A small queue gets batches no larger than itself by default.
	small := newWriter(t, s, audit.WriterConfig{QueueSize: 3, FlushInterval: time.Hour})
	for _, n := range []string{"x", "y", "z"} {
		mustWrite(t, small, audittest.Rec(n, "booking.create", 0))
	}
	eventually(t, "the queue's one full batch is written", func() bool { return small.Stats().Written == 3 })
}

// TestWriterConcurrent: many goroutines write at once; every record is
// stored, each goroutine's in its own order.
func TestWriterConcurrent(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	w := newWriter(t, s, audit.WriterConfig{BatchSize: 50, FlushInterval: 2 * time.Millisecond})
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				if err := w.Write(audittest.Rec(fmt.Sprintf("g%d-%04d", g, i), "booking.create", 0)); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
				if i%50 == 0 {
					_ = w.Healthy()
					_ = w.Stats()
				}
			}
		})
	}
	wg.Wait()
	closeWriter(t, w)
	got := audittest.All(t, s, audit.Filter{})
	if len(got) != writers*each {
		t.Fatalf("stored %d records; want %d", len(got), writers*each)
	}
	last := map[string]string{}
	for _, r := range got {
		g, n, _ := strings.Cut(r.RequestID, "-")
		if prev, ok := last[g]; ok && n <= prev {
			t.Fatalf("%s stored after %s-%s; want each writer's records in order", r.RequestID, g, prev)
		}
		last[g] = n
	}
}

// TestWriterRetention: records older than the retention are deleted at
// start and at every interval; a failing delete is retried at the next.
func TestWriterRetention(t *testing.T) {
	e := sqliteEnv(t)
	s := e.Open()
	now := audittest.T0.Add(48 * time.Hour)
	old := func(prefix string, n int) {
		var rs []audit.Record
		for i := range n {
			rs = append(rs, audittest.Rec(fmt.Sprintf("%s%d", prefix, i), "booking.create", 0)) // at T0: 48h old
		}
		if err := s.Append(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	old("old", 5)
	if err := s.Append(context.Background(), []audit.Record{audittest.Rec("fresh", "booking.create", 47*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	w := newWriter(t, s, audit.WriterConfig{
		Retention: 24 * time.Hour, RetentionInterval: 5 * time.Millisecond, FlushInterval: time.Hour,
		Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	eventually(t, "retention deletes the old records", func() bool { return w.Stats().Deleted == 5 })
	wantStored(t, s, []string{"fresh"})
	repair := e.FailDeletes()
	old("later", 3)
	eventually(t, "the failing delete is logged", func() bool { return strings.Contains(logs.String(), "audit retention failed") })
	if d := w.Stats().Deleted; d != 5 {
		t.Fatalf("deleted %d while deletes fail; want still 5", d)
	}
	repair()
	eventually(t, "retention deletes them at a later interval", func() bool { return w.Stats().Deleted == 8 })
	wantStored(t, s, []string{"fresh"})
	closeWriter(t, w)
}

// recordsOnly is a Store with nothing but the interface's methods, as
// another engine would be.
type recordsOnly struct {
	audit.Store
	appends atomic.Int64
}

func (s *recordsOnly) Append(ctx context.Context, rs []audit.Record) error {
	s.appends.Add(1)
	return s.Store.Append(ctx, rs)
}

// TestWriterAnyStore: a store that takes only records gets the queued
// records, every field intact, in order, through Append.
func TestWriterAnyStore(t *testing.T) {
	inner := sqliteEnv(t).Open()
	s := &recordsOnly{Store: inner}
	w := newWriter(t, s, audit.WriterConfig{BatchSize: 4, FlushInterval: time.Hour})
	var want []audit.Record
	for i := range 10 {
		r := audittest.Rec(fmt.Sprintf("r%d", i), "booking.create", time.Duration(i)*time.Second)
		r.ID, r.ParentID, r.Args, r.Reason = audit.NewID(r.Time), "p", json.RawMessage(`{"i": [1, 2]}`), "why"
		mustWrite(t, w, r)
		r.Args = json.RawMessage(`{"i":[1,2]}`)
		want = append(want, r)
	}
	closeWriter(t, w)
	if n := s.appends.Load(); n != 3 {
		t.Fatalf("%d Appends of 10 records in batches of 4; want 3", n)
	}
	got := audittest.All(t, inner, audit.Filter{})
	if len(got) != len(want) {
		t.Fatalf("stored %d records; want %d", len(got), len(want))
	}
	for i := range got {
		got[i].Seq = 0
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// TestWriterBoundsAsAppendDoes: records past their bounds, repeated and
// not, are stored the same through a Writer (whose blocks bound the fields
// they write) as through Store.Append.
func TestWriterBoundsAsAppendDoes(t *testing.T) {
	long := strings.Repeat("é", audit.MaxRequestIDLen) // two bytes a rune
	raw := func(i int) audit.Record {
		r := audittest.Rec(long, "booking.create", time.Duration(i)*time.Second)
		r.ID = audit.NewID(r.Time)
		r.Reason, r.UserID = "bad \xff utf-8", "nul\x00user"
		r.Args = json.RawMessage(`{"note": "` + strings.Repeat("n", audit.MaxArgs) + `"}`)
		if i == 2 {
			r.RequestID, r.Args = long+"x", json.RawMessage(`{ "spaced" : [1, 2] }`)
		}
		return r
	}
	viaAppend, viaWriter := sqliteEnv(t).Open(), sqliteEnv(t).Open()
	w := newWriter(t, viaWriter, audit.WriterConfig{FlushInterval: time.Hour})
	var rs []audit.Record
	for i := range 4 {
		r := raw(i)
		rs = append(rs, r)
		mustWrite(t, w, r)
	}
	closeWriter(t, w)
	if err := viaAppend.Append(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	a, b := audittest.All(t, viaAppend, audit.Filter{}), audittest.All(t, viaWriter, audit.Filter{})
	if len(a) != 4 || len(b) != 4 {
		t.Fatalf("stored %d and %d records; want 4 each", len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Fatalf("record %d:\n Append %+v\n Writer %+v", i, a[i], b[i])
		}
		if len(b[i].RequestID) > audit.MaxRequestIDLen || strings.ContainsRune(b[i].UserID, 0) || !utf8.ValidString(b[i].Reason) {
			t.Fatalf("record %d is not bounded: %+v", i, b[i])
		}
	}
	if string(b[2].Args) != `{"spaced":[1,2]}` || !strings.Contains(string(b[0].Args), `"truncated"`) {
		t.Fatalf("args stored as %s and %s", b[0].Args, b[2].Args)
	}
}
