package registry

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The gate checks the arguments and the result of every call against their
// schemas. The general validator walks the schema with reflection and
// allocates as it goes: for an SDK-inferred record of seven strings it took
// three times as long as decoding the result, and the output check was the
// largest single cost of a tool call that reads one row. Schemas the SDK
// infers use only a handful of keywords, so each is also compiled into a
// fastCheck: a plain walk over the decoded value.
//
// A fastCheck only ever says yes when the general validator would. When it
// says no, the general validator runs and gives both the verdict and the
// message, so a schema feature missing here can cost speed, never
// correctness; a schema using any keyword not handled here gets no
// fastCheck at all.
type fastCheck struct {
	never bool  // the false schema: no value is valid
	types uint8 // one bit per JSON type (typeNull, ...); 0 allows any
	enum  []string

	minimum, maximum, exclusiveMinimum, exclusiveMaximum *float64

	minLength, maxLength, minItems, maxItems, minProps, maxProps *int

	items      *fastCheck // nil: any items
	properties map[string]*fastCheck
	required   []string
	// additional checks members not in properties; nil allows any.
	additional *fastCheck
}

const (
	typeNull uint8 = 1 << iota
	typeBoolean
	typeInteger
	typeNumber // includes integers, as in JSON Schema
	typeString
	typeArray
	typeObject
)

var typeBits = map[string]uint8{
	"null": typeNull, "boolean": typeBoolean, "integer": typeInteger, "number": typeNumber | typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject,
}

// fastKeywords are the Schema fields compileFast understands (annotations
// included: the validator ignores them). Any other field set in a schema
// sends that schema to the general validator alone. Naming the supported
// fields, not the unsupported ones, keeps this sound when the library
// grows a keyword.
var fastKeywords = map[string]bool{
	"Schema": true, "Comment": true, "Title": true, "Description": true, "Default": true,
	"Deprecated": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Format": true,
	"ContentEncoding": true, "ContentMediaType": true, "PropertyOrder": true, "Extra": true,
	"Defs": true, "Definitions": true, // unused without $ref, which is not supported
	"Type": true, "Types": true, "Enum": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"MinLength": true, "MaxLength": true,
	"Items": true, "MinItems": true, "MaxItems": true,
	"MinProperties": true, "MaxProperties": true, "Required": true, "Properties": true,
	"AdditionalProperties": true,
	"Not":                  true, // only as the false schema, {"not": {}}
}

// errNotFast explains why a schema gets no fastCheck.
type errNotFast struct{ path, keyword string }

func (e errNotFast) Error() string {
	return fmt.Sprintf("%s uses %s, which only the general validator checks", e.path, e.keyword)
}

// compileFast compiles s, or says (with the place and keyword) why it
// cannot.
func compileFast(s *jsonschema.Schema, path string) (*fastCheck, error) {
	if s.Not != nil {
		rest := *s
		rest.Not = nil
		if !isEmpty(s.Not) || !reflect.ValueOf(rest).IsZero() {
			return nil, errNotFast{path, "not"}
		}
		return &fastCheck{never: true}, nil
	}
	if !dialects[s.Schema] {
		return nil, errNotFast{path, fmt.Sprintf("the dialect %q", s.Schema)}
	}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if f := v.Type().Field(i); !fastKeywords[f.Name] && !v.Field(i).IsZero() {
			return nil, errNotFast{path, keywordName(f)}
		}
	}
	c := &fastCheck{
		minimum: s.Minimum, maximum: s.Maximum, exclusiveMinimum: s.ExclusiveMinimum, exclusiveMaximum: s.ExclusiveMaximum,
		minLength: s.MinLength, maxLength: s.MaxLength, minItems: s.MinItems, maxItems: s.MaxItems,
		minProps: s.MinProperties, maxProps: s.MaxProperties,
		required: s.Required,
	}
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t == "" {
			continue
		}
		bit, ok := typeBits[t]
		if !ok {
			return nil, errNotFast{path, fmt.Sprintf("the unknown type %q", t)}
		}
		c.types |= bit
	}
	if s.Type == "" && s.Types != nil && c.types == 0 {
		c.never = true // "type": [] allows nothing
	}
	if s.Enum != nil {
		for _, e := range s.Enum {
			str, ok := e.(string)
			if !ok {
				return nil, errNotFast{path, "a non-string enum"}
			}
			c.enum = append(c.enum, str)
		}
		if len(c.enum) == 0 {
			c.never = true
		}
	}
	var err error
	if s.Items != nil {
		if c.items, err = compileFast(s.Items, path+"/items"); err != nil {
			return nil, err
		}
	}
	if s.AdditionalProperties != nil {
		if c.additional, err = compileFast(s.AdditionalProperties, path+"/additionalProperties"); err != nil {
			return nil, err
		}
	}
	if len(s.Properties) > 0 {
		c.properties = make(map[string]*fastCheck, len(s.Properties))
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			if c.properties[name], err = compileFast(s.Properties[name], path+"/properties/"+name); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// keywordName is the JSON name of a Schema field, for messages.
func keywordName(f reflect.StructField) string {
	if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" && n != "-" {
		return n
	}
	return f.Name
}

