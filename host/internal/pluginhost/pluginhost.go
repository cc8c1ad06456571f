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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// DefaultMaxInFlight is a plugin's bound on calls in flight when its Spec
// sets none: far above what a healthy plugin holds under load (a call
// takes milliseconds), low enough that a stuck plugin cannot pile up
// unbounded work in the host.
const DefaultMaxInFlight = 256

// DefaultMaxResultBytes is the largest result the host takes from one call
// when Options sets none.
const DefaultMaxResultBytes = 4 << 20

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
	// Env is the plugin's whole environment, as NAME=value entries, besides
	// the handshake variables go-plugin sets: the host's own environment
	// (its secrets, other plugins' secrets) is never passed on.
	Env []string
	// MaxInFlight bounds the calls in flight to the plugin; a call beyond
	// it fails at once as unavailable. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Restart is how the plugin is brought back when it dies; the zero
	// value is DefaultRestartPolicy.
	Restart RestartPolicy
	// RunAs, when set, is the user the plugin runs as (Linux, a host
	// running as root): another user than the host's cannot read the
	// host's or other plugins' files and processes.
	RunAs *RunAs
}

func (s Spec) where() string {
	if s.ConfigPath == "" {
		return "plugins"
	}
	return s.ConfigPath
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
	// MaxResultBytes is the largest result one call may return; a larger
	// one fails the call. 0 means DefaultMaxResultBytes.
	MaxResultBytes int
	// Tracing traces every call to a plugin, in the plugin too; nil
	// traces none.
	Tracing *Tracing
}

// Plugin is one configured plugin: its name and description, which stay
// the same for the host's lifetime, and the process serving it now, which
// the supervisor replaces when it dies.
type Plugin struct {
	spec     Spec
	opts     *Options
	svc      *services
	log      *slog.Logger
	describe *capgatev1.DescribeResponse // as registered: restarts must match it

	cur      atomic.Pointer[instance] // the process serving calls
	state    atomic.Pointer[Health]   // what Health reports
	active   atomic.Int64             // calls in flight
	inflight inflight                 // callers of the calls in progress, for nested calls

	// spanWarned is when a problem with the plugin's spans was last logged
	// (unix nanoseconds).
	spanWarned atomic.Int64

	started  atomic.Bool // Host.Start has started it: a restarted process is started too
	stopping atomic.Bool
	stop     chan struct{} // closed when the host stops the plugin
	stopOnce sync.Once
	done     chan struct{} // closed when the supervisor has returned
}

// Name returns the operator's name for the plugin.
func (p *Plugin) Name() string { return p.spec.Name }

// Description returns what the plugin said about itself when it started.
func (p *Plugin) Description() *capgatev1.DescribeResponse { return p.describe }

// PID returns the process id of the plugin's current process, or 0 when
// none is running.
func (p *Plugin) PID() int {
	if inst := p.cur.Load(); inst != nil && !inst.client.Exited() {
		return inst.pid
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
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	h := &Host{log: opts.Logger, services: &services{bus: opts.Events, log: opts.Logger}}
	hideFromPlugins(opts.Logger)
	for _, s := range specs {
		if err := s.Restart.Check(); err != nil {
			h.Stop()
			return nil, fmt.Errorf("%s.restart: %w", s.where(), err)
		}
		if err := checkRunAs(s); err != nil {
			h.Stop()
			return nil, err
		}
		s.Restart = s.Restart.orDefault()
		if s.MaxInFlight <= 0 {
			s.MaxInFlight = DefaultMaxInFlight
		}
		p := &Plugin{
			spec: s, opts: &opts, svc: h.services, log: opts.Logger.With("plugin", s.Name),
			stop: make(chan struct{}), done: make(chan struct{}),
		}
		inst, d, err := p.launch(ctx)
		if err != nil {
			close(p.done)
			h.Stop()
			return nil, fmt.Errorf("%s: plugin %q: %w", s.where(), s.Name, err)
		}
		p.describe = d
		p.cur.Store(inst)
		p.state.Store(&Health{Name: s.Name, State: StateRunning, PID: inst.pid, Since: time.Now()})
		h.plugins = append(h.plugins, p)
		go p.supervise()
		opts.Logger.Info("plugin started", "plugin", s.Name, "version", d.Version,
			"capabilities", len(d.Capabilities), "pid", inst.pid)
	}
	return h, nil
}

// instance is one process of a plugin, from its start to its death.
type instance struct {
	client   *plugin.Client
	cmd      *exec.Cmd
	pid      int
	rpc      capgatev1.PluginServiceClient
	calls    *pluginwire.CallStream
	stopHost func()
}

// launch starts one process of the plugin and takes it through configure
// and describe to an open call stream.
func (p *Plugin) launch(ctx context.Context) (_ *instance, _ *capgatev1.DescribeResponse, err error) {
	inst, wc, dataDir, err := p.spawn()
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			inst.kill()
		}
	}()
	s, opts := p.spec, p.opts

	// The back channel for host services, served for the process's lifetime.
	hostID := wc.Broker.NextId()
	hostSrv := make(chan *grpc.Server, 1)
	go wc.Broker.AcceptAndServe(hostID, func(o []grpc.ServerOption) *grpc.Server {
		srv := grpc.NewServer(o...)
		capgatev1.RegisterHostServiceServer(srv, hostService{plugin: s.Name, self: p, svc: p.svc})
		hostSrv <- srv
		return srv
	})
	inst.stopHost = func() {
		select {
		case srv := <-hostSrv:
			srv.Stop()
		default:
		}
	}

	cctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if _, err := inst.rpc.Configure(cctx, p.configureRequest(dataDir, hostID)); err != nil {
		return nil, nil, fmt.Errorf("configure: %s", pluginwire.StatusMessage(err))
	}
	d, err := inst.rpc.Describe(cctx, &capgatev1.DescribeRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("describe: %s", pluginwire.StatusMessage(err))
	}
	// Lives until the process is stopped, so not bound to the start context.
	if inst.calls, err = pluginwire.OpenCalls(context.WithoutCancel(ctx), inst.rpc); err != nil {
		return nil, nil, fmt.Errorf("open call stream: %s", pluginwire.StatusMessage(err))
	}
	return inst, d, nil
}

