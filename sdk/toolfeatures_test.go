package sdk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type headerIn struct {
	Region   string      `json:"region" capgate:"header=Region,maxLength=32"`
	Priority int         `json:"priority" capgate:"header=Priority"`
	Verbose  *bool       `json:"verbose,omitempty" capgate:"header=Verbose"`
	Query    string      `json:"query"`
	Opts     headerNoted `json:"opts"`
}

type headerNoted struct {
	Tenant string `json:"tenant" capgate:"header=Tenant"`
}

// TestHeaderTag: the tag puts x-mcp-header on the property, nested struct
// fields included, and the host registers the result.
func TestHeaderTag(t *testing.T) {
	in, _ := describeInput[headerIn, boundedOut](t)
	for path, want := range map[string]string{"region": "Region", "priority": "Priority", "verbose": "Verbose"} {
		if got := in.Properties[path].Extra[registry.HeaderKeyword]; got != want {
			t.Errorf("%s: x-mcp-header = %v, want %q", path, got, want)
		}
	}
	if got := in.Properties["opts"].Properties["tenant"].Extra[registry.HeaderKeyword]; got != "Tenant" {
		t.Errorf("opts.tenant: x-mcp-header = %v", got)
	}
	if _, ok := in.Properties["query"].Extra[registry.HeaderKeyword]; ok {
		t.Error("an untagged field is annotated")
	}
	if m := in.Properties["region"].MaxLength; m == nil || *m != 32 {
		t.Errorf("region's maxLength = %v, want the tag's 32 beside the header", m)
	}
}

type dupHeader struct {
	A string `json:"a" capgate:"header=MyField"`
	B string `json:"b" capgate:"header=myfield"`
}
type objectHeader struct {
	A headerNoted `json:"a" capgate:"header=A"`
}
type sliceHeader struct {
	A []string `json:"a" capgate:"header=A"`
}
type numberHeader struct {
	A float64 `json:"a" capgate:"header=A"`
}
type spaceHeader struct {
	A string `json:"a" capgate:"header=My Region"`
}
type colonHeader struct {
	A string `json:"a" capgate:"header=Region:1"`
}
type nonASCIIHeader struct {
	A string `json:"a" capgate:"header=Région"`
}
type itemHeader struct {
	A []headerNoted `json:"a"`
}
type emptyHeader struct {
	A string `json:"a" capgate:"header="`
}

// TestHeaderTagRefused: every rule a client applies before it accepts a
// tool is applied when the plugin declares it.
func TestHeaderTagRefused(t *testing.T) {
	for name, c := range map[string]struct {
		add  func(p *sdk.Plugin)
		want string
	}{
		"duplicate, other case": {func(p *sdk.Plugin) { addEcho[dupHeader](p) }, "already names"},
		"object":                {func(p *sdk.Plugin) { addEcho[objectHeader](p) }, "string, integer or boolean"},
		"array":                 {func(p *sdk.Plugin) { addEcho[sliceHeader](p) }, "string, integer or boolean"},
		"number":                {func(p *sdk.Plugin) { addEcho[numberHeader](p) }, "string, integer or boolean"},
		"space":                 {func(p *sdk.Plugin) { addEcho[spaceHeader](p) }, "field-name token"},
		"colon":                 {func(p *sdk.Plugin) { addEcho[colonHeader](p) }, "field-name token"},
		"non-ASCII":             {func(p *sdk.Plugin) { addEcho[nonASCIIHeader](p) }, "field-name token"},
		"inside an array":       {func(p *sdk.Plugin) { addEcho[itemHeader](p) }, "reachable from the root through properties"},
		"empty":                 {func(p *sdk.Plugin) { addEcho[emptyHeader](p) }, "key=value"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("sdk.Add accepted a broken header tag")
				}
				if msg := r.(string); !strings.Contains(msg, c.want) || !strings.Contains(msg, "bounded.echo") {
					t.Errorf("panic %q does not say %q", msg, c.want)
				}
			}()
			c.add(sdk.New("bounded", "1"))
		})
	}
}

// node refers to itself: inference alone refuses it.
type node struct {
	Name     string `json:"name"`
	Children []node `json:"children,omitempty"`
	Parent   *node  `json:"parent,omitempty"`
}