// accepts reports whether v, a value as encoding/json decodes into any,
// is certainly valid. False means "ask the general validator".
func (c *fastCheck) accepts(v any) bool {
	if c.never {
		return false
	}
	switch x := v.(type) {
	case nil:
		return c.allows(typeNull) && c.enum == nil
	case bool:
		return c.allows(typeBoolean) && c.enum == nil
	case float64:
		t := typeNumber
		if _, frac := math.Modf(x); frac == 0 {
			t = typeInteger
		}
		return c.allows(t) && c.enum == nil && c.inRange(x)
	case string:
		if !c.allows(typeString) || (c.enum != nil && !slices.Contains(c.enum, x)) {
			return false
		}
		if c.minLength != nil || c.maxLength != nil {
			return within(utf8.RuneCountInString(x), c.minLength, c.maxLength)
		}
		return true
	case []any:
		if !c.allows(typeArray) || c.enum != nil || !within(len(x), c.minItems, c.maxItems) {
			return false
		}
		if c.items != nil {
			for _, item := range x {
				if !c.items.accepts(item) {
					return false
				}
			}
		}
		return true
	case map[string]any:
		return c.allows(typeObject) && c.enum == nil && c.acceptsObject(x)
	}
	return false
}

func (c *fastCheck) allows(t uint8) bool { return c.types == 0 || c.types&t != 0 }

func (c *fastCheck) inRange(x float64) bool {
	return (c.minimum == nil || x >= *c.minimum) && (c.maximum == nil || x <= *c.maximum) &&
		(c.exclusiveMinimum == nil || x > *c.exclusiveMinimum) && (c.exclusiveMaximum == nil || x < *c.exclusiveMaximum)
}

// within reports whether lo <= n <= hi, a nil bound being no bound.
func within(n int, lo, hi *int) bool {
	return (lo == nil || n >= *lo) && (hi == nil || n <= *hi)
}

func (c *fastCheck) acceptsObject(m map[string]any) bool {
	if !within(len(m), c.minProps, c.maxProps) {
		return false
	}
	for _, name := range c.required {
		if _, ok := m[name]; !ok {
			return false
		}
	}
	for name, v := range m {
		sub, declared := c.properties[name]
		if !declared {
			sub = c.additional
		}
		if sub != nil && !sub.accepts(v) {
			return false
		}
	}
	return true
}

// FastCheckable reports whether the gate checks values of the JSON Schema
// raw with its fast walk (nil), or only with the general validator, and
// then why: the place and keyword. Schemas the SDK infers are all
// fast-checkable; a plugin whose schema is not still works, each call
// paying the slower check.
func FastCheckable(raw json.RawMessage) error {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("not a JSON Schema: %w", err)
	}
	_, err := compileFast(&s, "#")
	return err
}

// validate checks the decoded value v with fast when it vouches for v,
// and otherwise (or with no fast check) with the general validator, whose
// verdict and message stand.
func validate(fast *fastCheck, full *jsonschema.Resolved, v map[string]any) error {
	if fast != nil && fast.accepts(v) {
		return nil
	}
	return full.Validate(v)
}
