package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capgate/capgate/host/internal/answers"
	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/eventspack"
	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/metrics"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/switches"
	"github.com/capgate/capgate/host/internal/tasks"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/idempotency"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
)

// App is a provisioned host.
type App struct {
	cfg     *config.Config
	log     *slog.Logger
	plugins *pluginhost.Host
	gate    *dispatch.Dispatcher
	srv     *server.Server
	cat     *catalogue.Catalogue
	bus     events.Bus
	idem    *idempotency.Store
	gov     *governance
	auth    *auth.Store
	limiter dispatch.Limiter
	aud     *auditor
	// auditStore is the trail's store, closed after the writer drains.
	auditStore audit.Store
	// approvals holds the calls that wait for a human and runs the
	// approved ones.
	approvals *approvalDesk
	// tasks keeps the MCP tasks extension's tasks, swept by purge.
	tasks *tasks.Store
	// answers brings clients' answers to the calls that asked them, over
	// the bus's NATS connection; closed before the bus.
	answers *answers.Relay
	// file is the configuration file (empty when the config was not read
	// from one); reloads read it again.
	file string
	// reloadMu serialises reloads (SIGHUP and the file watcher) and
	// guards cfg and readSum, the SHA-256 of the file as last read.
	reloadMu sync.Mutex
	readSum  []byte
	// metrics and metricsLn serve metrics.listen; nil when it is off.
	metrics   *metrics.Metrics
	metricsLn net.Listener
	// tracing exports the host's and the plugins' spans; nil when it is
	// off.
	tracing *tracing
	// oauth checks OAuth access tokens; nil when auth.oauth is off.
	oauth *auth.OAuth
}

// Options are what the configuration file does not say.
type Options struct {
	// Version is the build version.
	Version string
	// Logger receives the host's and the plugins' records.
	Logger *slog.Logger
	// PluginStartTimeout bounds the start of one plugin; 0 means 30s.
	PluginStartTimeout time.Duration
	// Rebuild asks plugins to rebuild what they derived from other plugins
	// (the search index) while they start: `capgate search reindex`.
	Rebuild bool
}

