package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of a [NATSConfig].
const (
	DefaultStream        = "CAPGATE_EVENTS"
	DefaultSubjectPrefix = "capgate.events"
	DefaultAckWait       = 30 * time.Second
	// DefaultInactiveThreshold keeps an idle consumer for a day: a host
	// restarted within it resumes from its acknowledgements.
	DefaultInactiveThreshold = 24 * time.Hour
)

// NATSConfig configures a [NATS] bus.
type NATSConfig struct {
	// URL of the NATS server (events.nats_url), e.g. "nats://127.0.0.1:4222".
	URL string
	// Stream is the JetStream stream name; empty means DefaultStream.
	Stream string
	// SubjectPrefix: events are published on SubjectPrefix.<type> and the
	// stream holds SubjectPrefix.>; empty means DefaultSubjectPrefix.
	SubjectPrefix string
	// BufferSize is the stream's MaxMsgs (events_buffer_size); zero means
	// DefaultBufferSize. Older events are discarded.
	BufferSize int
	// Backoff spaces redeliveries after a handler error.
	Backoff Backoff
	// AckWait is how long the server waits for a handler before it
	// redelivers; zero means DefaultAckWait.
	AckWait time.Duration
	// InactiveThreshold is how long the server keeps a subscriber's
	// consumer that nobody pulls from before deleting it; zero means
	// DefaultInactiveThreshold. A subscriber that comes back later starts
	// again after the cursor it gives.
	InactiveThreshold time.Duration
	// Logger receives handler failures; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for events published without At; nil means time.Now.
	Now func() time.Time
	// Name is the NATS connection name; empty means "capgate".
	Name string
	// OutboxDir, when set, is where Publish keeps on disk an event the
	// server has not acknowledged within PublishWait, to publish it once
	// the server answers again (see outbox.go). Empty: Publish waits on
	// its context and fails with the server.
	OutboxDir string
	// PublishWait bounds Publish's wait for the server with an outbox;
	// zero means DefaultPublishWait.
	PublishWait time.Duration
}

// NATS is the JetStream bus. The cursor of an event is its stream sequence,
// and each subscriber name is a durable pull consumer, so a subscription
// survives restarts of the host.
type NATS struct {
	cfg    NATSConfig
	log    *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	// release, when set, runs after the connection is closed: an embedded
	// bus shuts its server down and unlocks its store there.
	release func() error

	mu     sync.Mutex
	subs   map[string]*natsSub
	closed bool
	// cleaning counts followers' consumers being deleted by a closing
	// subscription. Close waits for them before it closes the connection,
	// so none is left to fail, and log, after Close has returned.
	cleaning sync.WaitGroup
	// closingSubs are the subscriptions Close closes itself.
	closingSubs []*natsSub
	// out is the outbox, when cfg.OutboxDir is set.
	out *outbox
}

// closing reports whether Close is closing s itself. b.mu is held.
func (b *NATS) closing(s *natsSub) bool { return slices.Contains(b.closingSubs, s) }

var _ Bus = (*NATS)(nil)

// Conn is the bus's connection to its NATS server, for what else replicas
// say to each other over that server (a client's answer to a call waiting
// on another replica). It closes with the bus: close its other users
// first.
func (b *NATS) Conn() *nats.Conn { return b.nc }

var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// OpenNATS connects to cfg.URL and creates the stream, or updates it to cfg,
// so that opening is idempotent across hosts and restarts.
func OpenNATS(ctx context.Context, cfg NATSConfig) (*NATS, error) {
	if cfg.URL == "" {
		return nil, errors.New("events: nats: URL is empty")
	}
	cfg, log, err := cfg.withDefaults("nats")
	if err != nil {
		return nil, err
	}
	nc, err := connect(cfg, log)
	if err != nil {
		return nil, fmt.Errorf("events: nats: connect %s: %w", cfg.URL, err)
	}
	b, err := openStream(ctx, cfg, log, nc)
	if err != nil {
		return nil, err
	}
	if cfg.OutboxDir != "" {
		if b.out, err = openOutbox(cfg.OutboxDir, log); err != nil {
			nc.Close()
			return nil, err
		}
		b.out.start(b.relayOne)
	}
	return b, nil
}

