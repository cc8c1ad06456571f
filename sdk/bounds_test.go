package sdk_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type boundedIn struct {
	Query   string            `json:"query" capgate:"minLength=1,maxLength=50"`
	Note    string            `json:"note,omitempty"`
	Tags    []string          `json:"tags,omitempty" capgate:"maxItems=3"`
	Labels  map[string]string `json:"labels,omitempty"`
	Limit   int               `json:"limit,omitempty" capgate:"minimum=0,maximum=100"`
	Nested  *boundedNested    `json:"nested,omitempty"`
	When    time.Time         `json:"when,omitzero"`
	Skipped string            `json:"-"`
}

type boundedNested struct {
	ID  string   `json:"id" capgate:"maxLength=8"`
	Any []any    `json:"any,omitempty"`
	Sub []string `json:"sub,omitempty"`
}

type boundedOut struct {
	Text  string   `json:"text"`
	Items []string `json:"items"`
}

// describeInput returns the input and output schemas the plugin declares
// for one tool with In and Out.
func describeInput[In, Out any](t *testing.T) (in, out *jsonschema.Schema) {
	t.Helper()
	p := sdk.New("bounded", "1")
	sdk.Add(p, sdk.Tool[In, Out]{
		Name: "bounded.echo", Kind: sdk.Read, Pack: "bounded",
		Handler: func(context.Context, sdk.Call, In) (Out, error) { var o Out; return o, nil },
	})
	d, err := sdktest.Start(t, p, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	in, out = new(jsonschema.Schema), new(jsonschema.Schema)
	if err := json.Unmarshal(d.Capabilities[0].InputSchema, in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.Capabilities[0].OutputSchema, out); err != nil {
		t.Fatal(err)
	}
	return in, out
}

func TestInputBoundsDeclared(t *testing.T) {
	in, out := describeInput[boundedIn, boundedOut](t)
	p := in.Properties
	eq := func(what string, got *int, want int) {
		t.Helper()
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %d", what, got, want)
		}
	}
	eq("query.minLength", p["query"].MinLength, 1)
	eq("query.maxLength", p["query"].MaxLength, 50)
	eq("note.maxLength (default)", p["note"].MaxLength, sdk.DefaultMaxLength)
	eq("tags.maxItems", p["tags"].MaxItems, 3)
	eq("tags[].maxLength (default)", p["tags"].Items.MaxLength, sdk.DefaultMaxLength)
	eq("labels.maxProperties (default)", p["labels"].MaxProperties, sdk.DefaultMaxProperties)
	eq("labels{}.maxLength (default)", p["labels"].AdditionalProperties.MaxLength, sdk.DefaultMaxLength)
	eq("nested.id.maxLength", p["nested"].Properties["id"].MaxLength, 8)
	eq("nested.any.maxItems (default)", p["nested"].Properties["any"].MaxItems, sdk.DefaultMaxItems)
	eq("nested.sub[].maxLength (default)", p["nested"].Properties["sub"].Items.MaxLength, sdk.DefaultMaxLength)
	eq("when.maxLength (default)", p["when"].MaxLength, sdk.DefaultMaxLength)
	if l := p["limit"]; l.Minimum == nil || *l.Minimum != 0 || l.Maximum == nil || *l.Maximum != 100 {
		t.Errorf("limit = min %v max %v, want 0..100", l.Minimum, l.Maximum)
	}
	if _, ok := p["Skipped"]; ok {
		t.Error("a json:\"-\" field became a property")
	}
	// Outputs are the plugin's to bound; no default is declared there.
	if out.Properties["text"].MaxLength != nil || out.Properties["items"].MaxItems != nil {
		t.Errorf("output schema got bounds: %+v", out.Properties)
	}
}