// New starts the plugins named in cfg and builds the gate and server.
func New(ctx context.Context, cfg *config.Config, opts Options) (_ *App, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data_dir: create %s: %w", cfg.DataDir, err)
	}
	// The bus comes first: plugins publish while they are configured.
	bus, err := OpenBus(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = bus.Close()
		}
	}()
	// Before any plugin starts: a database that cannot be reached stops
	// start-up having touched nothing else.
	idem, err := idempotency.Open(ctx, cfg.Database.DSN, cfg.DataDir, idempotency.WithLog(log))
	if err != nil {
		return nil, fmt.Errorf("database.dsn: %w", err)
	}
	defer func() {
		if err != nil {
			_ = idem.Close()
		}
	}()
	sw, err := switches.Open(ctx, cfg.Database.DSN, cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("database.dsn: %w", err)
	}
	defer func() {
		if err != nil {
			_ = sw.Close()
		}
	}()
	appr, err := approvals.Open(ctx, cfg.Database.DSN, cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("database.dsn: %w", err)
	}
	defer func() {
		if err != nil {
			_ = appr.Close()
		}
	}()
	taskStore, err := tasks.Open(ctx, cfg.Database.DSN, cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("database.dsn: %w", err)
	}
	defer func() {
		if err != nil {
			_ = taskStore.Close()
		}
	}()
	aud, auditStore, err := openAudit(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = aud.close(context.Background())
			_ = auditStore.Close()
		}
	}()
	// The shared kill switch as it stands now, before anything serves.
	off, err := sw.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("database.dsn: %w", err)
	}
	specs := make([]pluginhost.Spec, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
		if p.Name == eventspack.ProviderName {
			return nil, fmt.Errorf("plugins[%d].name: %q is reserved for the host's own capabilities; name the plugin differently", i, p.Name)
		}
		raw, err := p.ConfigJSON()
		if err != nil {
			return nil, fmt.Errorf("plugins[%d].config: %w", i, err)
		}
		specs[i] = pluginhost.Spec{
			Name: p.Name, Path: p.Path, SHA256: p.SHA256,
			Config: json.RawMessage(raw), ConfigPath: fmt.Sprintf("plugins[%d]", i),
			Env: p.Env, MaxInFlight: p.MaxInFlight, Restart: p.Restart,
		}
		if len(p.EnvMissing) > 0 {
			log.Warn("a variable the plugin's env passes on is not set in capgate's environment; the plugin goes without it",
				"plugin", p.Name, "config", fmt.Sprintf("plugins[%d].env", i), "variables", strings.Join(p.EnvMissing, ", "))
		}
	}
	tr, err := openTracing(ctx, cfg, opts.Version, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tr.shutdown()
		}
	}()
	plugins, err := pluginhost.Start(ctx, specs, pluginhost.Options{
		DataDir: cfg.DataDir, HostVersion: opts.Version, Logger: log, StartTimeout: opts.PluginStartTimeout,
		Events: bus, MaxResults: cfg.MaxResults, MaxResultBytes: cfg.MaxResultBytes, Tracing: tr.forPlugins(),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			plugins.Stop()
		}
	}()

	packs := make([]string, 0, len(cfg.Packs))
	for p := range cfg.Packs {
		packs = append(packs, p)
	}
	slices.Sort(packs)
	reg := registry.New(packs)
	if err := plugins.Register(reg); err != nil {
		return nil, err
	}
	for _, u := range reg.Unbounded() {
		log.Warn("capability input has no declared bounds; only http.max_body_bytes limits it", "capability", u.Name, "plugin", u.Plugin, "unbounded", strings.Join(u.Places, "; "))
	}
	providers := plugins.Providers()
	pack, err := eventspack.New(bus, cfg.MaxResults)
	if err != nil {
		return nil, fmt.Errorf("max_results: %w", err)
	}
	poll, err := pack.Capability()
	if err == nil {
		err = reg.Add(poll)
	}
	if err != nil {
		// A plugin declaring events.poll itself lands here.
		return nil, fmt.Errorf("events pack: %w", err)
	}
	providers[eventspack.ProviderName] = pack
	approvalsPack, err := approvalspack.New(appr)
	if err != nil {
		return nil, err
	}
	approvalCaps, err := approvalspack.Capabilities()
	if err != nil {
		return nil, err
	}
	for _, c := range approvalCaps {
		if err := reg.Add(c); err != nil {
			// A plugin declaring approvals.get itself lands here.
			return nil, fmt.Errorf("approvals pack: %w", err)
		}
	}
	providers[approvalspack.ProviderName] = approvalsPack
	// After every capability, the host's included: a prompt may not take
	// a capability's name.
	if err := plugins.RegisterPrompts(reg); err != nil {
		return nil, err
	}
	// Before anything serves: a plugin providing a blocked entity type
	// (personal or financial data) stops start-up here.
	cat := catalogue.New(cfg.Search.BlockedEntities)
	if err := plugins.RegisterEntities(cat); err != nil {
		return nil, err
	}
	if err := checkDisabled(cfg, reg); err != nil {
		return nil, err
	}
	gov := &governance{switches: sw, log: log, cfg: cfg, off: off, aud: aud}
	gate, err := dispatch.New(reg, gov.policy(), providers)
	if err != nil {
		return nil, err
	}
	gov.gate = gate
	if off.ActionsOff {
		log.Warn("kill switch: every action is off", "by", off.ChangedBy, "at", off.ChangedAt, "release", "capgate actions on -c FILE")
	}
	limiter, err := openLimiter(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	gate.UseLimiter(limiter)
	if cfg.Audit.Enabled {
		gate.UseAuditor(aud, cfg.Audit.RefuseActions)
	} else {
		log.Warn("audit trail off (audit.enabled: false): no decision of the gate is recorded")
	}
	gate.UseIdempotency(dispatch.Idempotency{
		Store: idem, Lease: cfg.HTTP.RequestTimeout + idempotencyLeaseMargin, Retention: cfg.Idempotency.Retention, Logger: log,
	})
	tokens := auth.New(cfg.Tokens)
	oauth, err := openOAuth(cfg, gov, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && oauth != nil {
			oauth.Close()
		}
	}()
	desk := &approvalDesk{store: appr, gate: gate, principal: tokens.ByLabel, oauth: oauth != nil, log: log, ttl: cfg.Approvals.TTL, fourEyes: cfg.Approvals.FourEyes, maxPending: cfg.Approvals.MaxPending, bus: bus, aud: aud, wake: make(chan struct{}, 1)}
	gate.UseApprover(tr.approver(desk))
	confirmer, err := openConfirmer(ctx, cfg, appr)
	if err != nil {
		return nil, err
	}
	gate.UseConfirmer(confirmer)
	gate.SetInBand(cfg.InBand)
	met, metricsLn, err := openMetrics(cfg, opts.Version, plugins, aud, appr, log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && metricsLn != nil {
			_ = metricsLn.Close()
		}
	}()
	var observe func(mcp.Operation)
	if met != nil {
		gate.UseObserver(met)
		observe = met.Operation
	}
	// Plugins calling capabilities for their caller (llm.ask searching the
	// catalogue) go through this same gate.
	plugins.SetGate(tr.gate(gate))
	warnUnusable(log, cfg, reg)
	// Everything is registered: plugins may now reach each other through
	// the host (the search plugin syncs its index from the providers).
	if err := plugins.Start(ctx, opts.Rebuild); err != nil {
		return nil, err
	}

	sopts := server.Options{
		Enabled:         cfg.Enabled,
		Addr:            cfg.Listen,
		Version:         opts.Version,
		MaxBodyBytes:    cfg.HTTP.MaxBodyBytes,
		MaxInFlight:     cfg.HTTP.MaxInFlight,
		RequestTimeout:  cfg.HTTP.RequestTimeout,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		AllowedOrigins:  cfg.HTTP.AllowedOrigins,
		Dispatcher:      gate,
		Records:         records(cat, plugins),
		Auth:            tokens,
		Health:          pluginHealth(plugins),
		Admin:           gov,
		Audit:           auditStore,
		Approvals:       desk,
		Inventory:       newInventory(gov, plugins, cfg),
		Logger:          log,
		Observe:         observe,
		Tracing:         tr.forMCP(gate),
	}
	if sopts.Answers, err = openAnswers(cfg, bus, log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = sopts.Answers.Close()
		}
	}()
	if cfg.Tasks.Enabled {
		sopts.Tasks = &mcp.TaskOptions{Store: taskStore, TTL: cfg.Tasks.TTL, RunTimeout: cfg.Tasks.RunTimeout,
			PollInterval: cfg.Tasks.PollInterval, MaxPerPrincipal: cfg.Tasks.MaxPerPrincipal, Approvals: appr}
	}
	if oauth != nil {
		sopts.OAuth = oauth
	}
	if sopts.Console, err = newConsole(ctx, sopts, gov, tokens, appr); err != nil {
		return nil, err
	}
	srv := server.New(sopts)
	return &App{cfg: cfg, log: log, plugins: plugins, gate: gate, srv: srv, cat: cat, bus: bus, idem: idem, gov: gov, auth: tokens, limiter: limiter, aud: aud, auditStore: auditStore, file: cfg.File,
		approvals: desk, tasks: taskStore, answers: sopts.Answers, metrics: met, metricsLn: metricsLn, tracing: tr, oauth: oauth,
		readSum: fileSum(cfg.File)}, nil
}

