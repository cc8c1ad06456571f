package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/eventspack"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/registry"
)

// Validation is what Validate found: every problem serve would refuse
// (or that surely is a mistake), and what it could not check.
type Validation struct {
	// Problems each start with the config key path they are about.
	Problems []error
	// Warnings are what was left unchecked, and why.
	Warnings []string
}

// Validate checks cfg for what `capgate serve` would refuse, without
// serving and without side effects: no port is bound, the host's database
// and bus are not opened, and cfg.DataDir is not touched. Each plugin runs
// in a throwaway data directory only to describe itself and check its
// config block without opening its stores (pluginhost.Check). Then the
// plugins' declarations are registered as serve registers them, and
// roles, packs and disabled_capabilities are checked against what the
// plugins declare. Every problem is collected; none stops the others from
// being checked.
func Validate(ctx context.Context, cfg *config.Config, opts Options) (Validation, error) {
	var v Validation
	// A binary that is missing or has another digest cannot be started:
	// its problem is reported once, and the plugin is left out.
	skip := map[int]bool{}
	if err := cfg.CheckFiles(); err != nil {
		var ce *config.Error
		if !errors.As(err, &ce) {
			return v, err
		}
		for _, p := range ce.Problems {
			v.Problems = append(v.Problems, p)
			for i := range cfg.Plugins {
				if strings.HasPrefix(p.Path, fmt.Sprintf("plugins[%d].", i)) {
					skip[i] = true
				}
			}
		}
	}
	if o := cfg.Auth.OAuth; o != nil {
		// The issuer may be out of this machine's reach and within the
		// host's: a warning, not a problem.
		if _, err := auth.CheckKeys(ctx, *o, nil); err != nil {
			v.Warnings = append(v.Warnings, fmt.Sprintf("auth.oauth: the issuer's keys could not be fetched from here (%v); serve starts all the same and answers access tokens 503 until it can fetch them", err))
		}
	}
	var specs []pluginhost.Spec
	for i, p := range cfg.Plugins {
		if p.Name == eventspack.ProviderName {
			v.Problems = append(v.Problems, fmt.Errorf("plugins[%d].name: %q is reserved for the host's own capabilities; name the plugin differently", i, p.Name))
			skip[i] = true
		}
		raw, err := p.ConfigJSON()
		if err != nil {
			v.Problems = append(v.Problems, fmt.Errorf("plugins[%d].config: %w", i, err))
			skip[i] = true
		}
		if skip[i] {
			continue
		}
		specs = append(specs, pluginhost.Spec{
			Name: p.Name, Path: p.Path, SHA256: p.SHA256,
			Config: json.RawMessage(raw), ConfigPath: fmt.Sprintf("plugins[%d]", i),
			Env: p.Env, MaxInFlight: p.MaxInFlight, Restart: p.Restart, RunAs: p.RunAs,
		})
	}
	tmp, err := os.MkdirTemp("", "capgate-validate-*")
	if err != nil {
		return v, fmt.Errorf("validate: a throwaway data directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	checked := pluginhost.Check(ctx, specs, pluginhost.Options{
		DataDir: tmp, HostVersion: opts.Version, Logger: opts.Logger, StartTimeout: opts.PluginStartTimeout,
		MaxResults: cfg.MaxResults, MaxResultBytes: cfg.MaxResultBytes,
	})

	packs := make([]string, 0, len(cfg.Packs))
	for p := range cfg.Packs {
		packs = append(packs, p)
	}
	slices.Sort(packs)
	reg := registry.New(packs)
	cat := catalogue.New(cfg.Search.BlockedEntities)
	var undescribed []string
	for i, c := range checked {
		switch {
		case c.Description == nil:
			undescribed = append(undescribed, c.Spec.ConfigPath)
		case c.Unchecked:
			v.Warnings = append(v.Warnings, fmt.Sprintf("%s.config: plugin %q cannot check its config block without configuring itself (built before check-only configuration, or without sdk.Configure), so it is not checked here; serve checks it", c.Spec.ConfigPath, c.Spec.Name))
		}
		if c.Err != nil {
			v.Problems = append(v.Problems, c.Err)
		}
		if err := checked[i].Register(reg); err != nil {
			v.Problems = append(v.Problems, err)
		}
		if err := checked[i].RegisterEntities(cat); err != nil {
			v.Problems = append(v.Problems, err)
		}
	}
	hostCaps, err := approvalspack.Capabilities()
	if err != nil {
		v.Problems = append(v.Problems, fmt.Errorf("approvals pack: %w", err))
	}
	for _, c := range hostCaps {
		if err := reg.Add(c); err != nil {
			v.Problems = append(v.Problems, fmt.Errorf("approvals pack: %w", err))
		}
	}
	if err := reg.Add(eventsPoll()); err != nil {
		v.Problems = append(v.Problems, fmt.Errorf("events pack: %w", err))
	}
	for i := range checked {
		if err := checked[i].RegisterPrompts(reg); err != nil {
			v.Problems = append(v.Problems, err)
		}
	}
	for i := range cfg.Plugins {
		if skip[i] {
			undescribed = append(undescribed, fmt.Sprintf("plugins[%d]", i))
		}
	}
	if len(undescribed) > 0 {
		slices.Sort(undescribed)
		v.Warnings = append(v.Warnings, fmt.Sprintf("roles, packs and disabled_capabilities are not checked against the plugins' capabilities, as %s could not describe what it provides", strings.Join(undescribed, ", ")))
		return v, nil
	}
	v.Problems = append(v.Problems, split(checkDisabled(cfg, reg))...)
	v.Problems = append(v.Problems, checkRoles(cfg.Roles, reg)...)
	v.Problems = append(v.Problems, checkPacks(cfg.Packs, reg)...)
	return v, nil
}

