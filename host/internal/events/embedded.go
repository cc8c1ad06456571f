package events

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedConfig configures the bus [OpenEmbedded] serves from a NATS
// server inside the host process.
type EmbeddedConfig struct {
	// Dir holds the JetStream store (the host uses <data_dir>/events). It
	// is created if missing, and one process at a time may open it.
	Dir string
	// BufferSize is how many recent events are retained
	// (events_buffer_size); zero means DefaultBufferSize.
	BufferSize int
	// SyncAlways makes the store fsync every event before the publish is
	// acknowledged, so that an acknowledged event also survives a power
	// loss or a kernel crash. Without it an acknowledged event has been
	// written to the operating system, which survives the host process
	// being killed (kill -9, the OOM killer), and is fsynced at the next
	// background sync (every two minutes, NATS's default) or on Close.
	// The host leaves it off: see the package documentation.
	SyncAlways bool
	// Backoff spaces redeliveries after a handler error.
	Backoff Backoff
	// AckWait and InactiveThreshold are as in [NATSConfig].
	AckWait           time.Duration
	InactiveThreshold time.Duration
	// Logger receives the bus's records and the embedded server's (its
	// notices at debug level, its warnings and errors as such); nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock for events published without At; nil means time.Now.
	Now func() time.Time
}

// embeddedStartTimeout bounds the embedded server's start when ctx has no
// deadline. Recovering a store of DefaultBufferSize events takes
// milliseconds; this only keeps a wedged start from hanging the host.
const embeddedStartTimeout = 30 * time.Second

// OpenEmbedded starts a NATS server with JetStream inside this process,
// storing its stream in cfg.Dir and listening on no network port, and
// returns the same [NATS] bus as OpenNATS, connected to it in-process.
// The stream keeps its identity, its events and its subscribers'
// acknowledgements across restarts. Close shuts the server down.
//
// Opening cfg.Dir while another bus holds it, in another capgate process
// or in this one, fails with an error naming the directory and the holder.
func OpenEmbedded(ctx context.Context, cfg EmbeddedConfig) (_ *NATS, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("events: embedded: store directory is empty")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("events: embedded: store directory %s: %w", cfg.Dir, err)
	}
	ncfg, log, err := NATSConfig{
		BufferSize:        cfg.BufferSize,
		Backoff:           cfg.Backoff,
		AckWait:           cfg.AckWait,
		InactiveThreshold: cfg.InactiveThreshold,
		Logger:            cfg.Logger,
		Now:               cfg.Now,
	}.withDefaults("embedded")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("events: embedded: create store directory: %w", err)
	}
	// nats-server does not lock its store: two servers on one directory
	// would both write it and corrupt it.
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = unlock()
		}
	}()

	srvLog := &serverLogger{log: log.With("nats_server", "embedded")}
	srv, err := server.NewServer(&server.Options{
		ServerName:             "capgate-embedded",
		DontListen:             true,
		JetStream:              true,
		StoreDir:               dir,
		SyncAlways:             cfg.SyncAlways,
		NoSigs:                 true, // the host handles SIGTERM and SIGINT
		DisableJetStreamBanner: true,
	})
	if err != nil {
		return nil, fmt.Errorf("events: embedded: configure NATS server: %w", err)
	}
	srv.SetLoggerV2(srvLog, false, false, false)
	shutdown := func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	// Start returns once the server is up: with DontListen there is no
	// accept loop to wait for. It reports a JetStream that cannot start
	// (an unreadable store) only through its log.
	srv.Start()
	if !srv.JetStreamEnabled() {
		shutdown()
		return nil, fmt.Errorf("events: embedded: JetStream did not start on store %s: %s", dir, srvLog.fatal())
	}
	wait := embeddedStartTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl)
	}
	if !srv.ReadyForConnections(wait) {
		shutdown()
		return nil, fmt.Errorf("events: embedded: NATS server on store %s not ready after %s", dir, wait.Round(time.Millisecond))
	}
	// The URL only fills the client's server list: with InProcessServer it
	// never dials it.
	ncfg.URL = srv.ClientURL()
	nc, err := connect(ncfg, log, nats.InProcessServer(srv))
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("events: embedded: connect to the in-process server: %w", err)
	}
	bus, err := openStream(ctx, ncfg, log, nc)
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("%w (store %s)", err, dir)
	}
	bus.release = func() error {
		shutdown()
		// Shutdown writes the store out but does not fsync it: without
		// this a power loss soon after a clean stop could lose events.
		err := syncTree(dir)
		if uerr := unlock(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("events: embedded: unlock store %s: %w", dir, uerr))
		}
		return err
	}
	return bus, nil
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("events: embedded: sync store %s: %w", dir, err)
	}
	return nil
}

// lockName is the file in the store directory an embedded bus holds an
// exclusive lock on while open.
const lockName = "capgate.lock"

// serverLogger routes the embedded server's log to slog. Its notices
// (starting, recovering streams, shutting down) are routine for a host, so
// they go to debug; warnings and errors keep their level.
type serverLogger struct {
	log *slog.Logger

	mu        sync.Mutex
	lastFatal string
}

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

// Fatalf does not exit, unlike the server's own logger: OpenEmbedded turns
// what went wrong into an error.
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	l.lastFatal = msg
	l.mu.Unlock()
	l.log.Error(msg)
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastFatal == "" {
		return "the server gave no reason"
	}
	return l.lastFatal
}