// idempotencyLeaseMargin is added to the request timeout for the lease an
// idempotent call holds its key with: a call ends by its deadline, and its
// outcome is recorded right after.
const idempotencyLeaseMargin = 30 * time.Second

// auditDrain bounds how long a stopping host waits for the audit trail's
// queued records to reach the store.
const auditDrain = 10 * time.Second

// purgeEvery is how often expired idempotency records are deleted.
const purgeEvery = 10 * time.Minute

// pluginHealth feeds the health routes from the plugins' supervisors.
func pluginHealth(plugins *pluginhost.Host) server.HealthFunc {
	return func() []server.PluginHealth {
		hs := plugins.Health()
		out := make([]server.PluginHealth, len(hs))
		for i, h := range hs {
			out[i] = server.PluginHealth{Name: h.Name, State: string(h.State), Since: h.Since, Restarts: h.Restarts, RetryAt: h.NextAttempt}
		}
		return out
	}
}

// records describes the catalogue to the MCP adapter: records are MCP
// resources read and listed through platform.get and platform.list (the
// search pack's), so resources pass the same gate.
func records(cat *catalogue.Catalogue, plugins *pluginhost.Host) mcp.Records {
	desc := map[string]string{}
	for _, p := range plugins.Plugins() {
		for _, e := range p.Description().Entities {
			desc[e.Name] = e.Description
		}
	}
	r := mcp.Records{Get: platform.GetName, List: platform.ListName}
	for _, name := range cat.Entities() {
		r.Entities = append(r.Entities, mcp.EntityType{Name: name, Description: desc[name]})
	}
	return r
}