// configureRequest is the Configure the plugin's process gets: its config
// block and data directory, and the host's settings.
func (p *Plugin) configureRequest(dataDir string, hostID uint32) *capgatev1.ConfigureRequest {
	cfg := p.spec.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage("{}")
	}
	return &capgatev1.ConfigureRequest{
		ConfigJson: cfg, DataDir: dataDir, HostBrokerId: hostID, HostVersion: p.opts.HostVersion,
		MaxResults:     uint32(max(p.opts.MaxResults, 0)),
		MaxResultBytes: uint64(p.opts.MaxResultBytes),
	}
}

// spawn checks the binary, starts one process of the plugin in its data
// directory and completes the handshake, up to a dispensed client.
func (p *Plugin) spawn() (_ *instance, _ *pluginwire.Client, dataDir string, err error) {
	s, opts := p.spec, p.opts
	path, err := filepath.Abs(s.Path)
	if err != nil {
		return nil, nil, "", fmt.Errorf("path %q: %w", s.Path, err)
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, "", fmt.Errorf("binary %s does not exist (build it with `make build`, or fix the path)", path)
	case err != nil:
		return nil, nil, "", fmt.Errorf("binary %s: %w", path, err)
	case fi.IsDir():
		return nil, nil, "", fmt.Errorf("binary %s is a directory", path)
	case fi.Mode()&0o111 == 0:
		return nil, nil, "", fmt.Errorf("binary %s is not executable", path)
	}
	var secure *plugin.SecureConfig
	if s.SHA256 != "" {
		sum, err := hex.DecodeString(s.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return nil, nil, "", fmt.Errorf("sha256 %q is not a hex SHA-256 digest", s.SHA256)
		}
		secure = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	dataDir = filepath.Join(opts.DataDir, "plugins", s.Name)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, nil, "", fmt.Errorf("create data dir: %w", err)
	}
	dataDir, err = filepath.Abs(dataDir)
	if err != nil {
		return nil, nil, "", fmt.Errorf("data dir: %w", err)
	}
	var sockets *plugin.UnixSocketConfig
	if s.RunAs != nil {
		if err := prepareDataDir(dataDir, s.RunAs); err != nil {
			return nil, nil, "", err
		}
		// The host's end of the broker (its services) is a socket the
		// plugin dials: owned by the plugin's group, writable by it.
		sockets = &plugin.UnixSocketConfig{Group: strconv.FormatUint(uint64(s.RunAs.GID), 10)}
	}

	cmd := exec.Command(path)
	cmd.Dir = dataDir
	// go-plugin appends its handshake variables; with SkipHostEnv nothing
	// of the host's environment is added to what the operator listed.
	cmd.Env = append([]string{}, s.Env...)
	setParentDeathSignal(cmd)
	setCredential(cmd, s.RunAs)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: pluginwire.Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{
			capgatev1.ProtocolVersion: pluginwire.PluginSet(nil),
		},
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		SecureConfig:     secure,
		StartTimeout:     opts.StartTimeout,
		GRPCDialOptions:  pluginwire.DialOptions(opts.MaxResultBytes),
		Logger:           newHCLog(p.log),
		UnixSocketConfig: sockets,
	})
	inst := &instance{client: client, cmd: cmd}
	defer func() {
		if err != nil {
			inst.kill()
		}
	}()

	var rpcClient plugin.ClientProtocol
	onSpawnThread(func() { rpcClient, err = client.Client() })
	if err != nil {
		if s.RunAs != nil {
			if why := unreachable(s.RunAs, path, dataDir); why != "" {
				return nil, nil, "", fmt.Errorf("start %s: %w (%s.run_as: %s)", path, explainStart(err), s.where(), why)
			}
		}
		return nil, nil, "", fmt.Errorf("start %s: %w", path, explainStart(err))
	}
	if rc := client.ReattachConfig(); rc != nil {
		inst.pid = rc.Pid
	}
	if v := client.NegotiatedVersion(); v != capgatev1.ProtocolVersion {
		return nil, nil, "", fmt.Errorf("speaks plugin protocol %d, this host speaks %d", v, capgatev1.ProtocolVersion)
	}
	raw, err := rpcClient.Dispense(capgatev1.PluginName)
	if err != nil {
		return nil, nil, "", fmt.Errorf("dispense: %w", err)
	}
	wc := raw.(*pluginwire.Client)
	inst.rpc = wc.PluginServiceClient
	return inst, wc, dataDir, nil
}

