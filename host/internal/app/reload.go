package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/capgate/capgate/host/internal/config"
)

// ConfigPollInterval is how often the host looks at its configuration
// file for a change. Polling the content, not watching for file events,
// also sees a file replaced by a rename or a symbolic-link swap (how
// editors save and how Kubernetes updates a mounted ConfigMap), which
// event watchers miss.
const ConfigPollInterval = 2 * time.Second

// Reload reads the configuration file again and applies its tokens,
// roles, packs, switches and limits at once: a call sees the old policy
// or the new, never a mix, and calls in flight finish under the policy
// they started with. A file with any problem changes nothing, and every
// problem is logged with its key path. It returns what it applied, or
// why it applied nothing.
func (a *App) Reload() (applied []string, err error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.file == "" {
		return nil, errors.New("config reload: the configuration was not read from a file")
	}
	// What this reload read, so the watcher does not read it again.
	a.readSum = fileSum(a.file)
	next, err := config.Load(a.file)
	if err == nil {
		err = checkDisabled(next, a.gate.Registry())
	}
	if err != nil {
		a.aud.event("capgate.config_reload", "config file", err, "reload refused")
		a.log.Error("config reload refused; the running configuration stays", "file", a.file)
		// A *config.Error and a joined error both list their problems.
		for _, p := range unjoin(err) {
			a.log.Error("config reload: problem", "problem", p.Error())
		}
		return nil, err
	}
	if restart := restartOnly(a.cfg, next); len(restart) > 0 {
		a.log.Warn("config reload: these settings changed in the file but apply only at start; restart capgate to apply them",
			"settings", restart)
	}
	applied = changedReloadable(a.cfg, next)
	// The running values of start-up-only settings stay; only the
	// reloadable ones come from the new file.
	merged := *a.cfg
	merged.Tokens, merged.Roles, merged.Packs = next.Tokens, next.Roles, next.Packs
	merged.DefaultRole, merged.DefaultScope = next.DefaultRole, next.DefaultScope
	merged.ActionsEnabled, merged.DisabledCapabilities, merged.Limits = next.ActionsEnabled, next.DisabledCapabilities, next.Limits
	merged.Risk, merged.OwnershipAsMissing = next.Risk, next.OwnershipAsMissing
	if err := a.gov.reconfigure(&merged); err != nil {
		a.log.Error("config reload refused; the running configuration stays", "err", err)
		return nil, err
	}
	a.auth.Replace(merged.Tokens)
	a.cfg = &merged
	a.log.Info("config reloaded", "file", a.file, "changed", applied)
	a.aud.event("capgate.config_reload", "config file", nil, "changed: "+strings.Join(append([]string{}, applied...), ", "))
	return applied, nil
}

// watchConfig reloads when the file's content differs from what the last
// reload (or the start) read, until ctx ends: a file SIGHUP has already
// reloaded is not reloaded again. A file that cannot be read is skipped
// until it can.
func (a *App) watchConfig(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sum := fileSum(a.file)
		a.reloadMu.Lock()
		seen := sum == nil || bytes.Equal(sum, a.readSum)
		a.reloadMu.Unlock()
		if seen {
			continue
		}
		a.log.Info("config file changed; reloading", "file", a.file)
		_, _ = a.Reload() // Reload logs its outcome
	}
}

func fileSum(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := sha256.Sum256(b)
	return s[:]
}

// setting is one top-level part of the configuration as a reload sees it.
type setting struct {
	name       string
	reloadable bool
	of         func(*config.Config) any
}

// settings are every part of the configuration a reload compares.
var settings = []setting{
	{"tokens", true, func(c *config.Config) any { return c.Tokens }},
	{"roles", true, func(c *config.Config) any { return c.Roles }},
	{"packs", true, func(c *config.Config) any { return c.Packs }},
	{"default_role", true, func(c *config.Config) any { return c.DefaultRole }},
	{"default_scope", true, func(c *config.Config) any { return c.DefaultScope }},
	{"actions_enabled", true, func(c *config.Config) any { return c.ActionsEnabled }},
	{"disabled_capabilities", true, func(c *config.Config) any { return c.DisabledCapabilities }},
	{"limits", true, func(c *config.Config) any { return c.Limits }},
	{"risk", true, func(c *config.Config) any { return []any{c.Risk, c.InBand} }},
	{"refusals.ownership", true, func(c *config.Config) any { return c.OwnershipAsMissing }},
	{"approvals", false, func(c *config.Config) any { return c.Approvals }},
	{"tasks", false, func(c *config.Config) any { return c.Tasks }},
	{"metrics", false, func(c *config.Config) any { return c.Metrics }},
	{"tracing", false, func(c *config.Config) any { return c.Tracing }},
	// The OAuth resource server holds its issuer's keys and publishes its
	// metadata from these settings; the roles it maps tokens to are
	// checked as they stand at each request, so a reload of roles still
	// reaches OAuth principals.
	{"auth.oauth", false, func(c *config.Config) any { return c.Auth }},
	{"enabled", false, func(c *config.Config) any { return c.Enabled }},
	{"listen", false, func(c *config.Config) any { return c.Listen }},
	{"data_dir", false, func(c *config.Config) any { return c.DataDir }},
	{"max_results", false, func(c *config.Config) any { return c.MaxResults }},
	{"events_buffer_size", false, func(c *config.Config) any { return c.EventsBufferSize }},
	{"max_result_bytes", false, func(c *config.Config) any { return c.MaxResultBytes }},
	{"http", false, func(c *config.Config) any { return c.HTTP }},
	{"log", false, func(c *config.Config) any { return c.Log }},
	{"search", false, func(c *config.Config) any { return c.Search }},
	{"events", false, func(c *config.Config) any { return c.Events }},
	{"database", false, func(c *config.Config) any { return c.Database }},
	{"idempotency", false, func(c *config.Config) any { return c.Idempotency }},
	{"audit", false, func(c *config.Config) any { return c.Audit }},
	{"limits.redis_url, limits.on_redis_error", false, func(c *config.Config) any { return c.LimitsCounter }},
	{"plugins", false, func(c *config.Config) any { return c.Plugins }},
}

// restartOnly names the start-up-only settings that differ between the
// running configuration and the file.
func restartOnly(run, file *config.Config) []string { return changed(run, file, false) }

// changedReloadable names the reloadable settings the file changes.
func changedReloadable(run, file *config.Config) []string { return changed(run, file, true) }

func changed(run, file *config.Config, reloadable bool) []string {
	var out []string
	for _, s := range settings {
		if s.reloadable == reloadable && !reflect.DeepEqual(s.of(run), s.of(file)) {
			out = append(out, s.name)
		}
	}
	return out
}

// unjoin lists the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// reconfigure makes cfg the source of the file's part of the policy.
func (g *governance) reconfigure(cfg *config.Config) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.cfg
	g.cfg = cfg
	if err := g.gate.SetPolicy(g.policy()); err != nil {
		g.cfg = old
		return err
	}
	g.gate.SetInBand(cfg.InBand)
	return nil
}