// withDefaults checks cfg and fills in what it leaves zero; kind names the
// bus in its log records.
func (cfg NATSConfig) withDefaults(kind string) (NATSConfig, *slog.Logger, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if !streamNameRE.MatchString(cfg.Stream) {
		return cfg, nil, fmt.Errorf("events: nats: stream name %q must be letters, digits, '-' or '_'", cfg.Stream)
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	if !prefixRE.MatchString(cfg.SubjectPrefix) {
		return cfg, nil, fmt.Errorf("events: nats: subject prefix %q must be dot-separated tokens without wildcards", cfg.SubjectPrefix)
	}
	if cfg.BufferSize < 0 {
		return cfg, nil, fmt.Errorf("events: nats: buffer size must not be negative, got %d", cfg.BufferSize)
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.InactiveThreshold <= 0 {
		cfg.InactiveThreshold = DefaultInactiveThreshold
	}
	if cfg.Name == "" {
		cfg.Name = "capgate"
	}
	if cfg.PublishWait <= 0 {
		cfg.PublishWait = DefaultPublishWait
	}
	cfg.Backoff = cfg.Backoff.orDefault()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return cfg, log.With("component", "events", "bus", kind, "stream", cfg.Stream), nil
}

// connect dials cfg.URL, or, given extra options such as
// nats.InProcessServer, whatever they say.
func connect(cfg NATSConfig, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
	}, extra...)
	return nats.Connect(cfg.URL, opts...)
}

// openStream creates or updates the stream over nc and returns the bus; it
// closes nc if it fails.
func openStream(ctx context.Context, cfg NATSConfig, log *slog.Logger, nc *nats.Conn) (*NATS, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("events: nats: jetstream: %w", err)
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "capgate events",
		Subjects:    []string{cfg.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxMsgs:     int64(cfg.BufferSize),
		Discard:     jetstream.DiscardOld,
		AllowDirect: true,
		// Not AsyncPersistMode: the server acknowledges a publish only
		// after writing it to the store, so an acknowledged event survives
		// the server's process being killed (see the package doc).
		PersistMode: jetstream.DefaultPersistMode,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("events: nats: create or update stream %s: %w", cfg.Stream, err)
	}
	return &NATS{cfg: cfg, log: log, nc: nc, js: js, stream: stream, subs: map[string]*natsSub{}}, nil
}

// Subscribe implements [Bus] with a durable pull consumer named name. A new
// consumer starts after cursor after; an existing one resumes from its
// acknowledgements and ignores after. The consumer allows one
// unacknowledged event, which keeps delivery in order across redeliveries.
func (b *NATS) Subscribe(ctx context.Context, name string, after uint64, h Handler) (Subscription, error) {
	return b.subscribe(ctx, name, after, false, h)
}

// Follow implements [Bus] with a consumer of a fresh name that Close
// deletes; one left behind by a host that died expires after
// followInactive without pulls.
func (b *NATS) Follow(ctx context.Context, after uint64, h Handler) (Subscription, error) {
	return b.subscribe(ctx, followerName(), after, true, h)
}

// followInactive is how long the server keeps a follower's consumer that
// nobody pulls from: well above the pull expiry, so a live follower never
// loses it.
const followInactive = time.Minute

