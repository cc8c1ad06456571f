package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// probePNG is the probe plugin's floor plan image.
var probePNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")

// TestGoSDKRichResultsAndResources: the official Go client, at every
// revision, receives a plugin's image block and resource link, lists and
// reads the plugin's resources (fixed and templated), and meets the same
// not-found for a resource its token may not read as for one that does
// not exist.
func TestGoSDKRichResultsAndResources(t *testing.T) {
	needE2E(t)
	h := startProbeHost(t)
	for _, version := range protocolVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			alice := connect(t, h, tokenAlice, version)

			res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "probe.plan", Arguments: map[string]any{"room": "aurora"}})
			if err != nil || res.IsError {
				t.Fatalf("probe.plan: %v %+v", err, res)
			}
			var image *mcp.ImageContent
			var link *mcp.ResourceLink
			var texts []string
			for _, c := range res.Content {
				switch c := c.(type) {
				case *mcp.ImageContent:
					image = c
				case *mcp.ResourceLink:
					link = c
				case *mcp.TextContent:
					texts = append(texts, c.Text)
				}
			}
			if image == nil || !bytes.Equal(image.Data, probePNG) || image.MIMEType != "image/png" {
				t.Errorf("probe.plan: image %+v, want the plan", image)
			}
			if version == "2025-03-26" {
				// That revision has no resource links: the link is text.
				if link != nil || !slices.Contains(texts, `Resource "House rules" at probe://terms (text/plain)`) {
					t.Errorf("probe.plan at %s: link %+v, texts %q", version, link, texts)
				}
			} else if link == nil || link.URI != "probe://terms" || link.Name != "terms" || link.Title != "House rules" {
				t.Errorf("probe.plan: link %+v", link)
			}
			if res.StructuredContent != nil {
				t.Errorf("probe.plan answers blocks alone, got structuredContent %v", res.StructuredContent)
			}

			// The plugin's resources open the first page; the one the
			// token may not read is not listed.
			list, err := alice.ListResources(ctx, &mcp.ListResourcesParams{})
			if err != nil {
				t.Fatalf("resources/list: %v", err)
			}
			var uris []string
			for _, r := range list.Resources {
				uris = append(uris, r.URI)
			}
			if !slices.Contains(uris, "probe://terms") || slices.Contains(uris, "probe://secret") {
				t.Errorf("resources/list as alice: %q", uris)
			}
			tmpls, err := alice.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{})
			if err != nil {
				t.Fatalf("resources/templates/list: %v", err)
			}
			var templates []string
			for _, r := range tmpls.ResourceTemplates {
				templates = append(templates, r.URITemplate)
			}
			if !slices.Contains(templates, "probe://rooms/{room}/plan") || !slices.Contains(templates, recordTemplate) {
				t.Errorf("resources/templates/list: %q", templates)
			}

			read, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "probe://terms"})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "Leave the room as you found it." || read.Contents[0].MIMEType != "text/plain" {
				t.Errorf("read probe://terms: %v %+v", err, read)
			}
			read, err = alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: "probe://rooms/aurora/plan"})
			if err != nil || len(read.Contents) != 1 || !bytes.Equal(read.Contents[0].Blob, probePNG) || read.Contents[0].URI != "probe://rooms/aurora/plan" {
				t.Errorf("read the plan: %v %+v", err, read)
			}

			wantCode := int64(-32002)
			if version >= "2026-07-28" {
				wantCode = -32602
			}
			for _, uri := range []string{"probe://secret", "probe://rooms/nowhere/plan", "probe://nothing"} {
				if _, err := alice.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
					t.Errorf("read %s as alice: no error", uri)
					continue
				}
				var resp struct {
					Error *jsonrpc.Error `json:"error"`
				}
				if json.Unmarshal(alice.wire.lastBody(), &resp) != nil || resp.Error == nil || resp.Error.Code != wantCode ||
					resp.Error.Message != "Resource not found" {
					t.Errorf("read %s as alice: wire %s, want error %d Resource not found", uri, alice.wire.lastBody(), wantCode)
				}
			}
			admin := connect(t, h, tokenAdmin, version)
			if read, err := admin.ReadResource(ctx, &mcp.ReadResourceParams{URI: "probe://secret"}); err != nil || read.Contents[0].Text != "secret" {
				t.Errorf("read probe://secret as admin: %v %+v", err, read)
			}
		})
	}
}
