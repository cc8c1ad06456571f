package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Spec says how to run one plugin.
type Spec struct {
	// Name is the operator's name for the plugin instance.
	Name string
	// Path is the plugin binary.
	Path string
	// SHA256, when set, is the hex digest the binary must have.
	SHA256 string
	// Config is the plugin's config block as JSON.
	Config json.RawMessage
	// ConfigPath names the config entry in error messages, e.g. "plugins[0]".
	ConfigPath string
}

// Options are the host-wide settings for starting plugins.
type Options struct {
	// DataDir is the host's data directory; each plugin gets
	// DataDir/plugins/<name>.
	DataDir string
	// HostVersion is handed to each plugin.
	HostVersion string
	// Logger receives the host's and the plugins' records.
	Logger *slog.Logger
	// StartTimeout bounds the handshake, configuration and description of
	// one plugin. Default 30s.
	StartTimeout time.Duration
	// Events is the bus plugins publish on through the host service; nil
	// refuses their publishing with Unavailable.
	Events events.Bus
	// MaxResults is handed to each plugin (config max_results).
	MaxResults int
	// LLMConnectionSlug is handed to each plugin (config
	// llm_connection_slug).
	LLMConnectionSlug string
}

// Plugin is a running plugin.
type Plugin struct {
	spec     Spec
	client   *plugin.Client
	cmd      *exec.Cmd
	live     *liveness
	watching bool // the exit watcher runs
	rpc      capgatev1.PluginServiceClient
	describe *capgatev1.DescribeResponse
	calls    *callStream
	stopHost func()
	inflight inflight // callers of the calls in progress, for nested calls
}

// Name returns the operator's name for the plugin.
func (p *Plugin) Name() string { return p.spec.Name }

// Description returns what the plugin said about itself.
func (p *Plugin) Description() *capgatev1.DescribeResponse { return p.describe }

// PID returns the plugin's process id, or 0 when it has exited.
func (p *Plugin) PID() int {
	if rc := p.client.ReattachConfig(); rc != nil && rc.Pid > 0 {
		return rc.Pid
	}
	return 0
}

// Host is the set of running plugins.
type Host struct {
	plugins  []*Plugin
	log      *slog.Logger
	once     sync.Once
	services *services
}

// Start runs every plugin in specs, in order. On any failure it stops the
// plugins it already started and returns an error naming the plugin and its
// config path.
func Start(ctx context.Context, specs []Spec, opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	h := &Host{log: opts.Logger, services: &services{bus: opts.Events, log: opts.Logger}}
	for _, s := range specs {
		p, err := start(ctx, s, opts, h.services)
		if err != nil {
			h.Stop()
			where := s.ConfigPath
			if where == "" {
				where = "plugins"
			}
			return nil, fmt.Errorf("%s: plugin %q: %w", where, s.Name, err)
		}
		h.plugins = append(h.plugins, p)
		opts.Logger.Info("plugin started", "plugin", s.Name, "version", p.describe.Version,
			"capabilities", len(p.describe.Capabilities), "pid", p.PID())
	}
	return h, nil
}