func (b *NATS) subscribe(ctx context.Context, name string, after uint64, follow bool, h Handler) (Subscription, error) {
	if err := validateSubscriber(name); err != nil {
		return nil, fmt.Errorf("events: subscribe: %w", err)
	}
	if h == nil {
		return nil, fmt.Errorf("events: subscribe %q: nil handler", name)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("events: subscribe %q: %w", name, ErrClosed)
	}
	if _, dup := b.subs[name]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("events: subscribe %q: %w: already subscribed on this bus", name, ErrInvalidSubscriber)
	}
	s := &natsSub{bus: b, name: name, follow: follow, done: make(chan struct{})}
	b.subs[name] = s // reserve the name while setting up
	b.mu.Unlock()

	cons, err := b.consumer(ctx, name, after, follow)
	if err == nil {
		s.iter, err = cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat))
		if err != nil {
			err = fmt.Errorf("events: subscribe %q: messages: %w", name, err)
		}
	}
	b.mu.Lock()
	if err == nil && b.closed {
		s.iter.Stop()
		err = fmt.Errorf("events: subscribe %q: %w", name, ErrClosed)
	}
	if err != nil {
		delete(b.subs, name)
		b.mu.Unlock()
		return nil, err
	}
	var runCtx context.Context
	runCtx, s.cancel = context.WithCancel(context.Background())
	b.mu.Unlock()
	go s.run(runCtx, h)
	return s, nil
}

func (b *NATS) consumer(ctx context.Context, name string, after uint64, follow bool) (jetstream.Consumer, error) {
	cons, err := b.stream.Consumer(ctx, name)
	if err == nil {
		return cons, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("events: subscribe %q: look up consumer: %w", name, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   "capgate events subscriber " + name,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       b.cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 1,
		// Without it every subscriber name ever used would keep a
		// consumer on the server forever.
		InactiveThreshold: b.cfg.InactiveThreshold,
		FilterSubject:     b.cfg.SubjectPrefix + ".>",
	}
	if follow {
		cfg.Description = "capgate events follower (deleted when it closes)"
		cfg.InactiveThreshold = followInactive
	}
	if after > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = after + 1
	}
	cons, err = b.stream.CreateConsumer(ctx, cfg)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		// Another host created it meanwhile; share it.
		cons, err = b.stream.Consumer(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("events: subscribe %q: create consumer on stream %s: %w", name, b.cfg.Stream, err)
	}
	return cons, nil
}

func (b *NATS) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close implements [Bus]: it stops the subscriptions, waits for their
// handlers and closes the connection. The stream and the durable consumers
// stay on the server; an embedded server is then shut down, its store
// written out.
func (b *NATS) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.closed = true
	subs := make([]*natsSub, 0, len(b.subs))
	for _, s := range b.subs {
		if s.cancel != nil { // set up completely
			subs = append(subs, s)
		}
	}
	b.closingSubs = subs
	b.mu.Unlock()
	if b.out != nil {
		b.out.stop() // what it still holds stays on disk for the next start
	}
	for _, s := range subs {
		_ = s.Close()
	}
	// Subscriptions closing by themselves meanwhile finish deleting their
	// consumers on the connection still open.
	b.cleaning.Wait()
	// Acks were confirmed one by one; flush the naks of stopped subscribers.
	err := b.nc.FlushTimeout(5 * time.Second)
	b.nc.Close()
	if err != nil {
		err = fmt.Errorf("events: nats: flush before close: %w", err)
	}
	if b.release != nil {
		err = errors.Join(err, b.release())
	}
	return err
}

// ConsumerNames lists the stream's consumers, for tests and diagnostics.
func (b *NATS) ConsumerNames(ctx context.Context) ([]string, error) {
	var names []string
	l := b.stream.ConsumerNames(ctx)
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("events: consumers of stream %s: %w", b.cfg.Stream, err)
	}
	return names, nil
}

// DeleteStream removes the bus's stream and its consumers from the server.
// Meant for tests and operators; the bus must be open.
func (b *NATS) DeleteStream(ctx context.Context) error {
	if err := b.js.DeleteStream(ctx, b.cfg.Stream); err != nil {
		return fmt.Errorf("events: nats: delete stream %s: %w", b.cfg.Stream, err)
	}
	return nil
}

type natsSub struct {
	bus    *NATS
	name   string
	follow bool // delete the consumer on Close
	iter   jetstream.MessagesContext
	cancel context.CancelFunc
	once   sync.Once
	done   chan struct{}

	deleteOnce sync.Once
}

func (s *natsSub) Name() string { return s.name }