// OpenBus builds the event bus cfg asks for, a JetStream stream holding the
// last events_buffer_size events: when events.nats_url is empty, in a NATS
// server embedded in this process with its store in <data_dir>/events
// (which a second host on that data_dir is refused); otherwise the stream
// events.stream on that server. Either survives restarts of the host. A
// server that cannot be reached is an error naming events.nats_url.
func OpenBus(ctx context.Context, cfg *config.Config, log *slog.Logger) (events.Bus, error) {
	if cfg.Events.NATSURL == "" {
		bus, err := events.OpenEmbedded(ctx, events.EmbeddedConfig{
			Dir:        cfg.DataDir + string(os.PathSeparator) + "events",
			BufferSize: cfg.EventsBufferSize,
			Logger:     log,
		})
		if err != nil {
			return nil, fmt.Errorf("data_dir: %w", err)
		}
		return bus, nil
	}
	bus, err := events.OpenNATS(ctx, events.NATSConfig{
		URL:           cfg.Events.NATSURL,
		Stream:        cfg.Events.Stream,
		SubjectPrefix: SubjectPrefix(cfg.Events.Stream),
		BufferSize:    cfg.EventsBufferSize,
		Logger:        log,
		// Events the server does not acknowledge within a second wait
		// here, so a call never hangs on NATS and no event is dropped.
		OutboxDir: cfg.DataDir + string(os.PathSeparator) + "events-outbox",
	})
	if err != nil {
		return nil, fmt.Errorf("events.nats_url %s (stream %s): %w", cfg.Events.NATSURL, cfg.Events.Stream, err)
	}
	return bus, nil
}

// openAnswers builds the relay that brings a client's answer to the call
// that asked it (clients before MCP 2026-07-28 answer in a POST of their
// own, which any replica may receive). Replicas share it over the event
// bus's NATS server, under a subject of the bus's stream, outside the
// stream's own subjects.
func openAnswers(cfg *config.Config, bus events.Bus, log *slog.Logger) (*answers.Relay, error) {
	o := answers.Options{Logger: log}
	if nb, ok := bus.(*events.NATS); ok {
		stream := cfg.Events.Stream
		if stream == "" {
			stream = events.DefaultStream
		}
		o.Conn, o.Subject = nb.Conn(), answers.DefaultSubject+"."+stream
	}
	r, err := answers.New(o)
	if err != nil {
		return nil, fmt.Errorf("events.nats_url %s: %w", cfg.Events.NATSURL, err)
	}
	return r, nil
}

// SubjectPrefix is the NATS subject prefix of a stream's events: the default
// for the default stream, and one of its own for any other, as two streams
// on one server may not hold the same subjects.
func SubjectPrefix(stream string) string {
	if stream == "" || stream == events.DefaultStream {
		return events.DefaultSubjectPrefix
	}
	return "capgate.stream." + stream
}

// Bus is the event bus the plugins publish on.
func (a *App) Bus() events.Bus { return a.bus }