// The bounds are real JSON Schema keywords: a validator (the host's)
// refuses what exceeds them.
func TestInputBoundsEnforcedByValidation(t *testing.T) {
	in, _ := describeInput[boundedIn, boundedOut](t)
	res, err := in.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args map[string]any
		ok   bool
	}{
		{"within", map[string]any{"query": "desk", "tags": []any{"a", "b"}, "limit": 10}, true},
		{"query too long", map[string]any{"query": strings.Repeat("x", 51)}, false},
		{"query empty", map[string]any{"query": ""}, false},
		{"note over the default", map[string]any{"query": "q", "note": strings.Repeat("é", sdk.DefaultMaxLength+1)}, false},
		{"note at the default", map[string]any{"query": "q", "note": strings.Repeat("é", sdk.DefaultMaxLength)}, true},
		{"too many tags", map[string]any{"query": "q", "tags": []any{"a", "b", "c", "d"}}, false},
		{"limit too large", map[string]any{"query": "q", "limit": 101}, false},
		{"limit negative", map[string]any{"query": "q", "limit": -1}, false},
		{"nested id too long", map[string]any{"query": "q", "nested": map[string]any{"id": "123456789"}}, false},
	}
	for _, c := range cases {
		err := res.Validate(c.args)
		if (err == nil) != c.ok {
			t.Errorf("%s: Validate = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestBoundsTagMistakesPanic(t *testing.T) {
	type unknownKey struct {
		A string `json:"a" capgate:"maxLen=3"`
	}
	type wrongType struct {
		A int `json:"a" capgate:"maxLength=3"`
	}
	type badNumber struct {
		A []string `json:"a" capgate:"maxItems=many"`
	}
	type notPairs struct {
		A string `json:"a" capgate:"maxLength"`
	}
	type badMinimum struct {
		A float64 `json:"a" capgate:"minimum=low"`
	}
	for name, add := range map[string]func(p *sdk.Plugin){
		"unknown key": func(p *sdk.Plugin) { addEcho[unknownKey](p) },
		"wrong type":  func(p *sdk.Plugin) { addEcho[wrongType](p) },
		"bad number":  func(p *sdk.Plugin) { addEcho[badNumber](p) },
		"not pairs":   func(p *sdk.Plugin) { addEcho[notPairs](p) },
		"bad minimum": func(p *sdk.Plugin) { addEcho[badMinimum](p) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("sdk.Add accepted a broken capgate tag")
				}
				if msg := r.(string); !strings.Contains(msg, "field (input).a") || !strings.Contains(msg, "bounded.echo") {
					t.Errorf("panic %q does not name the tool and the field", msg)
				}
			}()
			add(sdk.New("bounded", "1"))
		})
	}
}

func addEcho[In any](p *sdk.Plugin) {
	sdk.Add(p, sdk.Tool[In, boundedOut]{
		Name: "bounded.echo", Kind: sdk.Read, Pack: "bounded",
		Handler: func(context.Context, sdk.Call, In) (boundedOut, error) { return boundedOut{}, nil },
	})
}

type loginIn struct {
	User     string            `json:"user" capgate:"maxLength=64"`
	Password string            `json:"password" capgate:"sensitive,maxLength=128"`
	Cards    []cardIn          `json:"cards,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty" capgate:"sensitive"`
}

type cardIn struct {
	Number string `json:"number" capgate:"maxLength=19,sensitive"`
	Name   string `json:"name,omitempty"`
}

// TestSensitiveFields: a field tagged sensitive is marked in the input
// schema, wherever it sits, and the host's registry reads the marks back
// as the paths the audit trail redacts; its bounds still apply.
func TestSensitiveFields(t *testing.T) {
	in, _ := describeInput[loginIn, boundedOut](t)
	if in.Properties["password"].Extra[registry.SensitiveKeyword] != true || *in.Properties["password"].MaxLength != 128 {
		t.Errorf("password schema = %+v", in.Properties["password"])
	}
	if in.Properties["user"].Extra[registry.SensitiveKeyword] != nil {
		t.Error("an untagged field is marked sensitive")
	}
	raw, _ := json.Marshal(in)
	reg := registry.New([]string{"bounded"})
	if err := reg.Add(registry.Capability{Name: "bounded.login", Kind: registry.Read, Pack: "bounded", Plugin: "bounded", InputSchema: raw}); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup("bounded.login")
	want := [][]string{{"cards", "*", "number"}, {"password"}, {"secrets"}}
	if !reflect.DeepEqual(e.Sensitive, want) {
		t.Errorf("Sensitive = %q, want %q", e.Sensitive, want)
	}
}
