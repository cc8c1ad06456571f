package registry_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/registry"
)

// cancel is a well-formed capability; the tests below break one part of it
// at a time.
func cancel() registry.Capability {
	return registry.Capability{
		Name:         "booking.cancel",
		Description:  "Cancel a booking.",
		Kind:         registry.Action,
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"cancelled":{"type":"boolean"}}}`),
		Pack:         "booking",
		Permission:   "booking.cancel",
		OwnerGuarded: true,
		Plugin:       "desk",
	}
}

func TestAddAccepts(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*registry.Capability)
	}{
		{"the reference declaration", func(*registry.Capability) {}},
		{"digits and underscores in the name", func(c *registry.Capability) { c.Name = "booking_v2.cancel_all2" }},
		{"more than two segments", func(c *registry.Capability) { c.Name = "booking.slot.cancel" }},
		{"read kind", func(c *registry.Capability) { c.Kind = registry.Read }},
		{"no permission", func(c *registry.Capability) { c.Permission = "" }},
		{"hyphenated, single-segment permission", func(c *registry.Capability) { c.Permission = "front-desk" }},
		{"no output schema", func(c *registry.Capability) { c.OutputSchema = nil }},
		{"draft 2020-12", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object"}`)
		}},
		{"draft-07", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}},
		{"a property named type", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"type":{"type":"string","enum":["bogus"]}}}`)
		}},
		{"one segment", func(c *registry.Capability) { c.Name = "cancel" }},
		{"snake case with digits", func(c *registry.Capability) { c.Name = "json_schema_2020_12_tool" }},
		{"longest name", func(c *registry.Capability) { c.Name = strings.Repeat("b", registry.MaxNameLength) }},
		{"2020-12 keywords", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
				`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"city":{"type":"string"}}}},` +
				`"properties":{"address":{"$ref":"#/$defs/address"},"phone":{"type":"string"},"email":{"type":"string"}},` +
				`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
				`"if":{"required":["phone"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`)
		}},
		{"nested type lists", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"note":{"type":["string","null"]}}}`)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := registry.New([]string{"booking"})
			c := cancel()
			tt.modify(&c)
			if err := r.Add(c); err != nil {
				t.Fatal(err)
			}
			e, ok := r.Lookup(c.Name)
			if !ok || e.Capability.Name != c.Name || e.Plugin != c.Plugin || e.Permission != c.Permission {
				t.Fatalf("Lookup(%q) = %+v, %v", c.Name, e, ok)
			}
		})
	}
}

func TestAddRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*registry.Capability)
		want   []string // parts of the error message
	}{
		{"empty name", func(c *registry.Capability) { c.Name = "" }, []string{`""`, "lower-case segments"}},
		{"upper case", func(c *registry.Capability) { c.Name = "Booking.cancel" }, []string{`"Booking.cancel"`, "lower-case segments"}},
		{"upper case later", func(c *registry.Capability) { c.Name = "booking.Cancel" }, []string{"lower-case segments"}},
		{"trailing dot", func(c *registry.Capability) { c.Name = "booking." }, []string{"lower-case segments"}},
		{"leading dot", func(c *registry.Capability) { c.Name = ".cancel" }, []string{"lower-case segments"}},
		{"empty segment", func(c *registry.Capability) { c.Name = "booking..cancel" }, []string{"lower-case segments"}},
		{"leading digit", func(c *registry.Capability) { c.Name = "2020_tool" }, []string{"lower-case segments"}},
		{"too long", func(c *registry.Capability) { c.Name = "a" + strings.Repeat("b", registry.MaxNameLength) }, []string{"at most 128"}},
		{"segment starts with a digit", func(c *registry.Capability) { c.Name = "booking.2cancel" }, []string{"lower-case segments"}},
		{"hyphen", func(c *registry.Capability) { c.Name = "booking.cancel-all" }, []string{"lower-case segments"}},
		{"space", func(c *registry.Capability) { c.Name = "booking cancel" }, []string{"lower-case segments"}},
		{"slash", func(c *registry.Capability) { c.Name = "booking/cancel" }, []string{"lower-case segments"}},
		{"no kind", func(c *registry.Capability) { c.Kind = 0 }, []string{`"booking.cancel"`, "kind must be read or action"}},
		{"unknown kind", func(c *registry.Capability) { c.Kind = 3 }, []string{"kind must be read or action"}},
		{"unknown pack", func(c *registry.Capability) { c.Pack = "parking" }, []string{`unknown pack "parking"`, "known: booking, status"}},
		{"no pack", func(c *registry.Capability) { c.Pack = "" }, []string{`unknown pack ""`, "known: booking, status"}},
		{"wildcard permission", func(c *registry.Capability) { c.Permission = "booking.*" }, []string{`permission "booking.*"`, "wildcards belong to roles"}},
		{"star permission", func(c *registry.Capability) { c.Permission = "*" }, []string{`permission "*"`}},
		{"upper-case permission", func(c *registry.Capability) { c.Permission = "Booking.Cancel" }, []string{`permission "Booking.Cancel"`}},
		{"permission with an empty segment", func(c *registry.Capability) { c.Permission = "booking..cancel" }, []string{"permission"}},
		{"missing input schema", func(c *registry.Capability) { c.InputSchema = nil }, []string{"input schema: missing"}},
		{"blank input schema", func(c *registry.Capability) { c.InputSchema = json.RawMessage(" \n") }, []string{"input schema: missing"}},
		{"input schema is not JSON", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{"type":`) }, []string{"input schema: not a JSON Schema"}},
		{"input schema is an array", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`[]`) }, []string{"input schema: not a JSON Schema"}},
		{"input schema keyword of the wrong shape", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{"type":"object","required":"id"}`) }, []string{"input schema: not a JSON Schema"}},
		{"input schema for a string", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{"type":"string"}`) }, []string{`input schema: type must be "object", got "string"`}},
		{"input schema without a type", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{}`) }, []string{`input schema: type must be "object"`}},
		{"input schema true", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`true`) }, []string{`input schema: type must be "object"`}},
		{"input schema null", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`null`) }, []string{`input schema: type must be "object"`}},
		{"input schema object or null", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{"type":["object","null"]}`) }, []string{`input schema: type must be "object"`, `"null"`}},
		{"misspelt nested type", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"int"}}}`)
		}, []string{"input schema", `unknown type "int"`}},
		{"misspelt type deep in a list", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"strng"}]}}}}`)
		}, []string{"input schema", `unknown type "strng"`}},
		{"misspelt type in a type list", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","$defs":{"d":{"type":["string","nul"]}}}`)
		}, []string{"input schema", `unknown type "nul"`}},
		{"unsupported dialect", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}`)
		}, []string{"input schema", "unsupported $schema", "draft-04"}},
		{"dangling reference", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`)
		}, []string{"input schema", "missing"}},
		{"remote reference", func(c *registry.Capability) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://schemas.invalid/a.json"}}}`)
		}, []string{"input schema", "cannot resolve remote schemas"}},
		{"output schema is not JSON", func(c *registry.Capability) { c.OutputSchema = json.RawMessage(`{"type":`) }, []string{"output schema: not a JSON Schema"}},
		{"input schema for an array", func(c *registry.Capability) { c.InputSchema = json.RawMessage(`{"type":"array"}`) }, []string{`input schema: type must be "object", got "array"`}},
		{"misspelt type in the output schema", func(c *registry.Capability) {
			c.OutputSchema = json.RawMessage(`{"type":"object","properties":{"at":{"type":"datetime"}}}`)
		}, []string{"output schema", `unknown type "datetime"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := registry.New([]string{"status", "booking"})
			c := cancel()
			tt.modify(&c)
			err := r.Add(c)
			if err == nil {
				t.Fatal("Add accepted the declaration")
			}
			for _, part := range append([]string{"capability"}, tt.want...) {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not contain %q", err, part)
				}
			}
			if _, ok := r.Lookup(c.Name); ok || len(r.All()) != 0 {
				t.Fatalf("a rejected declaration was registered: %d entries", len(r.All()))
			}
		})
	}
}

func TestAddRejectsADuplicateNamingTheFirstPlugin(t *testing.T) {
	r := registry.New([]string{"booking"})
	if err := r.Add(cancel()); err != nil {
		t.Fatal(err)
	}
	second := cancel()
	second.Plugin = "rival"
	second.Kind = registry.Read
	err := r.Add(second)
	if err == nil {
		t.Fatal("Add accepted a second booking.cancel")
	}
	if !strings.Contains(err.Error(), `"booking.cancel"`) || !strings.Contains(err.Error(), `plugin "desk"`) {
		t.Fatalf("error %q does not name the capability and the plugin that has it", err)
	}
	if e, _ := r.Lookup("booking.cancel"); e.Plugin != "desk" || e.Kind != registry.Action || len(r.All()) != 1 {
		t.Fatalf("the duplicate replaced the original: %+v", e.Capability)
	}
}

func TestAllIsInNameOrder(t *testing.T) {
	names := []string{"search.query", "booking.get", "booking.cancel", "a_pack.zeta", "booking.book", "search.a", "booking.get_all"}
	r := registry.New([]string{"booking"})
	for i, n := range names {
		c := cancel()
		c.Name = n
		c.Plugin = "plugin-" + n
		if i%2 == 0 {
			c.Kind = registry.Read
		}
		if err := r.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, e := range r.All() {
		got = append(got, e.Name)
		if e.Plugin != "plugin-"+e.Name {
			t.Errorf("%s carries plugin %q", e.Name, e.Plugin)
		}
		if l, ok := r.Lookup(e.Name); !ok || l != e {
			t.Errorf("Lookup(%q) does not return the listed entry", e.Name)
		}
	}
	want := slices.Sorted(slices.Values(names))
	if !slices.Equal(got, want) {
		t.Fatalf("All() = %v, want %v", got, want)
	}
}

func TestLookupOfAnUnknownName(t *testing.T) {
	r := registry.New([]string{"booking"})
	if err := r.Add(cancel()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"booking.get", "", "booking.cancel "} {
		if e, ok := r.Lookup(n); ok || e != nil {
			t.Errorf("Lookup(%q) = %v, %v", n, e, ok)
		}
	}
}

func TestKnownPacksAreSortedAndUnique(t *testing.T) {
	got := registry.New([]string{"status", "booking", "status", "admin"}).KnownPacks()
	if want := []string{"admin", "booking", "status"}; !slices.Equal(got, want) {
		t.Fatalf("KnownPacks() = %v, want %v", got, want)
	}
	if got := registry.New(nil).KnownPacks(); len(got) != 0 {
		t.Fatalf("KnownPacks() of an empty registry = %v", got)
	}
}

func TestValidateArgs(t *testing.T) {
	const strict = `{"type":"object","properties":{
		"id":{"type":"string"},
		"count":{"type":"integer","minimum":1},
		"tags":{"type":"array","items":{"type":"string"}}},
		"required":["id"],"additionalProperties":false}`
	const open = `{"type":"object","properties":{"id":{"type":"string"}}}`
	tests := []struct {
		name   string
		schema string
		args   string
		want   string // part of the error; empty for valid arguments
	}{
		{"valid", strict, `{"id":"b-1"}`, ""},
		{"valid with every property", strict, `{"id":"b-1","count":2,"tags":["late"]}`, ""},
		{"integer written as a float", strict, `{"id":"b-1","count":2.0}`, ""},
		{"string where a string is wanted, not a number", strict, `{"id":7}`, "/properties/id"},
		{"number for an integer", strict, `{"id":"b-1","count":1.5}`, "/properties/count"},
		{"string for an integer", strict, `{"id":"b-1","count":"2"}`, "/properties/count"},
		{"below minimum", strict, `{"id":"b-1","count":0}`, "minimum"},
		{"wrong item type", strict, `{"id":"b-1","tags":[1]}`, "/properties/tags/items"},
		{"null for a string", strict, `{"id":null}`, "/properties/id"},
		{"missing required", strict, `{"count":1}`, `missing properties: ["id"]`},
		{"empty object lacks the required", strict, `{}`, `missing properties: ["id"]`},
		{"spaced empty object lacks the required", strict, `{ }`, `missing properties: ["id"]`},
		{"null is the empty object", strict, `null`, `missing properties: ["id"]`},
		{"absent is the empty object", strict, ``, `missing properties: ["id"]`},
		{"extra property when additionalProperties is false", strict, `{"id":"b-1","owner":"u-bob"}`, `additional properties ["owner"]`},
		{"extra property allowed by default", open, `{"id":"b-1","owner":"u-bob"}`, ""},
		{"nothing required", open, `null`, ""},
		{"array", open, `[{"id":"b-1"}]`, "must be a JSON object"},
		{"string", open, `"b-1"`, "must be a JSON object"},
		{"number", open, `42`, "must be a JSON object"},
		{"not JSON", open, `{id: "b-1"}`, "not valid JSON"},
		{"two values", open, `{} {}`, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := registry.New([]string{"booking"})
			c := cancel()
			c.InputSchema = json.RawMessage(tt.schema)
			if err := r.Add(c); err != nil {
				t.Fatal(err)
			}
			e, _ := r.Lookup(c.Name)
			err := e.ValidateArgs(json.RawMessage(tt.args))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("ValidateArgs(%s) = %v, want nil", tt.args, err)
			case tt.want != "" && err == nil:
				t.Fatalf("ValidateArgs(%s) accepted the arguments", tt.args)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("ValidateArgs(%s) = %v, want it to mention %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestNoArgs(t *testing.T) {
	tests := []struct {
		raw  string
		want bool
	}{
		{"", true},
		{"null", true},
		{" \tnull\n", true},
		{"   ", true},
		{"{}", false},
		{`"null"`, false},
		{"nullx", false},
		{"[]", false},
		{"0", false},
	}
	for _, tt := range tests {
		if got := registry.NoArgs(json.RawMessage(tt.raw)); got != tt.want {
			t.Errorf("NoArgs(%q) = %v, want %v", tt.raw, got, tt.want)
		}
	}
	if !registry.NoArgs(nil) {
		t.Error("NoArgs(nil) = false")
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[registry.Kind]string{registry.Read: "read", registry.Action: "action", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// Arguments nested deeper than MaxArgsDepth are refused before they are
// decoded, even where the schema lets a value be anything; brackets inside
// strings are text, not nesting.
func TestValidateArgsDepth(t *testing.T) {
	reg := registry.New([]string{"booking"})
	c := cancel()
	c.InputSchema = json.RawMessage(`{"type":"object","properties":{"any":{}}}`)
	if err := reg.Add(c); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup(c.Name)
	nest := func(n int) json.RawMessage {
		// {"any": + n-1 arrays: the object is one level.
		return json.RawMessage(`{"any":` + strings.Repeat("[", n-1) + strings.Repeat("]", n-1) + `}`)
	}
	if err := e.ValidateArgs(nest(registry.MaxArgsDepth)); err != nil {
		t.Errorf("%d levels: %v", registry.MaxArgsDepth, err)
	}
	for _, n := range []int{registry.MaxArgsDepth + 1, 100_000} {
		err := e.ValidateArgs(nest(n))
		if err == nil || !strings.Contains(err.Error(), "nest deeper than 32 levels") {
			t.Errorf("%d levels: %v", n, err)
		}
	}
	text := json.RawMessage(`{"any":"` + strings.Repeat("[{", 1000) + `\"]"}`)
	if err := e.ValidateArgs(text); err != nil {
		t.Errorf("brackets in a string counted as nesting: %v", err)
	}
}

// Arguments holding more than MaxArgsValues members and elements are
// refused before they are decoded; commas inside strings do not count.
func TestValidateArgsValues(t *testing.T) {
	reg := registry.New([]string{"booking"})
	c := cancel()
	c.InputSchema = json.RawMessage(`{"type":"object","properties":{"any":{}}}`)
	if err := reg.Add(c); err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup(c.Name)
	list := func(elem string, n int) json.RawMessage {
		return json.RawMessage(`{"any":[` + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + `]}`)
	}
	if err := e.ValidateArgs(list("1", registry.MaxArgsValues-10)); err != nil {
		t.Errorf("%d numbers: %v", registry.MaxArgsValues-10, err)
	}
	err := e.ValidateArgs(list("{}", 200_000))
	if err == nil || !strings.Contains(err.Error(), "hold more than 10000 values") {
		t.Errorf("200000 elements: %v", err)
	}
	text := json.RawMessage(`{"any":"` + strings.Repeat(",", 100_000) + `"}`)
	if err := e.ValidateArgs(text); err != nil {
		t.Errorf("commas in a string counted as values: %v", err)
	}
}

// A string longer than any the schema accepts is refused from the raw
// bytes, naming the member, before anything is decoded; strings within
// reach of the bound still meet the validator, which counts characters.
func TestValidateArgsLongString(t *testing.T) {
	reg := registry.New([]string{"booking"})
	search := cancel()
	search.Name = "platform.search"
	search.InputSchema = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":500},
		"tags":{"type":"array","items":{"type":"string","maxLength":20}}},"additionalProperties":false}`)
	open := cancel()
	open.InputSchema = json.RawMessage(`{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string","maxLength":5}}}}`)
	for _, c := range []registry.Capability{search, open} {
		if err := reg.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := reg.Lookup("platform.search")
	huge := strings.Repeat("word ", 64_000)
	err := e.ValidateArgs(json.RawMessage(`{"query":"` + huge + `"}`))
	if err == nil || err.Error() != `"query" holds a string of 320000 bytes: more than 500 characters, the longest any string of platform.search may have` {
		t.Errorf("huge query: %v", err)
	}
	err = e.ValidateArgs(json.RawMessage(`{"tags":["a","` + huge + `"]}`))
	if err == nil || !strings.Contains(err.Error(), `"tags" holds a string of 320000 bytes`) {
		t.Errorf("huge string in an array: %v", err)
	}
	if err := e.ValidateArgs(json.RawMessage(`{"query":"` + strings.Repeat("é", 500) + `"}`)); err != nil {
		t.Errorf("500 two-byte characters: %v", err)
	}
	err = e.ValidateArgs(json.RawMessage(`{"query":"` + strings.Repeat("é", 501) + `"}`))
	if err == nil || !strings.Contains(err.Error(), "more than 500") {
		t.Errorf("501 characters: %v", err)
	}
	// An open object takes keys of any length: no string bound applies.
	o, _ := reg.Lookup(open.Name)
	if err := o.ValidateArgs(json.RawMessage(`{"labels":{"` + strings.Repeat("k", 10_000) + `":"v"}}`)); err != nil {
		t.Errorf("a long key of an open object: %v", err)
	}
}
