package pluginhost

import (
	"context"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// registerResources adds every plugin's resources and resource templates
// to reg, and reports every problem at once, each naming the plugin's
// config path, the plugin and the declaration.
func (h *Host) registerResources(reg *registry.Registry) error {
	var errs []error
	for _, p := range h.plugins {
		errs = append(errs, registerResources(reg, p.spec, p.describe)...)
	}
	return errors.Join(errs...)
}

func registerResources(reg *registry.Registry, s Spec, d *capgatev1.DescribeResponse) []error {
	var errs []error
	fail := func(err error) {
		errs = append(errs, fmt.Errorf("%s: plugin %q declares an invalid %w", s.where(), s.Name, err))
	}
	for _, r := range d.GetResources() {
		if err := reg.AddResource(pluginwire.Resource(r, s.Name)); err != nil {
			fail(err)
		}
	}
	for _, t := range d.GetResourceTemplates() {
		if err := reg.AddResourceTemplate(pluginwire.ResourceTemplate(t, s.Name)); err != nil {
			fail(err)
		}
	}
	return errs
}

// ReadResource implements dispatch.ResourceReader: it reads a resource the
// gate admitted the caller to, in the plugin that declared it.
func (p *Plugin) ReadResource(ctx context.Context, r dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
	inst, err := p.acquire()
	if err != nil {
		return nil, err
	}
	defer p.active.Add(-1)
	out, size, err := pluginwire.ReadResource(ctx, inst.rpc, r)
	var te *dispatch.ToolError
	switch {
	case errors.As(err, &te):
		return nil, err
	case errors.Is(err, pluginwire.ErrMalformed):
		return nil, fmt.Errorf("plugin %q: %w", p.spec.Name, err)
	case err != nil:
		return nil, p.rpcError(ctx, inst, "read resource", r.URI, err)
	}
	if size > p.opts.MaxResultBytes {
		p.log.Warn("resource over max_result_bytes refused", "uri", r.URI, "bytes", size, "limit", p.opts.MaxResultBytes)
		return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf(
			"the resource %s is %d bytes, more than this server's limit of %d bytes", r.URI, size, p.opts.MaxResultBytes)}
	}
	return out, nil
}

var _ dispatch.ResourceReader = (*Plugin)(nil)