// Provider names the plugin providing capability, if any does.
func (a *App) Provider(capability string) (plugin string, ok bool) {
	e, ok := a.gate.Registry().Lookup(capability)
	if !ok {
		return "", false
	}
	return e.Plugin, true
}

// Close stops the plugins and closes the bus of an App that will not
// serve, such as one built to rebuild the search index.
func (a *App) Close() { a.stop() }

// stop stops the plugins, then closes the bus they published on and the
// host's store.
func (a *App) stop() {
	// An approved call running now finishes, and its outcome is kept,
	// before its plugin stops.
	a.approvals.close()
	if a.metricsLn != nil {
		// Already closed when the host served; an App that never served
		// still holds the port.
		_ = a.metricsLn.Close()
	}
	a.plugins.Stop()
	if a.oauth != nil {
		a.oauth.Close()
	}
	// The plugins have answered their last calls, and sent their spans.
	a.tracing.shutdown()
	if err := a.answers.Close(); err != nil {
		a.log.Warn("closing the answers relay", "err", err)
	}
	if err := a.bus.Close(); err != nil {
		a.log.Warn("closing the event bus", "err", err)
	}
	if err := a.idem.Close(); err != nil {
		a.log.Warn("closing the idempotency store", "err", err)
	}
	if err := a.approvals.store.Close(); err != nil {
		a.log.Warn("closing the approvals store", "err", err)
	}
	if err := a.tasks.Close(); err != nil {
		a.log.Warn("closing the tasks store", "err", err)
	}
	if err := a.gov.switches.Close(); err != nil {
		a.log.Warn("closing the switches store", "err", err)
	}
	// The plugins have stopped, so no call is left to record: write what
	// is queued, then close the store.
	dctx, cancel := context.WithTimeout(context.Background(), auditDrain)
	if err := a.aud.close(dctx); err != nil {
		a.log.Warn("audit: closing the trail", "err", err)
	}
	cancel()
	if err := a.auditStore.Close(); err != nil {
		a.log.Warn("audit: closing the store", "err", err)
	}
	if c, ok := a.limiter.(io.Closer); ok {
		if err := c.Close(); err != nil {
			a.log.Warn("closing the rate-limit counter", "err", err)
		}
	}
}

// purge deletes expired idempotency records until ctx ends.
func (a *App) purge(ctx context.Context) {
	t := time.NewTicker(purgeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			a.sweepTasks(ctx, now)
			n, err := a.idem.Purge(ctx, now)
			switch {
			case err != nil && ctx.Err() == nil:
				a.log.Warn("purging expired idempotency records", "err", err)
			case n > 0:
				a.log.Debug("purged expired idempotency records", "records", n)
			}
		}
	}
}

// sweepTasks deletes the tasks past their TTL and fails those whose run
// must have ended by now: started longer ago than a run may take, with a
// minute more for its end to be stored.
func (a *App) sweepTasks(ctx context.Context, now time.Time) {
	deleted, lost, err := a.tasks.Sweep(ctx, now.Add(-a.cfg.Tasks.RunTimeout-time.Minute), mcp.LostTaskError)
	switch {
	case err != nil && ctx.Err() == nil:
		a.log.Warn("sweeping tasks", "err", err)
	case lost > 0:
		a.log.Warn("tasks lost with the server that ran them, ended as failed", "tasks", lost)
	}
	if deleted > 0 {
		a.log.Debug("deleted expired tasks", "tasks", deleted)
	}
}

// warnUnusable points out configuration that is valid but surely not
// meant: an enabled pack no plugin provides, a server with no tokens.
func warnUnusable(log *slog.Logger, cfg *config.Config, reg *registry.Registry) {
	provided := map[string]bool{}
	for _, e := range reg.All() {
		provided[e.Pack] = true
	}
	for pack, on := range cfg.Packs {
		if on && !provided[pack] {
			log.Warn("pack is enabled but no plugin provides it", "pack", pack)
		}
	}
	if !cfg.Enabled {
		log.Warn("capgate is disabled (enabled: false): the endpoint answers 404 to every request")
	} else if len(cfg.Tokens) == 0 && cfg.Auth.OAuth == nil {
		log.Warn("no tokens are configured: the endpoint answers 404 to every request")
	}
}

