package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"time"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/dispatch"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/eventspack"
	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/host/internal/registry"
	"github.com/capgate/capgate/host/internal/server"
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
		}
	}
	plugins, err := pluginhost.Start(ctx, specs, pluginhost.Options{
		DataDir: cfg.DataDir, HostVersion: opts.Version, Logger: log, StartTimeout: opts.PluginStartTimeout,
		Events: bus, MaxResults: cfg.MaxResults, LLMConnectionSlug: cfg.LLMConnectionSlug,
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
	// Before anything serves: a plugin providing a blocked entity type
	// (personal or financial data) stops start-up here.
	cat := catalogue.New(cfg.Search.BlockedEntities)
	if err := plugins.RegisterEntities(cat); err != nil {
		return nil, err
	}
	gate, err := dispatch.New(reg, cfg.Policy(), providers)
	if err != nil {
		return nil, err
	}
	// Plugins calling capabilities for their caller (llm.ask searching the
	// catalogue) go through this same gate.
	plugins.SetGate(gate)
	warnUnusable(log, cfg, reg)
	// Everything is registered: plugins may now reach each other through
	// the host (the search plugin syncs its index from the providers).
	if err := plugins.Start(ctx, opts.Rebuild); err != nil {
		return nil, err
	}

	srv := server.New(server.Options{
		Enabled:         cfg.Enabled,
		Addr:            cfg.Listen,
		Version:         opts.Version,
		MaxBodyBytes:    cfg.HTTP.MaxBodyBytes,
		RequestTimeout:  cfg.HTTP.RequestTimeout,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		AllowedOrigins:  cfg.HTTP.AllowedOrigins,
		Dispatcher:      gate,
		Records:         records(cat, plugins),
		Auth:            auth.New(cfg.Tokens),
		Health:          pluginHealth(plugins),
		Logger:          log,
	})
	return &App{cfg: cfg, log: log, plugins: plugins, gate: gate, srv: srv, cat: cat, bus: bus}, nil
}

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

// Catalogue records are MCP resources read and listed through these
// capabilities of the search pack, so resources pass the same gate.
const (
	recordGet  = "platform.get"
	recordList = "platform.list"
)

// records describes the catalogue to the MCP adapter.
func records(cat *catalogue.Catalogue, plugins *pluginhost.Host) mcp.Records {
	desc := map[string]string{}
	for _, p := range plugins.Plugins() {
		for _, e := range p.Description().Entities {
			desc[e.Name] = e.Description
		}
	}
	r := mcp.Records{Get: recordGet, List: recordList}
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
	})
	if err != nil {
		return nil, fmt.Errorf("events.nats_url %s (stream %s): %w", cfg.Events.NATSURL, cfg.Events.Stream, err)
	}
	return bus, nil
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

// stop stops the plugins, then closes the bus they published on.
func (a *App) stop() {
	a.plugins.Stop()
	if err := a.bus.Close(); err != nil {
		a.log.Warn("closing the event bus", "err", err)
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
	} else if len(cfg.Tokens) == 0 {
		log.Warn("no tokens are configured: the endpoint answers 404 to every request")
	}
}

// Run serves on the configured address until ctx ends, then drains
// in-flight requests and stops every plugin.
func (a *App) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		a.stop()
		return fmt.Errorf("listen: %w", err)
	}
	return a.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	defer a.stop()
	a.log.Info("capgate serving", "endpoint", "http://"+ln.Addr().String()+server.MCPPath,
		"capabilities", len(a.gate.Registry().All()), "plugins", len(a.plugins.Plugins()),
		"entity_types", len(a.cat.Entities()))
	err := a.srv.Serve(ctx, ln)
	a.log.Info("capgate stopped")
	return err
}
