package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// fastSchemas are shapes the SDK infers (records, optional and nullable
// fields, slices of records, maps, bounds from capgate tags, enums) and the
// keywords around them, each with values on both sides of every rule.
var fastSchemas = []struct {
	name   string
	schema string
	valid  []string
	bad    []string
}{
	{
		name:   "record",
		schema: `{"type":"object","required":["id","start"],"properties":{"id":{"type":"string"},"start":{"type":"string","format":"date-time"},"note":{"type":"string","description":"free text"}},"additionalProperties":false}`,
		valid:  []string{`{"id":"a","start":"x"}`, `{"id":"","start":"","note":"n"}`},
		bad:    []string{`{"id":"a"}`, `{"id":"a","start":"x","other":1}`, `{"id":1,"start":"x"}`, `{"id":null,"start":"x"}`, `[]`, `"s"`, `null`},
	},
	{
		name:   "bounds",
		schema: `{"type":"object","properties":{"q":{"type":"string","minLength":2,"maxLength":3},"n":{"type":"integer","minimum":0,"maximum":10},"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}}}`,
		valid:  []string{`{"q":"ab"}`, `{"q":"äöü"}`, `{"n":0}`, `{"n":10}`, `{"n":3.0}`, `{"x":0.5}`, `{"extra":[1,{"a":null}]}`},
		bad:    []string{`{"q":"a"}`, `{"q":"abcd"}`, `{"q":"äöüß"}`, `{"n":-1}`, `{"n":11}`, `{"n":1.5}`, `{"n":"1"}`, `{"x":0}`, `{"x":1}`},
	},
	{
		name:   "slices",
		schema: `{"type":"object","properties":{"items":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"object","required":["v"],"properties":{"v":{"type":"boolean"}}}}}}`,
		valid:  []string{`{"items":[{"v":true}]}`, `{"items":[{"v":false},{"v":true,"w":1}]}`, `{}`},
		bad:    []string{`{"items":[]}`, `{"items":[{"v":true},{"v":true},{"v":true}]}`, `{"items":[{}]}`, `{"items":[{"v":1}]}`, `{"items":{}}`, `{"items":null}`},
	},
	{
		name:   "maps",
		schema: `{"type":"object","properties":{"tags":{"type":"object","maxProperties":2,"additionalProperties":{"type":"string","maxLength":4}}},"minProperties":1}`,
		valid:  []string{`{"tags":{}}`, `{"tags":{"a":"x","b":"abcd"}}`},
		bad:    []string{`{}`, `{"tags":{"a":"x","b":"y","c":"z"}}`, `{"tags":{"a":"abcde"}}`, `{"tags":{"a":1}}`},
	},
	{
		name:   "nullable and enum",
		schema: `{"type":"object","properties":{"status":{"type":"string","enum":["active","cancelled"]},"at":{"type":["null","string"]},"any":{},"never":false}}`,
		valid:  []string{`{"status":"active"}`, `{"at":null}`, `{"at":"t"}`, `{"any":[{"deep":[null]}]}`},
		bad:    []string{`{"status":"gone"}`, `{"status":1}`, `{"at":1}`, `{"never":null}`, `{"never":{}}`},
	},
	{
		name:   "draft-07",
		schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"ids":{"type":"array","items":{"type":"string"}}}}`,
		valid:  []string{`{"ids":[]}`, `{"ids":["a","b"]}`},
		bad:    []string{`{"ids":[1]}`, `{"ids":"a"}`},
	},
}

func resolve(t testing.TB, raw string) (*jsonschema.Schema, *jsonschema.Resolved) {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema %s: resolve: %v", raw, err)
	}
	return &s, res
}

func decode(t testing.TB, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("value %s: %v", raw, err)
	}
	return v
}

// TestFastCheckAgreesWithValidator: on SDK-shaped schemas the fast walk
// accepts every value the validator accepts (so valid calls never pay the
// slow path) and no value it refuses.
func TestFastCheckAgreesWithValidator(t *testing.T) {
	for _, tc := range fastSchemas {
		t.Run(tc.name, func(t *testing.T) {
			s, full := resolve(t, tc.schema)
			fast, err := compileFast(s, "#")
			if err != nil {
				t.Fatalf("compileFast: %v", err)
			}
			for _, raw := range tc.valid {
				if err := full.Validate(decode(t, raw)); err != nil {
					t.Fatalf("test data: validator refuses %s: %v", raw, err)
				}
				if !fast.accepts(decode(t, raw)) {
					t.Errorf("fast check refuses valid %s", raw)
				}
			}
			for _, raw := range tc.bad {
				if err := full.Validate(decode(t, raw)); err == nil {
					t.Fatalf("test data: validator accepts %s", raw)
				}
				if fast.accepts(decode(t, raw)) {
					t.Errorf("fast check accepts invalid %s", raw)
				}
			}
		})
	}
}

// TestFastCheckableNamesTheKeyword: a schema the walk does not cover says
// where and why, and gets no fast check.
func TestFastCheckableNamesTheKeyword(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"code":{"type":"string","pattern":"^[a-z]+$"}}}`, "#/properties/code uses pattern"},
		{`{"type":"object","anyOf":[{"required":["a"]},{"required":["b"]}]}`, "# uses anyOf"},
		{`{"type":"object","$defs":{"n":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, "#/properties/a uses $ref"},
		{`{"type":"object","properties":{"a":{"not":{"type":"string"}}}}`, "#/properties/a uses not"},
		{`{"type":"object","properties":{"a":{"enum":[1,2]}}}`, "#/properties/a uses a non-string enum"},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"const":1}}}}`, "#/properties/a/items uses const"},
		{`{"type":"object","properties":{"a":{"type":"text"}}}`, `#/properties/a uses the unknown type "text"`},
		{`{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`, "#/properties/a uses uniqueItems"},
	} {
		err := FastCheckable(json.RawMessage(tc.schema))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("FastCheckable(%s) = %v, want %q…", tc.schema, err, tc.want)
		}
	}
	for _, tc := range fastSchemas {
		if err := FastCheckable(json.RawMessage(tc.schema)); err != nil {
			t.Errorf("%s: FastCheckable = %v", tc.name, err)
		}
	}
	if err := FastCheckable(json.RawMessage(`{`)); err == nil || !strings.Contains(err.Error(), "not a JSON Schema") {
		t.Errorf("FastCheckable({) = %v", err)
	}
}