func start(ctx context.Context, s Spec, opts Options, svc *services) (_ *Plugin, err error) {
	path, err := filepath.Abs(s.Path)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", s.Path, err)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("binary %s does not exist (build it with `make build`, or fix the path)", path)
	case err != nil:
		return nil, fmt.Errorf("binary %s: %w", path, err)
	case fi.IsDir():
		return nil, fmt.Errorf("binary %s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return nil, fmt.Errorf("binary %s is not executable", path)
	}
	var secure *plugin.SecureConfig
	if s.SHA256 != "" {
		sum, err := hex.DecodeString(s.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("sha256 %q is not a hex SHA-256 digest", s.SHA256)
		}
		secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	dataDir := filepath.Join(opts.DataDir, "plugins", s.Name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	dataDir, err = filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}

	cmd := exec.Command(path)
	cmd.Dir = dataDir
	setParentDeathSignal(cmd)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: plugin.HandshakeConfig{
			ProtocolVersion:  capgatev1.ProtocolVersion,
			MagicCookieKey:   capgatev1.MagicCookieKey,
			MagicCookieValue: capgatev1.MagicCookieValue,
		},
		VersionedPlugins: map[int]plugin.PluginSet{
			capgatev1.ProtocolVersion: {capgatev1.PluginName: &grpcPlugin{}},
		},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		SecureConfig:     secure,
		StartTimeout:     opts.StartTimeout,
		GRPCDialOptions:  grpcDialOptions,
		Logger:           newHCLog(opts.Logger.With("plugin", s.Name)),
	})
	p := &Plugin{spec: s, client: client, cmd: cmd, live: newLiveness()}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()

	var rpcClient plugin.ClientProtocol
	onSpawnThread(func() { rpcClient, err = client.Client() })
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", path, explainStart(err))
	}
	p.live.pid = p.PID()
	if v := client.NegotiatedVersion(); v != capgatev1.ProtocolVersion {
		return nil, fmt.Errorf("speaks plugin protocol %d, this host speaks %d", v, capgatev1.ProtocolVersion)
	}
	raw, err := rpcClient.Dispense(capgatev1.PluginName)
	if err != nil {
		return nil, fmt.Errorf("dispense: %w", err)
	}
	wc := raw.(*wireClient)
	p.rpc = wc.rpc

	// The back channel for host services, served for the plugin's lifetime.
	hostID := wc.broker.NextId()
	hostSrv := make(chan *grpc.Server, 1)
	go wc.broker.AcceptAndServe(hostID, func(o []grpc.ServerOption) *grpc.Server {
		srv := grpc.NewServer(o...)
		capgatev1.RegisterHostServiceServer(srv, hostService{plugin: s.Name, self: p, svc: svc})
		hostSrv <- srv
		return srv
	})
	p.stopHost = func() {
		select {
		case srv := <-hostSrv:
			srv.Stop()
		default:
		}
	}

	cctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	cfg := s.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	if _, err := p.rpc.Configure(cctx, &capgatev1.ConfigureRequest{
		ConfigJson: cfg, DataDir: dataDir, HostBrokerId: hostID, HostVersion: opts.HostVersion,
		MaxResults: uint32(max(opts.MaxResults, 0)), LlmConnectionSlug: opts.LLMConnectionSlug,
	}); err != nil {
		return nil, fmt.Errorf("configure: %s", statusMessage(err))
	}
	d, err := p.rpc.Describe(cctx, &capgatev1.DescribeRequest{})
	if err != nil {
		return nil, fmt.Errorf("describe: %s", statusMessage(err))
	}
	p.describe = d
	// Lives until the plugin is stopped, so not bound to the start context.
	if p.calls, err = openCalls(context.WithoutCancel(ctx), p.rpc); err != nil {
		return nil, fmt.Errorf("open call stream: %s", statusMessage(err))
	}
	p.watching = true
	go p.watch(opts.Logger)
	return p, nil
}

// Register adds every plugin's capabilities to reg. An invalid declaration
// names the plugin and the capability.
func (h *Host) Register(reg *registry.Registry) error {
	for _, p := range h.plugins {
		for _, c := range p.describe.Capabilities {
			rc, err := toCapability(c, p.spec.Name)
			if err == nil {
				err = reg.Add(rc)
			}
			if err != nil {
				where := p.spec.ConfigPath
				if where == "" {
					where = "plugins"
				}
				return fmt.Errorf("%s: plugin %q declares an invalid capability: %w", where, p.spec.Name, err)
			}
		}
	}
	return nil
}

// RegisterEntities adds every plugin's catalogue entity types to c. A
// refused type (blocked, malformed, or provided twice) fails with the
// plugin's config path, the plugin and the type named.
func (h *Host) RegisterEntities(c *catalogue.Catalogue) error {
	for _, p := range h.plugins {
		for _, e := range p.describe.Entities {
			if err := c.Add(p.spec.Name, e.Name); err != nil {
				where := p.spec.ConfigPath
				if where == "" {
					where = "plugins"
				}
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	return nil
}

func toCapability(c *capgatev1.Capability, pluginName string) (registry.Capability, error) {
	var kind registry.Kind
	switch c.Kind {
	case capgatev1.Kind_KIND_READ:
		kind = registry.Read
	case capgatev1.Kind_KIND_ACTION:
		kind = registry.Action
	default:
		return registry.Capability{}, fmt.Errorf("capability %q: kind %v is neither read nor action", c.Name, c.Kind)
	}
	return registry.Capability{
		Name:         c.Name,
		Description:  c.Description,
		Kind:         kind,
		InputSchema:  c.InputSchema,
		OutputSchema: c.OutputSchema,
		Pack:         c.Pack,
		Permission:   c.Permission,
		OwnerGuarded: c.OwnerGuarded,
		Destructive:  c.Destructive,
		Plugin:       pluginName,
	}, nil
}

// Plugins returns the running plugins in start order.
func (h *Host) Plugins() []*Plugin { return h.plugins }

// Stop stops every plugin: go-plugin asks each to shut down gracefully and
// kills it after a grace period. It is safe to call more than once.
func (h *Host) Stop() {
	h.once.Do(func() {
		var wg sync.WaitGroup
		for _, p := range h.plugins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.stop()
				h.log.Info("plugin stopped", "plugin", p.spec.Name)
			}()
		}
		wg.Wait()
	})
}

func (p *Plugin) stop() {
	// First, so the watcher does not take the exit that follows for a death.
	p.live.halt()
	if p.calls != nil {
		p.calls.close()
	}
	if p.stopHost != nil {
		p.stopHost()
	}
	p.client.Kill()
	if p.watching {
		<-p.live.done
	}
}
