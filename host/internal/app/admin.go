package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/eventspack"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/switches"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// inventory describes the host to the admin API from what it keeps in
// memory: the registry, the configuration and policy governance holds,
// and the plugins' supervisors. It calls no plugin.
type inventory struct {
	gov     *governance
	plugins *pluginhost.Host
	// specs are the plugins as configured at start, by name: plugins
	// apply only at start, so a reload does not change them.
	specs map[string]config.Plugin
}

var _ server.Inventory = (*inventory)(nil)

func newInventory(gov *governance, plugins *pluginhost.Host, cfg *config.Config) *inventory {
	specs := make(map[string]config.Plugin, len(cfg.Plugins))
	for _, p := range cfg.Plugins {
		specs[p.Name] = p
	}
	return &inventory{gov: gov, plugins: plugins, specs: specs}
}

// probeUser stands for "some user" in the principals mayCall asks about:
// only whether a principal is bound matters to the steps it asks.
const probeUser = "user"

// mayCall lists the roles, of roles, that may call c: a principal of the
// role, bound to a user and holding the least scope c's kind allows (read
// for a read, action for an action; admin passes the same steps), passes
// every step gate.Check asks. Admin scope adds only the ownership waiver,
// which depends on the arguments.
func mayCall(gate *dispatch.Dispatcher, roles []string, c *registry.Capability) []string {
	scope := dispatch.ScopeRead
	if c.Kind == registry.Action {
		scope = dispatch.ScopeAction
	}
	out := []string{}
	for _, role := range roles {
		if gate.Check(dispatch.Principal{Role: role, Scope: scope, UserID: probeUser}, c) == nil {
			out = append(out, role)
		}
	}
	return out
}

// Capabilities reports every capability under one policy: governance's
// lock is the one every policy change takes, so the roles, packs and
// verdicts all come from the same moment.
func (inv *inventory) Capabilities() server.CapabilityList {
	g := inv.gov
	g.mu.Lock()
	defer g.mu.Unlock()
	all := g.gate.Registry().All()
	roles := slices.Sorted(maps.Keys(g.cfg.Roles))
	packs := map[string]bool{}
	for name := range g.cfg.Packs {
		packs[name] = true
	}
	out := server.CapabilityList{Capabilities: make([]server.CapabilityInfo, 0, len(all)), Roles: roles}
	for _, e := range all {
		packs[e.Pack] = true
		out.Capabilities = append(out.Capabilities, server.CapabilityInfo{
			Name: e.Name, Pack: e.Pack, PackEnabled: g.cfg.Packs[e.Pack], Kind: e.Kind.String(),
			Risk: string(g.gate.Risk(&e.Capability)), Permission: e.Permission, Plugin: e.Plugin,
			OwnerGuarded: e.OwnerGuarded, Roles: mayCall(g.gate, roles, &e.Capability),
		})
	}
	out.Packs = slices.Sorted(maps.Keys(packs))
	return out
}

// Packs reports every pack configured or registered, with its number of
// capabilities.
func (inv *inventory) Packs() []server.PackInfo {
	g := inv.gov
	g.mu.Lock()
	defer g.mu.Unlock()
	count := map[string]int{}
	for name := range g.cfg.Packs {
		count[name] = 0
	}
	for _, e := range g.gate.Registry().All() {
		count[e.Pack]++
	}
	out := make([]server.PackInfo, 0, len(count))
	for _, name := range slices.Sorted(maps.Keys(count)) {
		out = append(out, server.PackInfo{Name: name, Enabled: g.cfg.Packs[name], Capabilities: count[name]})
	}
	return out
}

// Plugins reports each plugin's supervisor state and what it said of
// itself at start.
func (inv *inventory) Plugins() []server.PluginInfo {
	ps := inv.plugins.Plugins()
	out := make([]server.PluginInfo, 0, len(ps))
	for _, p := range ps {
		h, spec, d := p.Health(), inv.specs[p.Name()], p.Description()
		maxInFlight := spec.MaxInFlight
		if maxInFlight <= 0 {
			maxInFlight = pluginhost.DefaultMaxInFlight
		}
		out = append(out, server.PluginInfo{
			Name: p.Name(), State: string(h.State), Since: h.Since, PID: p.PID(), Restarts: h.Restarts,
			Version: d.GetVersion(), SHA256: spec.SHA256, InFlight: p.InFlight(), MaxInFlight: maxInFlight,
			Capabilities: len(d.GetCapabilities()), DiedAt: h.DiedAt, DiedReason: h.Reason, Detail: h.Detail,
		})
	}
	return out
}

// Tokens reports the tokens as configured now, without their secrets,
// which the host does not even keep.
func (inv *inventory) Tokens() []server.TokenInfo {
	g := inv.gov
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]server.TokenInfo, 0, len(g.cfg.Tokens))
	for _, t := range g.cfg.Tokens {
		out = append(out, server.TokenInfo{Label: t.Label, Role: t.Role, Scope: string(t.Scope), UserID: t.UserID})
	}
	return out
}