type treeIn struct {
	Root  node  `json:"root"`
	Other *node `json:"other,omitempty"`
}

// TestRecursiveTypesUseDefs: a type that contains itself is one $defs
// entry that every place holding it refers to; bounds reach inside it, and
// the host registers and validates the schema.
func TestRecursiveTypesUseDefs(t *testing.T) {
	p := sdk.New("tree", "1")
	sdk.Add(p, sdk.Tool[treeIn, node]{
		Name: "tree.echo", Kind: sdk.Read,
		Handler: func(_ context.Context, _ sdk.Call, in treeIn) (node, error) { return in.Root, nil },
	})
	d, err := sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := d.Capabilities[0]
	var in map[string]any
	if err := json.Unmarshal(c.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	def, ok := in["$defs"].(map[string]any)["node"].(map[string]any)
	if !ok {
		t.Fatalf("no $defs.node in %s", c.InputSchema)
	}
	props := in["properties"].(map[string]any)
	if props["root"].(map[string]any)["$ref"] != "#/$defs/node" {
		t.Errorf("root = %v, want a $ref", props["root"])
	}
	if !strings.Contains(string(c.InputSchema), `"anyOf":[{"type":"null"},{"$ref":"#/$defs/node"}]`) {
		t.Errorf("a pointer to node is not null-or-node: %s", c.InputSchema)
	}
	name := def["properties"].(map[string]any)["name"].(map[string]any)
	if name["maxLength"] != float64(sdk.DefaultMaxLength) {
		t.Errorf("bounds did not reach into $defs: %v", name)
	}
	var out map[string]any
	if err := json.Unmarshal(c.OutputSchema, &out); err != nil {
		t.Fatal(err)
	}
	if out["type"] != "object" || out["$defs"] == nil {
		t.Errorf("output schema of a recursive root = %s", c.OutputSchema)
	}
	rc, err := pluginwire.Capability(c, "tree")
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New([]string{"tree"})
	if err := reg.Add(rc); err != nil {
		t.Fatalf("the host refuses the schema: %v", err)
	}
	if places := registry.UnboundedInputs(c.InputSchema); len(places) > 0 {
		t.Errorf("unbounded places: %v", places)
	}
	e, _ := reg.Lookup("tree.echo")
	if err := e.ValidateArgs(json.RawMessage(`{"root":{"name":"a","children":[{"name":"b","parent":null}]}}`)); err != nil {
		t.Errorf("a valid tree is refused: %v", err)
	}
	if err := e.ValidateArgs(json.RawMessage(`{"root":{"name":"a","children":[{"name":7}]}}`)); err == nil {
		t.Error("a bad node deep in the tree is accepted")
	}
	if err := e.ValidateResult(json.RawMessage(`{"name":"a","children":[{"name":"b"}]}`)); err != nil {
		t.Errorf("a valid result is refused: %v", err)
	}
}

const conditional = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
	"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"city":{"type":"string","maxLength":64}},"additionalProperties":false}},
	"properties":{"address":{"$ref":"#/$defs/address"},"phone":{"type":"string","maxLength":20},"email":{"type":"string","maxLength":200}},
	"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],
	"if":{"required":["phone"]},"then":{"required":["phone"]},"else":{"required":["email"]},
	"additionalProperties":false}`

type contactIn struct {
	Phone string `json:"phone,omitempty"`
	Email string `json:"email,omitempty"`
}

// TestDeclaredInputSchema: a schema declared as such is sent intact, and
// one with an unbounded place is refused.
func TestDeclaredInputSchema(t *testing.T) {
	p := sdk.New("contact", "1")
	sdk.Add(p, sdk.Tool[contactIn, boundedOut]{
		Name: "contact.add", Kind: sdk.Read, InputSchema: json.RawMessage(conditional),
		Handler: func(context.Context, sdk.Call, contactIn) (boundedOut, error) { return boundedOut{}, nil },
	})
	d, err := sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := string(d.Capabilities[0].InputSchema); got != conditional {
		t.Errorf("input schema = %s, want it intact", got)
	}
	rc, _ := pluginwire.Capability(d.Capabilities[0], "contact")
	reg := registry.New([]string{"contact"})
	if err := reg.Add(rc); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup("contact.add")
	if err := e.ValidateArgs(json.RawMessage(`{"email":"a@b"}`)); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	if err := e.ValidateArgs(json.RawMessage(`{"address":{"city":"x"}}`)); err == nil {
		t.Error("arguments without phone or email accepted")
	}

	for name, schema := range map[string]string{
		"unbounded":  `{"type":"object","properties":{"q":{"type":"string"}}}`,
		"not object": `{"type":"string","maxLength":3}`,
		"not JSON":   `{"type":`,
		"bad header": `{"type":"object","properties":{"q":{"type":"object","maxProperties":1,"x-mcp-header":"Q"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "InputSchema") {
					t.Errorf("panic %v, want one naming InputSchema", r)
				}
			}()
			sdk.Add(sdk.New("contact", "1"), sdk.Tool[contactIn, boundedOut]{
				Name: "contact.add", Kind: sdk.Read, InputSchema: json.RawMessage(schema),
				Handler: func(context.Context, sdk.Call, contactIn) (boundedOut, error) { return boundedOut{}, nil },
			})
		})
	}
}

