package mcptest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Capabilities and resources WithRich registers, in pack "docs" (on):
// RichBlocks answers every kind of content block and no structured value,
// RichBoth a block beside an object, RichArray a block beside an array.
// Every customer may read them but DocsSecret, which needs docs.secret
// (admins hold it); DocsOff is in the switched-off pack "docsoff".
const (
	RichBlocks     = "rich.blocks"
	RichBoth       = "rich.both"
	RichArray      = "rich.array"
	DocsText       = "test://static-text"
	DocsBinary     = "test://static-binary"
	DocsSecret     = "test://secret"
	DocsOff        = "test://off"
	DocsTemplate   = "test://template/{id}/data"
	DocsBadContent = "test://template/bad/data"
)

// PNG is the bytes of the image blocks and the binary resource.
var PNG = []byte("\x89PNG\r\n\x1a\n")

// RichContent are the blocks RichBlocks answers, one of each kind.
var RichContent = []dispatch.Content{
	{Type: dispatch.ContentText, Text: "hello"},
	{Type: dispatch.ContentImage, Data: PNG, MIMEType: "image/png"},
	{Type: dispatch.ContentAudio, Data: []byte("RIFF"), MIMEType: "audio/wav"},
	{Type: dispatch.ContentResourceLink, Link: dispatch.ResourceLink{URI: DocsText, Name: "static-text", Title: "Static text", MIMEType: "text/plain", Size: 5, HasSize: true}},
	{Type: dispatch.ContentResource, Resource: dispatch.ResourceContents{URI: "test://embedded", MIMEType: "text/plain", Text: "embedded"}},
	{Type: dispatch.ContentResource, Resource: dispatch.ResourceContents{URI: "test://blob", MIMEType: "image/png", Blob: PNG, Binary: true}},
}

// WithRich registers the rich-result capabilities and the resources
// above, served by the platform.
func WithRich() Option { return func(s *setup) { s.rich = true } }

func addRich(reg *registry.Registry) {
	for _, c := range []registry.Capability{
		{Name: RichBlocks, Description: "Answer content blocks.", Kind: registry.Read, InputSchema: objectSchema, Pack: "docs", Plugin: "core"},
		{Name: RichBoth, Description: "Answer a block and a value.", Kind: registry.Read, InputSchema: objectSchema,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`), Pack: "docs", Plugin: "core"},
		{Name: RichArray, Description: "Answer a block and an array.", Kind: registry.Read, InputSchema: objectSchema,
			OutputSchema: json.RawMessage(`{"type":"array","items":{"type":"integer"}}`), Pack: "docs", Plugin: "core"},
	} {
		if err := reg.Add(c); err != nil {
			panic(fmt.Sprintf("mcptest: %v", err))
		}
	}
	for _, r := range []registry.Resource{
		{URI: DocsText, Name: "static-text", Title: "Static text", Description: "A text.", MIMEType: "text/plain", Size: 5, HasSize: true, Pack: "docs", Plugin: "core"},
		{URI: DocsBinary, Name: "static-binary", MIMEType: "image/png", Pack: "docs", Plugin: "core"},
		{URI: DocsSecret, Name: "secret", Pack: "docs", Permission: "docs.secret", Plugin: "core"},
		{URI: DocsOff, Name: "off", Pack: "docsoff", Plugin: "core"},
	} {
		if err := reg.AddResource(r); err != nil {
			panic(fmt.Sprintf("mcptest: %v", err))
		}
	}
	if err := reg.AddResourceTemplate(registry.ResourceTemplate{URITemplate: DocsTemplate, Name: "template", Title: "Data by id",
		MIMEType: "application/json", Pack: "docs", Plugin: "core"}); err != nil {
		panic(fmt.Sprintf("mcptest: %v", err))
	}
}

// invokeRich runs the rich capabilities; ok is false for any other.
func invokeRich(ctx context.Context, r dispatch.Request) (json.RawMessage, bool) {
	block := func(blocks []dispatch.Content) {
		if rep := dispatch.ContentReportOf(ctx); rep != nil {
			rep.Blocks = blocks
		}
	}
	switch r.Capability {
	case RichBlocks:
		block(RichContent)
		return json.RawMessage(`null`), true
	case RichBoth:
		block([]dispatch.Content{{Type: dispatch.ContentText, Text: "one"}})
		return json.RawMessage(`{"n":1}`), true
	case RichArray:
		block([]dispatch.Content{{Type: dispatch.ContentText, Text: "three"}})
		return json.RawMessage(`[1,2,3]`), true
	}
	return nil, false
}

// ReadResource implements dispatch.ResourceReader.
func (p *Platform) ReadResource(_ context.Context, r dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
	switch {
	case r.URI == DocsText:
		return []dispatch.ResourceContents{{URI: r.URI, MIMEType: "text/plain", Text: "hello"}}, nil
	case r.URI == DocsBinary:
		return []dispatch.ResourceContents{{URI: r.URI, MIMEType: "image/png", Blob: PNG, Binary: true}}, nil
	case r.URI == DocsSecret, r.URI == DocsOff:
		return []dispatch.ResourceContents{{URI: r.URI, Text: "secret"}}, nil
	case r.Template == DocsTemplate && r.Variables["id"] == "missing":
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: "no data"}
	case r.Template == DocsTemplate && r.Variables["id"] == "bad":
		return nil, fmt.Errorf("the store is down")
	case r.Template == DocsTemplate:
		return []dispatch.ResourceContents{{URI: r.URI, MIMEType: "application/json",
			Text: `{"id":"` + r.Variables["id"] + `","templateTest":true}`}}, nil
	}
	return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: "nothing there"}
}
