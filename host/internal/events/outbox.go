package events

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// DefaultPublishWait is how long Publish waits for the server's
	// acknowledgement before it keeps the event in the outbox: far above
	// a healthy server's few milliseconds, far below a request timeout.
	DefaultPublishWait = time.Second
	// relayWait bounds one send of a kept event; relayRetry spaces the
	// sends while the server stays away.
	relayWait  = 5 * time.Second
	relayRetry = time.Second
)

// message is one event as sent to the server. MsgID is the server's
// deduplication key: an event sent directly, not acknowledged in time and
// kept, may also reach the stream from the client's reconnect buffer, and
// the server then stores it once.
type message struct {
	MsgID   string          `json:"msg_id"`
	Subject string          `json:"subject"`
	Body    json.RawMessage `json:"body"`
}

// Publish implements [Bus]. The cursor is the stream sequence the server
// acknowledged.
//
// With an outbox (NATSConfig.OutboxDir) Publish never waits on the server
// longer than PublishWait: an event it has not acknowledged by then, and
// every event published while older ones are still kept, is written to
// the outbox (fsynced) and Publish returns cursor 0 and no error. The
// outbox sends them in order once the server answers. A caller's
// cancelled context does not drop the event: it reports a change already
// made. Only an event the server refuses outright is an error.
func (b *NATS) Publish(ctx context.Context, ev Event) (uint64, error) {
	ev, err := prepare(ev, b.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("events: publish: %w", err)
	}
	if b.isClosed() {
		return 0, fmt.Errorf("events: publish: %w", ErrClosed)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, fmt.Errorf("events: publish %s: encode: %w", ev.Type, err)
	}
	m := message{MsgID: rand.Text(), Subject: b.cfg.SubjectPrefix + "." + ev.Type, Body: body}
	if b.out == nil {
		return b.send(ctx, m)
	}
	if b.out.waiting() {
		// Behind the kept ones, so that subscribers see events in order.
		return 0, b.out.keep(m)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.PublishWait)
	defer cancel()
	seq, err := b.send(wctx, m)
	if err == nil || refused(err) {
		return seq, err
	}
	if kerr := b.out.keep(m); kerr != nil {
		return 0, fmt.Errorf("%w; keeping it in the outbox failed too: %w", err, kerr)
	}
	return 0, nil
}

// send publishes m and waits for the server's acknowledgement.
func (b *NATS) send(ctx context.Context, m message) (uint64, error) {
	ack, err := b.js.Publish(ctx, m.Subject, m.Body, jetstream.WithExpectStream(b.cfg.Stream), jetstream.WithMsgID(m.MsgID))
	if err != nil {
		return 0, fmt.Errorf("events: publish %s to NATS stream %s: %w", m.Subject, b.cfg.Stream, err)
	}
	return ack.Sequence, nil
}

// refused reports whether the server answered err itself, refusing the
// event for good (a 4xx: wrong stream, too large): keeping it would only
// block the events behind it. A 5xx (JetStream still starting) passes.
func refused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.Code >= 400 && api.Code < 500
}

// outbox is a directory of events waiting for the server, one fsynced file
// each, named so that their order is the order they were kept in. It
// lives in the host's data_dir, so what a host kept and could not send
// before it stopped is sent when it starts again.
type outbox struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	pending int   // files not yet acknowledged
	last    int64 // the newest file's number
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	outboxExt   = ".json"
	outboxTmp   = ".tmp-"
	outboxSetAs = ".refused" // a file the server refused or nobody can read
)

func openOutbox(dir string, log *slog.Logger) (*outbox, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("events: outbox %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("events: outbox %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), outboxTmp) {
			// Never renamed into place: its Publish kept nothing.
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	o := &outbox{dir: dir, log: log.With("outbox", dir), kick: make(chan struct{}, 1)}
	if o.pending, err = countKept(dir); err != nil {
		return nil, err
	}
	if o.pending > 0 {
		o.log.Info("the events outbox holds events kept before this start; publishing them", "events", o.pending)
	}
	return o, nil
}

func (o *outbox) waiting() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending > 0
}

// keep writes m to the outbox durably and wakes the relay.
func (o *outbox) keep(m message) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("events: outbox: encode: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := max(time.Now().UnixNano(), o.last+1)
	if err := writeSynced(o.dir, fmt.Sprintf("%020d%s", n, outboxExt), data); err != nil {
		return fmt.Errorf("events: outbox %s: %w", o.dir, err)
	}
	o.last = n
	o.pending++
	if o.pending == 1 {
		o.log.Warn("the NATS server did not acknowledge an event in time; keeping events in the outbox until it does")
	}
	select {
	case o.kick <- struct{}{}:
	default:
	}
	return nil
}

// writeSynced writes name in dir so that it is either whole or absent,
// and on disk, when it returns.
func writeSynced(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, outboxTmp+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// start runs the relay until stop: it sends the kept events, oldest
// first, through send.
func (o *outbox) start(send func(context.Context, message) error) {
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel, o.done = cancel, make(chan struct{})
	go func() {
		defer close(o.done)
		for {
			err := o.drain(ctx, send)
			var wait <-chan time.Time
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				wait = time.After(relayRetry)
			case o.waiting():
				continue // kept while this pass ran
			}
			select {
			case <-ctx.Done():
				return
			case <-wait:
			case <-o.kick:
				if err != nil {
					// Still away: the retry's wait stands.
					select {
					case <-ctx.Done():
						return
					case <-wait:
					}
				}
			}
		}
	}()
}

func (o *outbox) stop() {
	if o.cancel != nil {
		o.cancel()
		<-o.done
	}
}

// drain sends every kept event in order and removes each the server
// acknowledged; it stops at the first the server did not.
func (o *outbox) drain(ctx context.Context, send func(context.Context, message) error) error {
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return fmt.Errorf("events: outbox %s: %w", o.dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), outboxExt) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, name := range names {
		path := filepath.Join(o.dir, name)
		var m message
		data, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// Sent by another host sharing the directory.
		case err == nil:
			if err = json.Unmarshal(data, &m); err == nil {
				err = send(ctx, m)
				if err != nil && !refused(err) {
					return err
				}
			}
			if err != nil {
				o.log.Error("an event in the outbox cannot be published; set aside", "file", name+outboxSetAs, "err", err)
				err = os.Rename(path, path+outboxSetAs)
			} else {
				err = os.Remove(path)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("events: outbox %s: %w", o.dir, err)
			}
		default:
			return fmt.Errorf("events: outbox %s: %w", o.dir, err)
		}
		o.mu.Lock()
		o.pending = max(o.pending-1, 0)
		o.mu.Unlock()
	}
	// Recount: the count is what decides whether Publish queues behind
	// kept events, so it must not drift from the directory.
	// keep holds the lock while it writes, so the count taken under it
	// includes every file in place.
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := countKept(o.dir)
	if err != nil {
		return err
	}
	if n == 0 && len(names) > 0 {
		o.log.Info("the events outbox is empty again: every kept event is published", "published", len(names))
	}
	o.pending = n
	return nil
}

func countKept(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("events: outbox %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), outboxExt) {
			n++
		}
	}
	return n, nil
}

// relayOne sends one kept event for the outbox.
func (b *NATS) relayOne(ctx context.Context, m message) error {
	ctx, cancel := context.WithTimeout(ctx, relayWait)
	defer cancel()
	_, err := b.send(ctx, m)
	return err
}