// Inspection is the gate a host on a configuration would build, over what
// its plugins declare, built without serving. Its providers run nothing:
// it answers only what the gate decides before the arguments matter
// (dispatch.Dispatcher.Check), for `capgate capabilities`.
type Inspection struct {
	Gate *dispatch.Dispatcher
	// Switch is the shared kill switch, as read from the host's database.
	Switch switches.State
	// Warnings say what the answers could not take into account.
	Warnings []string
}

// errInspectOnly is what an inspection's providers answer: nothing runs.
var errInspectOnly = errors.New("an inspection runs no call")

type inspectOnly struct{}

func (inspectOnly) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return nil, errInspectOnly
}

// switchReadTimeout bounds reading the shared kill switch.
const switchReadTimeout = 10 * time.Second

// Inspect starts each plugin cfg names as Validate does (in a throwaway
// data directory, only to describe itself and check its config block),
// registers what they declare beside the host's own capabilities, and
// builds the gate under cfg's policy and the shared kill switch. Anything
// serve would refuse is an error, every problem joined: an answer about a
// host that cannot start would mislead.
func Inspect(ctx context.Context, cfg *config.Config, opts Options) (*Inspection, error) {
	if err := cfg.CheckFiles(); err != nil {
		return nil, err
	}
	var errs []error
	specs := make([]pluginhost.Spec, 0, len(cfg.Plugins))
	for i, p := range cfg.Plugins {
		if p.Name == eventspack.ProviderName || p.Name == approvalspack.ProviderName {
			errs = append(errs, fmt.Errorf("plugins[%d].name: %q is reserved for the host's own capabilities; name the plugin differently", i, p.Name))
			continue
		}
		raw, err := p.ConfigJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("plugins[%d].config: %w", i, err))
			continue
		}
		specs = append(specs, pluginhost.Spec{
			Name: p.Name, Path: p.Path, SHA256: p.SHA256,
			Config: json.RawMessage(raw), ConfigPath: fmt.Sprintf("plugins[%d]", i),
			Env: p.Env, MaxInFlight: p.MaxInFlight, Restart: p.Restart, RunAs: p.RunAs,
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	tmp, err := os.MkdirTemp("", "capgate-inspect-*")
	if err != nil {
		return nil, fmt.Errorf("inspect: a throwaway data directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	checked := pluginhost.Check(ctx, specs, pluginhost.Options{
		DataDir: tmp, HostVersion: opts.Version, Logger: opts.Logger, StartTimeout: opts.PluginStartTimeout,
		MaxResults: cfg.MaxResults, MaxResultBytes: cfg.MaxResultBytes,
	})
	reg := registry.New(slices.Sorted(maps.Keys(cfg.Packs)))
	providers := map[string]dispatch.Provider{eventspack.ProviderName: inspectOnly{}, approvalspack.ProviderName: inspectOnly{}}
	var ins Inspection
	for _, c := range checked {
		if c.Err != nil {
			errs = append(errs, c.Err)
		}
		if c.Unchecked {
			ins.Warnings = append(ins.Warnings, fmt.Sprintf("%s.config: plugin %q cannot check its config block without configuring itself, so it is not checked here; serve checks it", c.Spec.ConfigPath, c.Spec.Name))
		}
		if c.Description == nil {
			continue
		}
		if err := c.Register(reg); err != nil {
			errs = append(errs, err)
		}
		providers[c.Spec.Name] = inspectOnly{}
	}
	hostCaps, err := approvalspack.Capabilities()
	if err != nil {
		errs = append(errs, fmt.Errorf("approvals pack: %w", err))
	}
	for _, c := range append(hostCaps, eventsPoll()) {
		if err := reg.Add(c); err != nil {
			errs = append(errs, fmt.Errorf("%s pack: %w", c.Pack, err))
		}
	}
	for _, c := range checked {
		if err := c.RegisterPrompts(reg); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = split(checkDisabled(cfg, reg))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	st, warning := readSwitch(ctx, cfg)
	if warning != "" {
		ins.Warnings = append(ins.Warnings, warning)
	}
	ins.Switch = st
	gov := &governance{cfg: cfg, off: st}
	if ins.Gate, err = dispatch.New(reg, gov.policy(), providers); err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	return &ins, nil
}

// readSwitch reads the shared kill switch from the host's database. A
// SQLite file that does not exist yet means no host ran on data_dir, so
// the switch was never thrown; it is not created. A database that cannot
// be read is a warning, not an error: the rest of the answer still holds.
func readSwitch(ctx context.Context, cfg *config.Config) (switches.State, string) {
	if cfg.Database.DSN == "" {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, switches.FileName)); errors.Is(err, fs.ErrNotExist) {
			return switches.State{}, ""
		}
	}
	ctx, cancel := context.WithTimeout(ctx, switchReadTimeout)
	defer cancel()
	unread := func(err error) (switches.State, string) {
		return switches.State{}, fmt.Sprintf("database.dsn: the shared kill switch cannot be read (%v); the answers take it as letting actions through", err)
	}
	sw, err := switches.Open(ctx, cfg.Database.DSN, cfg.DataDir, nil)
	if err != nil {
		return unread(err)
	}
	defer sw.Close()
	st, err := sw.Get(ctx)
	if err != nil {
		return unread(err)
	}
	return st, ""
}
