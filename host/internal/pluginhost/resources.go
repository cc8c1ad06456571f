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
		if err := reg.AddResource(registry.Resource{
			URI: r.Uri, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MimeType,
			Size: r.GetSize(), HasSize: r.Size != nil, Pack: r.Pack, Permission: r.Permission, Plugin: s.Name,
		}); err != nil {
			fail(err)
		}
	}
	for _, t := range d.GetResourceTemplates() {
		if err := reg.AddResourceTemplate(registry.ResourceTemplate{
			URITemplate: t.UriTemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MimeType,
			Pack: t.Pack, Permission: t.Permission, Plugin: s.Name,
		}); err != nil {
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
	resp, err := inst.rpc.ReadResource(ctx, &capgatev1.ReadResourceRequest{
		Principal: &capgatev1.Principal{Role: r.Principal.Role, Scope: string(r.Principal.Scope), UserId: r.Principal.UserID},
		Uri:       r.URI, UriTemplate: r.Template, Variables: r.Variables,
	})
	if err != nil {
		return nil, p.rpcError(ctx, inst, "read resource", r.URI, err)
	}
	if e := resp.GetError(); e != nil {
		return nil, pluginwire.ToolError(e)
	}
	out := make([]dispatch.ResourceContents, 0, len(resp.Contents))
	size := 0
	for i, c := range resp.Contents {
		if err := pluginwire.CheckResourceContents(c); err != nil {
			return nil, fmt.Errorf("plugin %q: read resource %s: contents %d: %w", p.spec.Name, r.URI, i, err)
		}
		size += len(c.GetText()) + len(c.GetBlob())
		out = append(out, pluginwire.ResourceContents(c))
	}
	if size > p.opts.MaxResultBytes {
		p.log.Warn("resource over max_result_bytes refused", "uri", r.URI, "bytes", size, "limit", p.opts.MaxResultBytes)
		return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf(
			"the resource %s is %d bytes, more than this server's limit of %d bytes", r.URI, size, p.opts.MaxResultBytes)}
	}
	return out, nil
}

var _ dispatch.ResourceReader = (*Plugin)(nil)