// eventsPoll stands for the host's own events.poll, which serve registers
// beside the plugins' capabilities: its pack and permission are declared.
func eventsPoll() registry.Capability {
	return registry.Capability{
		Name: eventspack.Capability, Kind: registry.Read, Pack: eventspack.Pack, Permission: eventspack.Permission,
		InputSchema: json.RawMessage(`{"type":"object"}`), Plugin: eventspack.ProviderName,
	}
}

// split lists the errors errors.Join joined.
func split(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// checkRoles names every permission a role holds that no capability
// declares: a misspelt permission grants nothing, silently. A wildcard
// "p.*" must match at least one declared permission; "*" always holds.
func checkRoles(roles map[string][]string, reg *registry.Registry) []error {
	declared := map[string]bool{}
	prefixes := map[string]bool{}
	for _, e := range reg.All() {
		if e.Permission == "" {
			continue
		}
		declared[e.Permission] = true
		for i := range len(e.Permission) {
			if e.Permission[i] == '.' {
				prefixes[e.Permission[:i+1]+"*"] = true
			}
		}
	}
	var errs []error
	for _, role := range sortedKeys(roles) {
		for i, perm := range roles[role] {
			path := fmt.Sprintf("roles.%s[%d]", role, i)
			switch {
			case perm == "*" || declared[perm] || prefixes[perm]:
			case strings.HasSuffix(perm, ".*"):
				errs = append(errs, fmt.Errorf("%s: %q matches no permission a capability declares%s", path, perm, didYouMean(perm, prefixes)))
			default:
				errs = append(errs, fmt.Errorf("%s: permission %q is declared by no capability%s", path, perm, didYouMean(perm, declared)))
			}
		}
	}
	return errs
}

// checkPacks names every enabled pack no plugin provides: its
// capabilities, meant to be on, are nowhere.
func checkPacks(packs map[string]bool, reg *registry.Registry) []error {
	provided := map[string]bool{}
	for _, e := range reg.All() {
		provided[e.Pack] = true
	}
	var errs []error
	for _, pack := range sortedKeys(packs) {
		if packs[pack] && !provided[pack] {
			errs = append(errs, fmt.Errorf("packs.%s: pack %q is enabled but no plugin provides it%s", pack, pack, didYouMean(pack, provided)))
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// didYouMean suggests the known name closest to name, when one is close
// enough to be a slip of the keyboard: " (did you mean "x"?)", or "".
func didYouMean(name string, known map[string]bool) string {
	best, bestD := "", len(name)/3+1
	for _, k := range sortedKeys(known) {
		if d := editDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