// Listen binds cfg's listen address. The host binds it before anything
// else starts, so a port already taken fails in a moment, before any plugin
// has run or touched its data.
func Listen(cfg *config.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		var hint string
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = " (another process holds the port: stop it, or set listen or CAPGATE_LISTEN to a free address)"
		}
		return nil, fmt.Errorf("listen %s: %w%s", cfg.Listen, err, hint)
	}
	return ln, nil
}

// Serve serves on ln, which Listen opened, until ctx ends, then drains
// in-flight requests and stops every plugin.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	defer a.stop()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.purge(pctx)
	metricsDone := make(chan struct{})
	go func() { defer close(metricsDone); a.serveMetrics(pctx) }()
	defer func() { cancel(); <-metricsDone }()
	a.approvals.start()
	go a.gov.switches.Watch(pctx, switches.PollInterval, a.log, a.gov.switched)
	if a.file != "" {
		go a.watchConfig(pctx, ConfigPollInterval)
	}
	a.log.Info("capgate serving", "endpoint", "http://"+ln.Addr().String()+server.MCPPath,
		"capabilities", len(a.gate.Registry().All()), "plugins", len(a.plugins.Plugins()),
		"entity_types", len(a.cat.Entities()))
	err := a.srv.Serve(ctx, ln)
	a.log.Info("capgate stopped")
	return err
}

// checkDisabled refuses to start when disabled_capabilities or risk names
// a capability no plugin provides, or risk a pack none does: a misspelt
// name would leave on what the operator meant to switch off, or safe what
// they meant to put behind a human.
func checkDisabled(cfg *config.Config, reg *registry.Registry) error {
	var errs []error
	for i, name := range cfg.DisabledCapabilities {
		_, isCap := reg.Lookup(name)
		// A prompt is switched off by its name too.
		if _, isPrompt := reg.LookupPrompt(name); !isCap && !isPrompt {
			errs = append(errs, fmt.Errorf("disabled_capabilities[%d]: no plugin provides capability %q", i, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Risk.Capabilities)) {
		if _, ok := reg.Lookup(name); !ok {
			errs = append(errs, fmt.Errorf("risk.capabilities[%q]: no plugin provides capability %q", name, name))
		}
	}
	provided := map[string]bool{}
	for _, e := range reg.All() {
		provided[e.Pack] = true
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Risk.Packs)) {
		if !provided[name] {
			errs = append(errs, fmt.Errorf("risk.packs.%s: no plugin provides a capability in pack %q", name, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.InBand.Capabilities)) {
		if _, ok := reg.Lookup(name); !ok {
			errs = append(errs, fmt.Errorf("risk.in_band.capabilities[%q]: no plugin provides capability %q", name, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.InBand.Packs)) {
		if !provided[name] {
			errs = append(errs, fmt.Errorf("risk.in_band.packs.%s: no plugin provides a capability in pack %q", name, name))
		}
	}
	return errors.Join(errs...)
}

// openLimiter is where the rate limits are counted: in this process (each
// replica its own calls), or in the Redis limits.redis_url names, which
// replicas share. Redis unreachable at start-up is no reason not to
// start: on_redis_error decides what its calls meet until it is back.
func openLimiter(ctx context.Context, cfg *config.Config, log *slog.Logger) (dispatch.Limiter, error) {
	c := cfg.LimitsCounter
	if c.RedisURL == "" {
		return ratelimit.NewMemory(), nil
	}
	r, err := ratelimit.NewRedis(c.RedisURL, ratelimit.RedisOptions{FailOpen: c.FailOpen, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("limits.redis_url: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.Ping(pctx); err != nil {
		what := "calls a limit applies to are refused until it answers (limits.on_redis_error: refuse)"
		if c.FailOpen {
			what = "calls a limit applies to are admitted uncounted until it answers (limits.on_redis_error: allow)"
		}
		log.Warn("rate limits: Redis does not answer; "+what, "err", err)
	}
	return r, nil
}
