package pluginwire

import (
	"context"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Resource is a plugin's declaration of a resource in the registry's
// terms.
func Resource(r *capgatev1.Resource, plugin string) registry.Resource {
	return registry.Resource{
		URI: r.Uri, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MimeType,
		Size: r.GetSize(), HasSize: r.Size != nil, Pack: r.Pack, Permission: r.Permission, Plugin: plugin,
	}
}

// ResourceTemplate is a plugin's declaration of a resource template in
// the registry's terms.
func ResourceTemplate(t *capgatev1.ResourceTemplate, plugin string) registry.ResourceTemplate {
	return registry.ResourceTemplate{
		URITemplate: t.UriTemplate, Name: t.Name, Title: t.Title, Description: t.Description, MIMEType: t.MimeType,
		Pack: t.Pack, Permission: t.Permission, Plugin: plugin,
	}
}

// ErrMalformed wraps a plugin's answer the host cannot render: the
// plugin's bug, not the link's.
var ErrMalformed = errors.New("malformed answer")

// ReadResource reads an admitted resource in the plugin behind rpc: its
// contents, checked, with their size in bytes, or the plugin's tool error
// (NotFound for a URI that names nothing). Any other error is the link's,
// a gRPC status as the plugin answered.
func ReadResource(ctx context.Context, rpc capgatev1.PluginServiceClient, r dispatch.ResourceRequest) ([]dispatch.ResourceContents, int, error) {
	resp, err := rpc.ReadResource(ctx, &capgatev1.ReadResourceRequest{
		Principal: principal(r.Principal), Uri: r.URI, UriTemplate: r.Template, Variables: r.Variables,
	})
	if err != nil {
		return nil, 0, err
	}
	if e := resp.GetError(); e != nil {
		return nil, 0, ToolError(e)
	}
	out := make([]dispatch.ResourceContents, 0, len(resp.Contents))
	size := 0
	for i, c := range resp.Contents {
		if err := CheckResourceContents(c); err != nil {
			return nil, 0, fmt.Errorf("read resource %s: %w: contents %d: %w", r.URI, ErrMalformed, i, err)
		}
		size += len(c.GetText()) + len(c.GetBlob())
		out = append(out, ResourceContents(c))
	}
	return out, size, nil
}