// TestValidateWithoutFastCheck: a capability whose schema the walk does not
// cover is checked, and explained, by the validator alone.
func TestValidateWithoutFastCheck(t *testing.T) {
	r := New([]string{"p"})
	if err := r.Add(Capability{
		Name: "p.code", Kind: Read, Pack: "p", Plugin: "p",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","maxLength":8,"pattern":"^[a-z]+$"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}`),
	}); err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("p.code")
	if e.inputFast != nil || e.outputFast != nil {
		t.Fatal("schemas with pattern and multipleOf got a fast check")
	}
	if err := e.ValidateArgs(json.RawMessage(`{"code":"abc"}`)); err != nil {
		t.Errorf("valid arguments: %v", err)
	}
	if err := e.ValidateArgs(json.RawMessage(`{"code":"ABC"}`)); err == nil || !strings.Contains(err.Error(), "pattern") {
		t.Errorf("arguments against the pattern: %v", err)
	}
	if err := e.ValidateResult(json.RawMessage(`{"n":4}`)); err != nil {
		t.Errorf("valid result: %v", err)
	}
	if err := e.ValidateResult(json.RawMessage(`{"n":3}`)); err == nil || !strings.Contains(err.Error(), "multipleOf") {
		t.Errorf("result not a multiple: %v", err)
	}
}

// TestRefusalsKeepTheValidatorsMessage: when the fast check refuses, the
// agent (for arguments) and the log (for results) read the validator's
// explanation, not a bare "invalid".
func TestRefusalsKeepTheValidatorsMessage(t *testing.T) {
	r := New([]string{"p"})
	if err := r.Add(Capability{
		Name: "p.get", Kind: Read, Pack: "p", Plugin: "p",
		InputSchema:  json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string","maxLength":4}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(fastSchemas[0].schema),
	}); err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("p.get")
	if e.inputFast == nil || e.outputFast == nil {
		t.Fatal("SDK-shaped schemas got no fast check")
	}
	for _, tc := range []struct {
		check func(json.RawMessage) error
		raw   string
		want  string
	}{
		{e.ValidateArgs, `{"id":"abcde"}`, "maxLength"},
		{e.ValidateArgs, `{"name":"a"}`, "unexpected additional properties"},
		{e.ValidateResult, `{"id":"a"}`, `missing properties: ["start"]`},
		{e.ValidateResult, `{"id":"a","start":7}`, `type: 7 has type "integer", want "string"`},
	} {
		if err := tc.check(json.RawMessage(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.raw, err, tc.want)
		}
	}
}

// FuzzFastCheck compares the fast walk with the validator on arbitrary
// schemas and values: whenever a schema compiles to a fast check, the two
// must agree on every value. Agreeing on acceptance is what correctness
// needs; agreeing on refusal keeps valid calls off the slow path.
func FuzzFastCheck(f *testing.F) {
	for _, tc := range fastSchemas {
		for _, v := range append(tc.valid, tc.bad...) {
			f.Add(tc.schema, v)
		}
	}
	f.Fuzz(func(t *testing.T, schema, value string) {
		var s jsonschema.Schema
		if json.Unmarshal([]byte(schema), &s) != nil {
			return
		}
		fast, err := compileFast(&s, "#")
		if err != nil {
			return
		}
		full, err := s.Resolve(nil)
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(value), &v) != nil {
			return
		}
		verr := full.Validate(v)
		if got := fast.accepts(v); got != (verr == nil) {
			t.Fatalf("schema %s, value %s: fast check says %v, validator says %v", schema, value, got, verr)
		}
	})
}