// kill ends the process: go-plugin asks it to shut down gracefully and
// kills it after a grace period. The host services stop last, once the
// process is gone: a plugin following the bus ends its subscription itself
// as it closes, instead of seeing the host hang up on it and reporting a
// failure.
func (inst *instance) kill() {
	if inst.calls != nil {
		inst.calls.Close()
	}
	if inst.client != nil {
		inst.client.Kill()
	}
	if inst.stopHost != nil {
		inst.stopHost()
	}
}

// Register adds every plugin's capabilities, resources and resource
// templates to reg. An invalid declaration names the plugin and the
// capability; every invalid resource is reported at once.
func (h *Host) Register(reg *registry.Registry) error {
	for _, p := range h.plugins {
		if err := registerCapabilities(reg, p.spec, p.describe); err != nil {
			return err
		}
	}
	return h.registerResources(reg)
}

func registerCapabilities(reg *registry.Registry, s Spec, d *capgatev1.DescribeResponse) error {
	for _, c := range d.Capabilities {
		rc, err := pluginwire.Capability(c, s.Name)
		if err == nil {
			err = reg.Add(rc)
		}
		if err != nil {
			return fmt.Errorf("%s: plugin %q declares an invalid capability: %w", s.where(), s.Name, err)
		}
	}
	return nil
}

// RegisterEntities adds every plugin's catalogue entity types to c. A
// refused type (blocked, malformed, or provided twice) fails with the
// plugin's config path, the plugin and the type named.
func (h *Host) RegisterEntities(c *catalogue.Catalogue) error {
	for _, p := range h.plugins {
		if err := registerEntities(c, p.spec, p.describe); err != nil {
			return err
		}
	}
	return nil
}

func registerEntities(c *catalogue.Catalogue, s Spec, d *capgatev1.DescribeResponse) error {
	for _, e := range d.Entities {
		if err := c.Add(s.Name, e.Name); err != nil {
			return fmt.Errorf("%s: %w", s.where(), err)
		}
	}
	return nil
}

// Plugins returns the plugins in start order.
func (h *Host) Plugins() []*Plugin { return h.plugins }

// Stop stops every plugin and its supervisor. It is safe to call more than
// once.
func (h *Host) Stop() {
	h.once.Do(func() {
		var wg sync.WaitGroup
		for _, p := range h.plugins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.halt()
				h.log.Info("plugin stopped", "plugin", p.spec.Name)
			}()
		}
		wg.Wait()
	})
}

// halt stops the supervisor, then the current process. The exit that
// follows is no death: stopping is set first.
func (p *Plugin) halt() {
	p.stopping.Store(true)
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	if inst := p.cur.Load(); inst != nil {
		inst.kill()
	}
	p.setState(func(h *Health) { h.State, h.Since = StateStopped, time.Now() })
}
