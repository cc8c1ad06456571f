package events

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// InProcessConfig configures an [InProcess] bus.
type InProcessConfig struct {
	// BufferSize is how many recent events are retained (events_buffer_size);
	// zero means DefaultBufferSize.
	BufferSize int
	// Backoff spaces redeliveries after a handler error.
	Backoff Backoff
	// Logger receives handler failures and skipped events; nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock for events published without At; nil means time.Now.
	Now func() time.Time
}

// InProcess is the embedded bus: a goroutine-safe ring buffer of the last
// BufferSize events, with one goroutine per subscription.
type InProcess struct {
	cfg InProcessConfig
	log *slog.Logger
	id  string

	mu     sync.Mutex
	ring   []Event // ring[(cursor-1) % len(ring)] holds cursor
	last   uint64  // cursor of the newest event, 0 before the first
	count  int     // events retained, ≤ len(ring)
	wake   chan struct{}
	subs   map[string]*inProcessSub
	closed bool
	wg     sync.WaitGroup
}

var _ Bus = (*InProcess)(nil)

// NewInProcess returns an empty in-process bus.
func NewInProcess(cfg InProcessConfig) (*InProcess, error) {
	if cfg.BufferSize < 0 {
		return nil, fmt.Errorf("events: buffer size must not be negative, got %d", cfg.BufferSize)
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	cfg.Backoff = cfg.Backoff.orDefault()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &InProcess{
		cfg:  cfg,
		id:   "in-process-" + rand.Text(),
		log:  log.With("component", "events", "bus", "in-process"),
		ring: make([]Event, cfg.BufferSize),
		wake: make(chan struct{}),
		subs: map[string]*inProcessSub{},
	}, nil
}

// Publish implements [Bus].
func (b *InProcess) Publish(ctx context.Context, ev Event) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("events: publish: %w", err)
	}
	ev, err := prepare(ev, b.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("events: publish: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, fmt.Errorf("events: publish: %w", ErrClosed)
	}
	b.last++
	ev.Cursor = b.last
	b.ring[(b.last-1)%uint64(len(b.ring))] = ev
	b.count = min(b.count+1, len(b.ring))
	close(b.wake)
	b.wake = make(chan struct{})
	return ev.Cursor, nil
}

// oldestLocked is the oldest retained cursor, 0 when nothing is retained.
func (b *InProcess) oldestLocked() uint64 {
	if b.count == 0 {
		return 0
	}
	return b.last - uint64(b.count) + 1
}

// State implements [Bus].
func (b *InProcess) State(ctx context.Context) (State, error) {
	if err := ctx.Err(); err != nil {
		return State{}, fmt.Errorf("events: state: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return State{}, fmt.Errorf("events: state: %w", ErrClosed)
	}
	return State{ID: b.id, Oldest: b.oldestLocked(), Last: b.last}, nil
}

// Since implements [Bus].
func (b *InProcess) Since(ctx context.Context, after uint64, limit int) ([]Event, uint64, error) {
	if err := validateLimit(limit); err != nil {
		return nil, 0, err
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("events: since %d: %w", after, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, 0, fmt.Errorf("events: since %d: %w", after, ErrClosed)
	}
	oldest := b.oldestLocked()
	if oldest > 0 && after+1 < oldest {
		return nil, oldest, &CursorTooOldError{After: after, Oldest: oldest}
	}
	var out []Event
	for c := after + 1; c <= b.last && len(out) < limit; c++ {
		out = append(out, b.ring[(c-1)%uint64(len(b.ring))])
	}
	return out, oldest, nil
}

// next returns the first event after cursor after, waiting for one until
// stop is closed. skipped counts events lost to retention.
func (b *InProcess) next(stop <-chan struct{}, after uint64) (ev Event, skipped uint64, ok bool) {
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return Event{}, 0, false
		}
		if after < b.last {
			c := after + 1
			if oldest := b.oldestLocked(); c < oldest {
				skipped = oldest - c
				c = oldest
			}
			ev := b.ring[(c-1)%uint64(len(b.ring))]
			b.mu.Unlock()
			return ev, skipped, true
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-stop:
			return Event{}, 0, false
		}
	}
}

// Subscribe implements [Bus]. Delivery starts after cursor after.
func (b *InProcess) Subscribe(ctx context.Context, name string, after uint64, h Handler) (Subscription, error) {
	if err := validateSubscriber(name); err != nil {
		return nil, fmt.Errorf("events: subscribe: %w", err)
	}
	if h == nil {
		return nil, fmt.Errorf("events: subscribe %q: nil handler", name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("events: subscribe %q: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("events: subscribe %q: %w", name, ErrClosed)
	}
	if _, dup := b.subs[name]; dup {
		return nil, fmt.Errorf("events: subscribe %q: %w: already subscribed on this bus", name, ErrInvalidSubscriber)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s := &inProcessSub{bus: b, name: name, cancel: cancel, done: make(chan struct{})}
	b.subs[name] = s
	b.wg.Add(1)
	go s.run(runCtx, after, h)
	return s, nil
}

// Follow implements [Bus]: the in-process bus keeps nothing per subscriber.
func (b *InProcess) Follow(ctx context.Context, after uint64, h Handler) (Subscription, error) {
	return b.Subscribe(ctx, followerName(), after, h)
}

// Close implements [Bus].
func (b *InProcess) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.closed = true
	close(b.wake)
	for _, s := range b.subs {
		s.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}

type inProcessSub struct {
	bus    *InProcess
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *inProcessSub) Name() string { return s.name }

func (s *inProcessSub) Close() error {
	s.cancel()
	<-s.done
	return nil
}

func (s *inProcessSub) run(ctx context.Context, after uint64, h Handler) {
	b := s.bus
	log := b.log.With("subscriber", s.name)
	defer func() {
		b.mu.Lock()
		delete(b.subs, s.name)
		b.mu.Unlock()
		close(s.done)
		b.wg.Done()
	}()
	for {
		ev, skipped, ok := b.next(ctx.Done(), after)
		if !ok {
			return
		}
		if skipped > 0 {
			log.Warn("subscriber fell behind the retained events; skipping", "skipped", skipped, "resume_at", ev.Cursor)
		}
		for failures := 0; ; {
			err := callHandler(ctx, h, ev)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			failures++
			delay := b.cfg.Backoff.Delay(failures)
			log.Warn("event handler failed; will redeliver", "cursor", ev.Cursor, "type", ev.Type, "attempt", failures, "retry_in", delay, "err", err)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		after = ev.Cursor
	}
}