// TestPresentation: title, icons and declared hints reach the host, and
// icons that are not https or inline images are refused when declared.
func TestPresentation(t *testing.T) {
	p := sdk.New("look", "1")
	sdk.Add(p, sdk.Tool[contactIn, boundedOut]{
		Name: "look.up", Kind: sdk.Action, Title: "Look up",
		Icons:          []sdk.Icon{{Src: "https://example.com/i.png", MIMEType: "image/png", Sizes: []string{"48x48"}, Theme: "dark"}},
		IdempotentHint: new(true), OpenWorldHint: new(true),
		Handler: func(context.Context, sdk.Call, contactIn) (boundedOut, error) { return boundedOut{}, nil },
	})
	d, err := sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rc, err := pluginwire.Capability(d.Capabilities[0], "look")
	if err != nil {
		t.Fatal(err)
	}
	if rc.Title != "Look up" || len(rc.Icons) != 1 || rc.Icons[0].Theme != "dark" || rc.Icons[0].Sizes[0] != "48x48" ||
		rc.IdempotentHint == nil || !*rc.IdempotentHint || rc.OpenWorldHint == nil || !*rc.OpenWorldHint {
		t.Errorf("capability = %+v", rc)
	}
	plain, _ := pluginwire.Capability(&capabilityWithoutHints, "look")
	if plain.IdempotentHint != nil || plain.OpenWorldHint != nil {
		t.Error("hints a plugin did not declare are set")
	}

	for name, icon := range map[string]sdk.Icon{
		"http":       {Src: "http://example.com/i.png"},
		"javascript": {Src: "javascript:alert(1)"},
		"file":       {Src: "file:///etc/passwd"},
		"data text":  {Src: "data:text/html;base64,PGI+"},
		"bad base64": {Src: "data:image/png;base64,!!!"},
		"too big":    {Src: "https://example.com/" + strings.Repeat("a", registry.MaxIconSrc)},
		"theme":      {Src: "https://example.com/i.png", Theme: "blue"},
		"size":       {Src: "https://example.com/i.png", Sizes: []string{"big"}},
		"mime":       {Src: "https://example.com/i.png", MIMEType: "png"},
		"mismatch":   {Src: "data:image/png;base64,AAAA", MIMEType: "image/gif"},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "icon 0") {
					t.Errorf("panic %v, want one naming the icon", r)
				}
			}()
			sdk.Add(sdk.New("look", "1"), sdk.Tool[contactIn, boundedOut]{
				Name: "look.up", Kind: sdk.Read, Icons: []sdk.Icon{icon},
				Handler: func(context.Context, sdk.Call, contactIn) (boundedOut, error) { return boundedOut{}, nil },
			})
		})
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "title") {
			t.Errorf("panic %v, want one naming the title", r)
		}
	}()
	sdk.Add(sdk.New("look", "1"), sdk.Tool[contactIn, boundedOut]{
		Name: "look.up", Kind: sdk.Read, Title: strings.Repeat("t", registry.MaxTitleLength+1),
		Handler: func(context.Context, sdk.Call, contactIn) (boundedOut, error) { return boundedOut{}, nil },
	})
}

var capabilityWithoutHints = capgatev1.Capability{Name: "look.plain", Kind: capgatev1.Kind_KIND_READ}
