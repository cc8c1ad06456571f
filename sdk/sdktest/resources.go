package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/sdk"
)

// ErrResourceNotFound is what reading a resource returns when no plugin
// declares its URI, the caller may not read it, or its plugin finds
// nothing there: the gate does not tell them apart.
var ErrResourceNotFound = errors.New("resource not found")

// ResourceContents is one of a resource's contents as the caller reads
// them: Text, or Blob when Binary.
type ResourceContents struct {
	URI, MIMEType string
	Text          string
	Blob          []byte
	Binary        bool
}

// ReadResource reads uri as pr through the host's gate, as MCP's
// resources/read does. A URI pr may not read is ErrResourceNotFound, like
// one no plugin declares.
func (c *Client) ReadResource(ctx context.Context, uri string, pr sdk.Principal) ([]ResourceContents, error) {
	gate, err := c.host.gateFor(pr.Role)
	if err != nil {
		return nil, err
	}
	res, err := gate.ReadResource(ctx, principal(pr), uri)
	if errors.Is(err, dispatch.ErrResourceNotFound) {
		return nil, fmt.Errorf("%q: %w", uri, ErrResourceNotFound)
	}
	if err != nil {
		return nil, fromGate(uri, err)
	}
	out := make([]ResourceContents, len(res))
	for i, r := range res {
		out[i] = ResourceContents{URI: r.URI, MIMEType: r.MIMEType, Text: r.Text, Blob: r.Blob, Binary: r.Binary}
	}
	return out, nil
}

var _ dispatch.ResourceReader = gateProvider{}

// ReadResource reads an admitted resource in the plugin, as the host's
// plugin provider does.
func (g gateProvider) ReadResource(ctx context.Context, r dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
	res, _, err := pluginwire.ReadResource(ctx, g.c.rpc, r)
	if err != nil && !isGateOutcome(err) {
		return nil, fmt.Errorf("plugin %s: read resource %s: %s", g.c.name, r.URI, pluginwire.StatusMessage(err))
	}
	return res, err
}

// Block is one content block of a call's answer, flattened for tests:
// Type is "text", "image", "audio", "resource_link" or "resource"; Text a
// text block's text or an embedded resource's; Data an image's, audio's or
// embedded blob's bytes; URI, Name and Title a link's (URI an embedded
// resource's too).
type Block struct {
	Type             string
	Text             string
	Data             []byte
	MIMEType         string
	URI, Name, Title string
}

// InvokeContent is Invoke that also returns the content blocks the call
// answered (sdk.Contents, sdk.Rich), as an MCP client receives them.
func (c *Client) InvokeContent(ctx context.Context, capability string, pr sdk.Principal, args any) (json.RawMessage, []Block, error) {
	raw, err := encode(args)
	if err != nil {
		return nil, nil, err
	}
	var rep dispatch.ContentReport
	res, err := c.host.invoke(dispatch.WithContentReport(ctx, &rep), pr, capability, raw, 0)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Block, len(rep.Blocks))
	for i, b := range rep.Blocks {
		out[i] = Block{Text: b.Text, Data: b.Data, MIMEType: b.MIMEType}
		switch b.Type {
		case dispatch.ContentText:
			out[i].Type = "text"
		case dispatch.ContentImage:
			out[i].Type = "image"
		case dispatch.ContentAudio:
			out[i].Type = "audio"
		case dispatch.ContentResourceLink:
			out[i] = Block{Type: "resource_link", URI: b.Link.URI, Name: b.Link.Name, Title: b.Link.Title, MIMEType: b.Link.MIMEType}
		case dispatch.ContentResource:
			out[i] = Block{Type: "resource", URI: b.Resource.URI, MIMEType: b.Resource.MIMEType, Text: b.Resource.Text, Data: b.Resource.Blob}
		}
	}
	return res, out, nil
}
