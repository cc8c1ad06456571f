package registry_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/registry"
)

func TestAddChecksPresentationAndHeaders(t *testing.T) {
	withSchema := func(s string) func(*registry.Capability) {
		return func(c *registry.Capability) { c.InputSchema = json.RawMessage(s) }
	}
	ok := []func(*registry.Capability){
		func(c *registry.Capability) { c.Title = "Cancel a booking" },
		func(c *registry.Capability) {
			c.Icons = []registry.Icon{{Src: "https://cdn.example.com/x.png", MIMEType: "image/png", Sizes: []string{"16x16", "any"}, Theme: "dark"},
				{Src: "data:image/png;base64,iVBORw0KGgo="}}
		},
		withSchema(`{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"},"n":{"type":["null","integer"],"x-mcp-header":"N"},"o":{"type":"object","properties":{"b":{"type":"boolean","x-mcp-header":"B"}}}}}`),
	}
	for i, m := range ok {
		c := cancel()
		m(&c)
		if err := registry.New([]string{"booking"}).Add(c); err != nil {
			t.Errorf("case %d refused: %v", i, err)
		}
	}
	bad := map[string]struct {
		modify func(*registry.Capability)
		want   string
	}{
		"long title":      {func(c *registry.Capability) { c.Title = strings.Repeat("x", 129) }, "title"},
		"control title":   {func(c *registry.Capability) { c.Title = "a\nb" }, "control"},
		"too many icons":  {func(c *registry.Capability) { c.Icons = make([]registry.Icon, 9) }, "icons"},
		"http icon":       {func(c *registry.Capability) { c.Icons = []registry.Icon{{Src: "http://x.example/i.png"}} }, "https"},
		"userinfo icon":   {func(c *registry.Capability) { c.Icons = []registry.Icon{{Src: "https://u:p@x.example/i.png"}} }, "https"},
		"empty header":    {withSchema(`{"type":"object","properties":{"v":{"type":"string","x-mcp-header":""}}}`), "non-empty"},
		"number header":   {withSchema(`{"type":"object","properties":{"v":{"type":"number","x-mcp-header":"V"}}}`), "string, integer or boolean"},
		"null header":     {withSchema(`{"type":"object","properties":{"v":{"type":"null","x-mcp-header":"V"}}}`), "string, integer or boolean"},
		"dup header":      {withSchema(`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"X"},"b":{"type":"string","x-mcp-header":"x"}}}`), "already names"},
		"tab in header":   {withSchema(`{"type":"object","properties":{"v":{"type":"string","x-mcp-header":"Region\t1"}}}`), "token"},
		"header in defs":  {withSchema(`{"type":"object","$defs":{"d":{"type":"string","x-mcp-header":"D"}},"properties":{"v":{"$ref":"#/$defs/d"}}}`), "reachable"},
		"header in allOf": {withSchema(`{"type":"object","allOf":[{"properties":{"v":{"type":"string","x-mcp-header":"V"}}}]}`), "reachable"},
	}
	for name, tc := range bad {
		t.Run(name, func(t *testing.T) {
			c := cancel()
			tc.modify(&c)
			err := registry.New([]string{"booking"}).Add(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), c.Name) {
				t.Errorf("Add = %v, want an error naming %q and the capability", err, tc.want)
			}
		})
	}
}
