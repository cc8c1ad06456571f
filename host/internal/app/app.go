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
}

// Options are what the configuration file does not say.
type Options struct {
	// Version is the build version.
	Version string
	// Logger receives the host's and the plugins' records.
	Logger *slog.Logger
	// PluginStartTimeout bounds the start of one plugin; 0 means 30s.
	PluginStartTimeout time.Duration
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
	specs := make([]pluginhost.Spec, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
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
	// Before anything serves: a plugin providing a blocked entity type
	// (personal or financial data) stops start-up here.
	cat := catalogue.New(cfg.Search.BlockedEntities)
	if err := plugins.RegisterEntities(cat); err != nil {
		return nil, err
	}
	gate, err := dispatch.New(reg, cfg.Policy(), plugins.Providers())
	if err != nil {
		return nil, err
	}
	warnUnusable(log, cfg, reg)

	srv := server.New(server.Options{
		Enabled:         cfg.Enabled,
		Addr:            cfg.Listen,
		Version:         opts.Version,
		MaxBodyBytes:    cfg.HTTP.MaxBodyBytes,
		RequestTimeout:  cfg.HTTP.RequestTimeout,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		AllowedOrigins:  cfg.HTTP.AllowedOrigins,
		Dispatcher:      gate,
		Auth:            auth.New(cfg.Tokens),
		Logger:          log,
	})
	return &App{cfg: cfg, log: log, plugins: plugins, gate: gate, srv: srv, cat: cat}, nil
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
		a.plugins.Stop()
		return fmt.Errorf("listen: %w", err)
	}
	return a.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	defer a.plugins.Stop()
	a.log.Info("capgate serving", "endpoint", "http://"+ln.Addr().String()+server.MCPPath,
		"capabilities", len(a.gate.Registry().All()), "plugins", len(a.plugins.Plugins()),
		"entity_types", len(a.cat.Entities()))
	err := a.srv.Serve(ctx, ln)
	a.log.Info("capgate stopped")
	return err
}