func (s *natsSub) Close() error {
	s.once.Do(func() {
		s.cancel()
		// Drain keeps an event already pulled into the buffer so that run
		// can hand it back to the server instead of leaving it to AckWait.
		s.iter.Drain()
	})
	<-s.done
	if s.follow {
		s.deleteOnce.Do(func() {
			b := s.bus
			b.mu.Lock()
			if b.closed && !b.closing(s) {
				// The bus closed without this subscription (its run had
				// ended): the consumer expires by itself after
				// followInactive, and the connection is gone.
				b.mu.Unlock()
				return
			}
			b.cleaning.Add(1)
			b.mu.Unlock()
			defer b.cleaning.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := b.stream.DeleteConsumer(ctx, s.name)
			if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				// It expires by itself after followInactive.
				b.log.Warn("deleting a follower's consumer failed", "subscriber", s.name, "err", err)
			}
		})
	}
	return nil
}

func (s *natsSub) run(ctx context.Context, h Handler) {
	b := s.bus
	log := b.log.With("subscriber", s.name)
	defer func() {
		b.mu.Lock()
		delete(b.subs, s.name)
		b.mu.Unlock()
		close(s.done)
	}()
	for {
		msg, err := s.iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("fetching the next event failed; retrying", "err", err)
			select { // do not spin on a persistent error
			case <-time.After(b.cfg.Backoff.Min):
			case <-ctx.Done():
			}
			continue
		}
		if ctx.Err() != nil {
			s.release(log, msg, 0)
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			log.Error("event without JetStream metadata; terminating it", "subject", msg.Subject(), "err", err)
			_ = msg.Term()
			continue
		}
		ev, err := decodeEvent(meta.Sequence.Stream, msg.Data())
		if err != nil {
			log.Error("undecodable event; terminating it", "cursor", meta.Sequence.Stream, "err", err)
			_ = msg.Term()
			continue
		}
		if err := callHandler(ctx, h, ev); err != nil {
			if ctx.Err() != nil {
				s.release(log, msg, 0)
				continue
			}
			failures := int(meta.NumDelivered)
			delay := b.cfg.Backoff.Delay(failures)
			log.Warn("event handler failed; will redeliver", "cursor", ev.Cursor, "type", ev.Type, "attempt", failures, "retry_in", delay, "err", err)
			s.release(log, msg, delay)
			continue
		}
		ackCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := msg.DoubleAck(ackCtx); err != nil {
			log.Warn("acknowledging event failed; it may be delivered again", "cursor", ev.Cursor, "err", err)
		}
		cancel()
	}
}

// release hands msg back to the server for redelivery after delay.
func (s *natsSub) release(log *slog.Logger, msg jetstream.Msg, delay time.Duration) {
	var err error
	if delay > 0 {
		err = msg.NakWithDelay(delay)
	} else {
		err = msg.Nak()
	}
	if err != nil {
		log.Warn("returning event to the stream failed", "subject", msg.Subject(), "err", err)
	}
}

// pullExpiry bounds how long one pull request waits at the server. A short
// one means that if a request is lost in a stall (seen on a starved
// machine: delivery stopped until the default 30 s expiry), the iterator
// asks again within seconds instead.
//
// pullHeartbeat is how often the server says a waiting request is alive;
// two missed ones make the iterator ask again. Left to the client's
// default (half the expiry), a NATS 2.9 server on a loaded machine let
// deliveries stall two seconds at a time (the concurrent-publishers
// contract test, with three busy loops beside it: 1 run in 15 timed out
// at 170 of 200 events, each stall ending in "no heartbeat received"); at
// a quarter of the expiry, 25 runs of that test and 40 of the whole
// contract under the same load saw no stall and no missed heartbeat. An
// embedded server 2.15 saw none with the default either.
const (
	pullExpiry    = 2 * time.Second
	pullHeartbeat = pullExpiry / 4
)

// ValidStreamName reports whether s is acceptable as NATSConfig.Stream.
func ValidStreamName(s string) bool { return streamNameRE.MatchString(s) }
