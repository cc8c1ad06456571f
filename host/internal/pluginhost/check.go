package pluginhost

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Checked is what checking one plugin's configuration found.
type Checked struct {
	// Spec is the plugin checked.
	Spec Spec
	// Description is what the plugin says it provides; nil when it could
	// not be started or did not describe itself.
	Description *capgatev1.DescribeResponse
	// Err is why the plugin could not be started or described, or why it
	// refuses its config block. Its text starts with the config path.
	Err error
	// Unchecked is set when the plugin cannot check its config block
	// without configuring itself, opening its stores (it predates
	// check-only configuration): the block was not checked.
	Unchecked bool
}

// Check runs each plugin of specs only to check it, as `capgate validate`
// does: its process starts as Start's would, with its data directory under
// opts.DataDir (which should be a throwaway directory) and no host services
// (no bus, no catalogue, no nested calls), describes itself, checks its
// config block without building anything (ConfigureRequest.check_only), and
// is stopped before Check returns. Every plugin is checked whatever the
// others do; the results are in the order of specs. opts.Events is unused.
func Check(ctx context.Context, specs []Spec, opts Options) []Checked {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	opts.Events = nil
	hideFromPlugins(opts.Logger)
	out := make([]Checked, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		out[i].Spec = s
		if err := s.Restart.Check(); err != nil {
			out[i].Err = fmt.Errorf("%s.restart: %w", s.where(), err)
			continue
		}
		if err := checkRunAs(s); err != nil {
			out[i].Err = err
			continue
		}
		if s.RunAs != nil {
			// The throwaway directory is the host's own, so far private:
			// the plugin's user must get through it to its data dir.
			if err := letThrough(opts.DataDir); err != nil {
				out[i].Err = fmt.Errorf("%s.run_as: %w", s.where(), err)
				continue
			}
		}
		p := &Plugin{spec: s, opts: &opts, log: opts.Logger.With("plugin", s.Name)}
		wg.Go(func() {
			d, unchecked, err := p.check(ctx)
			out[i].Description, out[i].Unchecked, out[i].Err = d, unchecked, err
		})
	}
	wg.Wait()
	return out
}

// check starts one process, has it describe itself and check its config
// block, and stops it. The description comes back even when the block is
// refused, so what the plugin provides can still be checked.
func (p *Plugin) check(ctx context.Context) (_ *capgatev1.DescribeResponse, unchecked bool, err error) {
	s := p.spec
	inst, _, dataDir, err := p.spawn()
	if err != nil {
		return nil, false, fmt.Errorf("%s: plugin %q: %w", s.where(), s.Name, err)
	}
	defer inst.kill()
	cctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	// Describe first: only a plugin that says it honours check_only is
	// asked to configure, as an older one would configure itself in full.
	d, err := inst.rpc.Describe(cctx, &capgatev1.DescribeRequest{})
	if err != nil {
		return nil, false, fmt.Errorf("%s: plugin %q: describe: %s", s.where(), s.Name, pluginwire.StatusMessage(err))
	}
	if !d.ChecksConfig {
		return d, true, nil
	}
	req := p.configureRequest(dataDir, 0)
	req.CheckOnly = true
	if _, err := inst.rpc.Configure(cctx, req); err != nil {
		return d, false, fmt.Errorf("%s.config: plugin %q refuses it: %s", s.where(), s.Name, pluginwire.StatusMessage(err))
	}
	return d, false, nil
}

// Register adds the capabilities the plugin described to reg, as
// Host.Register does for a running plugin; nothing when it described none.
func (c Checked) Register(reg *registry.Registry) error {
	if c.Description == nil {
		return nil
	}
	return registerCapabilities(reg, c.Spec, c.Description)
}

// RegisterEntities adds the entity types the plugin described to cat, as
// Host.RegisterEntities does for a running plugin.
func (c Checked) RegisterEntities(cat *catalogue.Catalogue) error {
	if c.Description == nil {
		return nil
	}
	return registerEntities(cat, c.Spec, c.Description)
}
