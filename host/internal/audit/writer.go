package audit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Writer defaults.
const (
	DefaultQueueSize         = 10000
	DefaultBatchSize         = 4 * maxBlockRecords
	DefaultFlushInterval     = 200 * time.Millisecond
	DefaultAppendTimeout     = 5 * time.Second
	DefaultRetentionInterval = time.Hour
	// DefaultPendingGrace is longer than any call may run (tasks.run_timeout
	// defaults to 30 minutes), so a pending record is taken for
	// interrupted only once its call cannot still be running.
	DefaultPendingGrace = time.Hour
	// DefaultTokenShare is the host's TokenShare: a quarter of the
	// default queue, so it takes four flooding tokens to fill it.
	DefaultTokenShare = DefaultQueueSize / 4
)

// DefaultBackoff is the wait between attempts to write a batch the store
// refused.
var DefaultBackoff = Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

// Backoff bounds the wait between attempts: Min after the first failure,
// doubling up to Max.
type Backoff struct{ Min, Max time.Duration }

func (b Backoff) delay(failures int) time.Duration {
	d := b.Min
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// WriterConfig configures a Writer; zero fields take the defaults.
type WriterConfig struct {
	// QueueSize bounds the records waiting to be written, those of a batch
	// being retried included (DefaultQueueSize). A record costs at most
	// about 6 KiB once bounded (see Record), so the default holds at most
	// about 60 MiB.
	QueueSize int
	// BatchSize is the most records one Append carries; a full batch is
	// written at once, without waiting for the interval
	// (DefaultBatchSize). At most QueueSize.
	BatchSize int
	// FlushInterval is how often queued records are written when no batch
	// fills (DefaultFlushInterval): the flush window.
	FlushInterval time.Duration
	// AppendTimeout bounds one Append; a slower one counts as a failure
	// (DefaultAppendTimeout).
	AppendTimeout time.Duration
	// Backoff paces retries after a failed Append (DefaultBackoff).
	Backoff Backoff
	// Retention, when set, is the age past which records are deleted,
	// checked at start and every RetentionInterval
	// (DefaultRetentionInterval). Zero keeps records forever.
	Retention         time.Duration
	RetentionInterval time.Duration
	// TokenShare bounds the records of one token (by TokenLabel) waiting
	// at once; past it that token's records are dropped (ErrTokenShare),
	// so one token's flood cannot fill the queue and drop or delay the
	// others' (QueueSize: no bound of its own; the host sets
	// DefaultTokenShare). Settled records are never refused.
	TokenShare int
	// PendingGrace is the age past which a pending record (Admit) with no
	// outcome is appended as OutcomeInterrupted (DefaultPendingGrace).
	PendingGrace time.Duration
	// Log receives the writer's failures and recoveries; nil discards
	// them. Lines never hold a record's contents.
	Log *slog.Logger
	// Now is the clock for records written without a time and for
	// retention (time.Now).
	Now func() time.Time
}

func (c WriterConfig) withDefaults() (WriterConfig, error) {
	for _, v := range []struct {
		name string
		bad  bool
	}{
		{"queue size", c.QueueSize < 0},
		{"batch size", c.BatchSize < 0},
		{"flush interval", c.FlushInterval < 0},
		{"append timeout", c.AppendTimeout < 0},
		{"backoff", c.Backoff.Min < 0 || c.Backoff.Max < 0},
		{"retention", c.Retention < 0},
		{"retention interval", c.RetentionInterval < 0},
		{"token share", c.TokenShare < 0},
		{"pending grace", c.PendingGrace < 0},
	} {
		if v.bad {
			return c, fmt.Errorf("%w: audit writer %s is negative", ErrInvalid, v.name)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.QueueSize, DefaultQueueSize)
	def(&c.BatchSize, min(DefaultBatchSize, c.QueueSize))
	defDur(&c.FlushInterval, DefaultFlushInterval)
	defDur(&c.AppendTimeout, DefaultAppendTimeout)
	defDur(&c.Backoff.Min, DefaultBackoff.Min)
	defDur(&c.Backoff.Max, max(DefaultBackoff.Max, c.Backoff.Min))
	defDur(&c.RetentionInterval, DefaultRetentionInterval)
	defDur(&c.PendingGrace, DefaultPendingGrace)
	def(&c.TokenShare, c.QueueSize)
	if c.Backoff.Max < c.Backoff.Min {
		return c, fmt.Errorf("%w: audit writer backoff max %v is below its min %v", ErrInvalid, c.Backoff.Max, c.Backoff.Min)
	}
	if c.BatchSize > c.QueueSize {
		return c, fmt.Errorf("%w: audit writer batch size %d exceeds its queue size %d", ErrInvalid, c.BatchSize, c.QueueSize)
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// Stats are a writer's counters since it started.
type Stats struct {
	Queued   int   // records waiting now
	Written  int64 // records the store has committed
	Batches  int64 // Appends that succeeded
	Dropped  int64 // records refused because the queue, or their token's share of it, was full
	Failures int64 // Appends that failed
	Lost     int64 // records still queued when Close gave up
	Deleted  int64 // records retention deleted
	// Pending counts the records kept before their calls ran (Admit);
	// Interrupted those appended later for want of an outcome.
	Pending, Interrupted int64
}

// Writer writes records to a Store in the background, in batches, so the
// caller never waits on the database. It is safe for concurrent use.
type Writer struct {
	store Store
	cfg   WriterConfig

	mu sync.Mutex
	// queue holds the records taken and not yet written, encoded as Write
	// takes them, in blocks of at most blockSize records; queued counts
	// them. Blocks at the head a flush is writing are sealed: Write adds
	// to a new block after them, and a failed write retries them as they
	// are.
	queue     []*queuedBlock
	queued    int
	blockSize int
	closed    bool
	// byToken counts the queued records of each token label, for
	// TokenShare; admits are the pending records waiting to be kept.
	byToken map[string]int
	admits  []*admission
	// spare holds the bodies of blocks the store has taken (it copies
	// them), reused by the next blocks rather than grown again.
	spare [][]byte

	kick    chan struct{} // a batch is full
	admitK  chan struct{} // a pending record waits to be kept
	settleK chan struct{} // a settled record waits to be written
	admDone chan struct{} // the admitter stopped
	recDone chan struct{} // the pending recovery loop stopped
	closing chan struct{} // Close began: drain, then stop
	abort   chan struct{} // Close gave up: stop now
	done    chan struct{} // the flusher stopped
	retDone chan struct{} // the retention loop stopped

	// ctx ends the store calls in flight when Close gives up; retCtx ends
	// the retention loop when Close begins.
	ctx, retCtx       context.Context
	cancel, retCancel context.CancelFunc

	abortOnce sync.Once
	// loggedDrops is the drop count last logged; the flusher's own.
	loggedDrops int64

	healthy                                         atomic.Bool
	written, batches, dropped, failures, lost, dels atomic.Int64
	pending, interrupted                            atomic.Int64
	// queuedN mirrors queued for Healthy, which every action asks.
	queuedN atomic.Int64
}

// NewWriter starts a writer in front of s. The caller keeps s: close the
// writer first (Close), then s.
func NewWriter(s Store, cfg WriterConfig) (*Writer, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: audit writer has no store", ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	w := &Writer{
		store: s, cfg: cfg, blockSize: min(cfg.BatchSize, maxBlockRecords),
		kick: make(chan struct{}, 1), closing: make(chan struct{}), abort: make(chan struct{}),
		done: make(chan struct{}), retDone: make(chan struct{}),
		admitK: make(chan struct{}, 1), settleK: make(chan struct{}, 1), admDone: make(chan struct{}), recDone: make(chan struct{}),
		byToken: map[string]int{},
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.retCtx, w.retCancel = context.WithCancel(w.ctx)
	w.healthy.Store(true)
	go w.run()
	if _, ok := s.(pendingStore); ok {
		go w.admitter()
		go w.recoverLoop()
	} else {
		close(w.admDone)
		close(w.recDone)
	}
	if cfg.Retention > 0 {
		go w.retain()
	} else {
		close(w.retDone)
	}
	return w, nil
}

// Write queues r and returns at once. It fills in Time (now) and ID
// (NewID) when empty and brings r within its bounds (see Record). It
// returns ErrInvalid for a record breaking a rule on Record, ErrQueueFull
// when the queue is at its bound (the record is dropped and counted) and
// ErrClosed once Close has begun; the record is not kept in any of those
// cases. A nil error means the record is queued: it reaches the store
// within the flush window while the store accepts writes, and is retried,
// kept in order, while it does not.
func (w *Writer) Write(r Record) error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("audit write: %w", err)
	}
	if r.Time.IsZero() {
		r.Time = w.cfg.Now()
	}
	if r.ID == "" {
		r.ID = NewID(r.Time)
	}
	// Bounded and encoded before queueing (the block bounds the fields it
	// writes, and keeps the time to the microsecond), so the queue's
	// memory is bounded too, and holds no pointer into what the caller
	// passed.
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if w.queued >= w.cfg.QueueSize {
		w.mu.Unlock()
		w.dropped.Add(1)
		return ErrQueueFull
	}
	if w.byToken[r.TokenLabel] >= w.cfg.TokenShare {
		w.mu.Unlock()
		w.dropped.Add(1)
		return ErrTokenShare
	}
	w.enqueue(&r, "")
	return nil
}

// enqueue adds r to the queue's tail block, and kicks the flusher when a
// batch is full; settles names the pending record r replaces. w.mu is
// held, and released.
func (w *Writer) enqueue(r *Record, settles string) {
	var tail *queuedBlock
	if n := len(w.queue); n > 0 && !w.queue[n-1].sealed && w.queue[n-1].count < w.blockSize {
		tail = w.queue[n-1]
	} else {
		tail = new(queuedBlock)
		if n := len(w.spare); n > 0 {
			tail.body, w.spare = w.spare[n-1], w.spare[:n-1]
		}
		w.queue = append(w.queue, tail)
	}
	tail.add(uint64(tail.count), r, true)
	if settles != "" {
		tail.settles = append(tail.settles, settles)
	}
	if tail.tokens == nil {
		tail.tokens = map[string]int{}
	}
	tail.tokens[r.TokenLabel]++
	w.byToken[r.TokenLabel]++
	w.queued++
	w.queuedN.Store(int64(w.queued))
	full := w.queued >= w.cfg.BatchSize
	w.mu.Unlock()
	kick := w.kick
	if settles != "" && !full {
		// A settled record is written at once, batch full or not: its
		// call's caller may be waiting to see it.
		kick = w.settleK
	}
	if full || settles != "" {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
}

// queuedBlock is a block in the writer's queue.
type queuedBlock struct {
	builder
	sealed bool
	// settles names the pending records this block's records replace;
	// tokens counts its records by token label.
	settles []string
	tokens  map[string]int
}

// Healthy reports whether records reach the store: false from a failed
// Append until one succeeds again, while the queue is full, and once
// Close has begun. The gate refuses actions while it is false, so none
// runs without its record.
func (w *Writer) Healthy() bool {
	return w.healthy.Load() && w.queuedN.Load() < int64(w.cfg.QueueSize)
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	queued := w.queued
	w.mu.Unlock()
	return Stats{
		Queued: queued, Written: w.written.Load(), Batches: w.batches.Load(), Dropped: w.dropped.Load(),
		Failures: w.failures.Load(), Lost: w.lost.Load(), Deleted: w.dels.Load(),
		Pending: w.pending.Load(), Interrupted: w.interrupted.Load(),
	}
}

// Close stops taking records, writes those queued (retrying as usual),
// stops the retention loop and returns. When ctx ends first, it stops
// trying and returns an error counting the records not written (also in
// Stats.Lost). Close does not close the store. Later calls return the
// first one's outcome once it is settled.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	first := !w.closed
	w.closed = true
	w.mu.Unlock()
	if first {
		w.healthy.Store(false)
		w.retCancel()
		close(w.closing)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		w.giveUp()
		<-w.done
	}
	<-w.retDone
	<-w.admDone
	<-w.recDone
	if n := w.lost.Load(); n > 0 {
		return fmt.Errorf("close audit writer: %d records not written: %w", n, context.Cause(ctx))
	}
	return nil
}

func (w *Writer) giveUp() {
	w.abortOnce.Do(func() {
		close(w.abort)
		w.cancel()
	})
}

// run is the flusher: it writes full batches as they fill, everything
// queued every interval, and everything left once Close begins.
func (w *Writer) run() {
	defer close(w.done)
	defer w.cancel()
	tick := time.NewTicker(w.cfg.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.kick:
			w.flush(true)
		case <-w.settleK:
			w.flush(false)
		case <-tick.C:
			w.flush(false)
		case <-w.closing:
			w.flush(false)
			w.mu.Lock()
			lost := w.queued
			clear(w.queue)
			w.queue, w.queued = nil, 0
			w.queuedN.Store(0)
			clear(w.byToken)
			w.mu.Unlock()
			if lost > 0 {
				w.lost.Add(int64(lost))
				w.cfg.Log.Error("audit records lost: the writer closed before the store took them", "records", lost)
			}
			return
		}
	}
}

// flush writes the queue in batches: only full ones when fullOnly. It
// returns when the queue has no batch left to write, or when the writer
// is aborted.
func (w *Writer) flush(fullOnly bool) {
	failures := 0
	for {
		if d := w.dropped.Load(); d > w.loggedDrops {
			w.cfg.Log.Warn("audit records dropped: the queue is full",
				"dropped", d-w.loggedDrops, "dropped_total", d, "queue_size", w.cfg.QueueSize)
			w.loggedDrops = d
		}
		w.mu.Lock()
		if w.queued == 0 || (fullOnly && w.queued < w.cfg.BatchSize) {
			w.mu.Unlock()
			return
		}
		// The head blocks, up to a batch of records, sealed.
		var (
			batch   []*builder
			settled []string
			n       int
		)
		for _, b := range w.queue {
			if len(batch) > 0 && n+b.count > w.cfg.BatchSize {
				break
			}
			b.sealed = true
			batch = append(batch, &b.builder)
			settled = append(settled, b.settles...)
			n += b.count
		}
		w.mu.Unlock()

		ctx, cancel := context.WithTimeout(w.ctx, w.cfg.AppendTimeout)
		err := w.append(ctx, batch, settled)
		cancel()
		if err == nil {
			w.mu.Lock()
			for _, b := range w.queue[:len(batch)] {
				if len(w.spare) < maxSpareBodies {
					w.spare = append(w.spare, b.body[:0])
				}
				for tok, c := range b.tokens {
					if w.byToken[tok] -= c; w.byToken[tok] <= 0 {
						delete(w.byToken, tok)
					}
				}
			}
			clear(w.queue[:len(batch)])
			w.queue = w.queue[len(batch):]
			w.queued -= n
			w.queuedN.Store(int64(w.queued))
			w.mu.Unlock()
			w.written.Add(int64(n))
			w.batches.Add(1)
			if failures > 0 {
				w.cfg.Log.Info("audit store writes again", "failed_attempts", failures)
			}
			failures = 0
			if !w.isClosing() {
				w.healthy.Store(true)
			}
			continue
		}
		failures++
		w.failures.Add(1)
		w.healthy.Store(false)
		// Logged at the first failure and then ever more rarely (2, 4, 8, …)
		// through a long outage.
		if failures&(failures-1) == 0 {
			w.cfg.Log.Error("audit store refused a batch; retrying, records stay queued",
				"records", n, "queued", w.Stats().Queued, "failed_attempts", failures, "err", err)
		}
		select {
		case <-time.After(w.cfg.Backoff.delay(failures)):
		case <-w.abort:
			return
		}
	}
}

// maxSpareBodies bounds the block bodies a writer keeps for reuse.
const maxSpareBodies = 4

// blockAppender is a Store that takes the writer's blocks as they are.
type blockAppender interface {
	appendBlocks(ctx context.Context, blocks []*builder) error
}

// append writes a batch of queued blocks to the store, with the pending
// records they settle deleted in the same transaction: as they are when
// it takes blocks, else decoded into the records Append takes.
func (w *Writer) append(ctx context.Context, batch []*builder, settled []string) error {
	if s, ok := w.store.(pendingStore); ok {
		return s.appendSettled(ctx, batch, settled)
	}
	if s, ok := w.store.(blockAppender); ok {
		return s.appendBlocks(ctx, batch)
	}
	var rs []Record
	for _, b := range batch {
		decoded, err := decodeBlock(0, b.body)
		if err != nil {
			return err
		}
		rs = append(rs, decoded...)
	}
	return w.store.Append(ctx, rs)
}

func (w *Writer) isClosing() bool {
	select {
	case <-w.closing:
		return true
	default:
		return false
	}
}

// retain deletes records past the retention, at start and every
// RetentionInterval, until Close begins.
func (w *Writer) retain() {
	defer close(w.retDone)
	tick := time.NewTicker(w.cfg.RetentionInterval)
	defer tick.Stop()
	for {
		cutoff := w.cfg.Now().Add(-w.cfg.Retention)
		n, err := w.store.DeleteBefore(w.retCtx, cutoff)
		w.dels.Add(n)
		switch {
		case err != nil && w.retCtx.Err() == nil:
			w.cfg.Log.Error("audit retention failed; retrying at the next interval", "deleted", n, "err", err)
		case n > 0:
			w.cfg.Log.Info("audit retention deleted old records", "deleted", n, "before", cutoff.UTC().Format(time.RFC3339))
		}
		select {
		case <-tick.C:
		case <-w.retCtx.Done():
			return
		}
	}
}
