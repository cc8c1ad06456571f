package mcp

import (
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/registry"
)

// TestToolsListPresentation: a capability's title, icons and declared
// hints are rendered as each revision has them: 2025-03-26 keeps the title
// in the annotations, 2025-06-18 moves it beside the name, icons come with
// 2025-11-25; declared hints replace the kind's defaults at every
// revision, and a $defs/$ref input schema is sent intact.
func TestToolsListPresentation(t *testing.T) {
	f := newFixture(t, Options{})
	const schema = `{"type":"object","$defs":{"n":{"type":"object","properties":{"c":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/n"}}},"additionalProperties":false}},"properties":{"root":{"$ref":"#/$defs/n"}},"additionalProperties":false}`
	if err := f.platform.Registry.Add(registry.Capability{
		Name: "booking_fancy", Title: "Fancy booking", Description: "Decorated.", Kind: registry.Read,
		InputSchema: json.RawMessage(schema), Pack: "booking", Permission: "booking.read", Plugin: "core",
		Icons:          []registry.Icon{{Src: "https://example.com/i.svg", MIMEType: "image/svg+xml", Sizes: []string{"any"}, Theme: "light"}},
		IdempotentHint: new(false), OpenWorldHint: new(true),
	}); err != nil {
		t.Fatal(err)
	}
	for _, ver := range allVersions {
		t.Run("v"+ver, func(t *testing.T) {
			res := f.send(mcptest.Alice, ver, rpc{method: "tools/list", id: 1}).result(t)
			var tool map[string]any
			for _, x := range res["tools"].([]any) {
				if x.(map[string]any)["name"] == "booking_fancy" {
					tool = x.(map[string]any)
				}
			}
			if tool == nil {
				t.Fatal("booking_fancy missing")
			}
			a := tool["annotations"].(map[string]any)
			if a["idempotentHint"] != false || a["openWorldHint"] != true || a["readOnlyHint"] != true {
				t.Errorf("annotations = %v, want the declared hints", a)
			}
			v := parseVersion(ver)
			_, hasTitle := tool["title"]
			_, annTitle := a["title"]
			if v >= v20250618 != hasTitle || v < v20250618 != annTitle {
				t.Errorf("title %v, annotations.title %v at %q", tool["title"], a["title"], ver)
			}
			icons, hasIcons := tool["icons"].([]any)
			if hasIcons != (v >= v20251125) {
				t.Errorf("icons %v at %q", tool["icons"], ver)
			}
			if hasIcons {
				ic := icons[0].(map[string]any)
				if ic["src"] != "https://example.com/i.svg" || ic["mimeType"] != "image/svg+xml" || ic["theme"] != "light" || ic["sizes"].([]any)[0] != "any" {
					t.Errorf("icon = %v", ic)
				}
			}
			got, _ := json.Marshal(tool["inputSchema"])
			var want any
			_ = json.Unmarshal([]byte(schema), &want)
			w, _ := json.Marshal(want)
			if string(got) != string(w) {
				t.Errorf("inputSchema = %s, want %s", got, w)
			}
		})
	}
}
