package registry_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/registry"
)

func TestUnboundedInputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   []string // nil: bounded everywhere
	}{
		{"no properties, closed", `{"type":"object","additionalProperties":false}`, nil},
		{"bounded scalars", `{"type":"object","additionalProperties":false,"properties":{
			"query":{"type":"string","maxLength":500},"limit":{"type":"integer","minimum":0},"on":{"type":"boolean"},"x":{"type":"null"}}}`, nil},
		{"unbounded string", `{"type":"object","additionalProperties":false,"properties":{"query":{"type":"string"}}}`,
			[]string{"query: string without maxLength"}},
		{"enum and const strings are bounded", `{"type":"object","additionalProperties":false,"properties":{
			"kind":{"type":"string","enum":["a","b"]},"v":{"type":"string","const":"x"},"n":{"enum":[1,"two"]}}}`, nil},
		{"unbounded array", `{"type":"object","additionalProperties":false,"properties":{"tags":{"type":"array","items":{"type":"string","maxLength":9}}}}`,
			[]string{"tags: array without maxItems"}},
		{"nullable slice, bounded", `{"type":"object","additionalProperties":false,"properties":{"ids":{"type":["null","array"],"maxItems":20,"items":{"type":"string","maxLength":64}}}}`, nil},
		{"string in a bounded array", `{"type":"object","additionalProperties":false,"properties":{"tags":{"type":"array","maxItems":5,"items":{"type":"string"}}}}`,
			[]string{"tags[]: string without maxLength"}},
		{"open root object", `{"type":"object","properties":{"id":{"type":"string","maxLength":10}}}`,
			[]string{"(input): object without maxProperties (additional properties allowed)"}},
		{"open map with unbounded values", `{"type":"object","additionalProperties":false,"properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			[]string{"labels: object without maxProperties (additional properties allowed)", "labels{}: string without maxLength"}},
		{"bounded map", `{"type":"object","additionalProperties":false,"properties":{"labels":{"type":"object","maxProperties":10,"additionalProperties":{"type":"string","maxLength":100}}}}`, nil},
		{"closed nested object", `{"type":"object","additionalProperties":false,"properties":{"where":{"type":"object","additionalProperties":false,"properties":{"city":{"type":"string"}}}}}`,
			[]string{"where.city: string without maxLength"}},
		{"additionalProperties false but patternProperties open", `{"type":"object","additionalProperties":false,"patternProperties":{"^x-":{"type":"string","maxLength":5}}}`,
			[]string{"(input): object without maxProperties (additional properties allowed)"}},
		{"a value of any type", `{"type":"object","additionalProperties":false,"properties":{"data":{"description":"anything"},"list":{"type":"array","maxItems":3,"items":true}}}`,
			[]string{"data: any JSON value (no type) without maxLength, maxItems, maxProperties", "list[]: any JSON value (no type) without maxLength, maxItems, maxProperties"}},
		{"array of closed objects", `{"type":"object","additionalProperties":false,"properties":{"slots":{"type":"array","maxItems":10,"items":{
			"type":"object","additionalProperties":false,"properties":{"from":{"type":"string","maxLength":30},"note":{"type":"string"}}}}}}`,
			[]string{"slots[].note: string without maxLength"}},
		{"tuples", `{"type":"object","additionalProperties":false,"properties":{
			"pair":{"type":"array","prefixItems":[{"type":"string","maxLength":3},{"type":"string"}],"items":false},
			"open":{"type":"array","prefixItems":[{"type":"integer"}]},
			"old":{"type":"array","items":[{"type":"integer"}],"additionalItems":false}}}`,
			[]string{"open: array without maxItems", "pair[1]: string without maxLength"}},
		{"anyOf branches each bounded", `{"type":"object","additionalProperties":false,"properties":{"note":{"anyOf":[{"type":"string","maxLength":80},{"type":"null"}]}}}`, nil},
		{"anyOf with an unbounded branch", `{"type":"object","additionalProperties":false,"properties":{"v":{"oneOf":[{"type":"integer"},{"type":"string"}]}}}`,
			[]string{"v: string without maxLength"}},
		{"a bound on the parent covers the branches", `{"type":"object","additionalProperties":false,"properties":{"v":{"type":"string","maxLength":10,"anyOf":[{"pattern":"^a"},{"pattern":"^b"}]}}}`, nil},
		{"a bound in an allOf sibling", `{"type":"object","additionalProperties":false,"properties":{"v":{"type":"string","allOf":[{"maxLength":10},{"minLength":1}]}}}`, nil},
		{"an allOf branch declares the type", `{"type":"object","additionalProperties":false,"properties":{"v":{"allOf":[{"type":"array"}]}}}`,
			[]string{"v: array without maxItems"}},
		{"$defs references", `{"type":"object","additionalProperties":false,"$defs":{"Name":{"type":"string","maxLength":50},"Free":{"type":"string"}},
			"properties":{"a":{"$ref":"#/$defs/Name"},"b":{"$ref":"#/$defs/Free"},"c":{"type":"array","maxItems":2,"items":{"$ref":"#/$defs/Free"}}}}`,
			[]string{"b: string without maxLength", "c[]: string without maxLength"}},
		{"an unused $defs entry is no input", `{"type":"object","additionalProperties":false,"$defs":{"Free":{"type":"string"}}}`, nil},
		{"a recursive $ref is checked once", `{"type":"object","additionalProperties":false,"$defs":{"Node":{"type":"object","additionalProperties":false,
			"properties":{"label":{"type":"string"},"kids":{"type":"array","maxItems":4,"items":{"$ref":"#/$defs/Node"}}}}},
			"properties":{"tree":{"$ref":"#/$defs/Node"}}}`,
			[]string{"tree.label: string without maxLength"}},
		{"a reference to the root", `{"type":"object","additionalProperties":false,"properties":{"self":{"$ref":"#"},"s":{"type":"string"}}}`,
			[]string{"s: string without maxLength"}},
		{"a reference not followed", `{"type":"object","additionalProperties":false,"properties":{"x":{"$ref":"#/properties/y"},"y":{"type":"integer"}}}`,
			[]string{`x: $ref "#/properties/y" not followed (only local #/$defs/… references are)`}},
		{"deep", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"object","additionalProperties":false,"properties":{
			"b":{"type":"array","maxItems":3,"items":{"type":"object","maxProperties":4,"additionalProperties":{"type":"array","maxItems":2,
			"items":{"type":"object","additionalProperties":false,"properties":{"c":{"type":"string"},"d":{"type":"array","items":{"type":"integer"}}}}}}}}}}}`,
			[]string{"a.b[]{}[].c: string without maxLength", "a.b[]{}[].d: array without maxItems"}},
		{"not JSON Schema", `{"type":3}`, []string{`(input): not a JSON Schema: invalid value for "type": "3"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := registry.UnboundedInputs(json.RawMessage(tc.schema))
			if !slices.Equal(got, tc.want) {
				t.Errorf("UnboundedInputs =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

// A schema with many gaps names the first MaxUnboundedListed and counts
// the rest.
func TestUnboundedInputsIsCapped(t *testing.T) {
	var props []string
	for i := range registry.MaxUnboundedListed + 5 {
		props = append(props, fmt.Sprintf(`"p%02d":{"type":"string"}`, i))
	}
	got := registry.UnboundedInputs(json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{` + strings.Join(props, ",") + `}}`))
	if len(got) != registry.MaxUnboundedListed+1 || got[0] != "p00: string without maxLength" || got[len(got)-1] != "and 5 more" {
		t.Errorf("UnboundedInputs = %q", got)
	}
}

func TestRegistryUnbounded(t *testing.T) {
	r := registry.New([]string{"booking"})
	for _, c := range []registry.Capability{
		{Name: "booking.get", Kind: registry.Read, Pack: "booking", Plugin: "desk",
			InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"id":{"type":"string","maxLength":64}}}`)},
		{Name: "booking.tag", Kind: registry.Action, Pack: "booking", Plugin: "raw",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array"}}}`)},
	} {
		if err := r.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	got := r.Unbounded()
	want := []registry.UnboundedCapability{{Name: "booking.tag", Plugin: "raw", Places: []string{
		"(input): object without maxProperties (additional properties allowed)", "tags: array without maxItems",
	}}}
	if len(got) != 1 || got[0].Name != want[0].Name || got[0].Plugin != want[0].Plugin || !slices.Equal(got[0].Places, want[0].Places) {
		t.Errorf("Unbounded = %+v, want %+v", got, want)
	}
}
