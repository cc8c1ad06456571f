package sdk

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/internal/registry"
)

// Every string, array and map in a capability's input is bounded in its
// schema, so an agent reads the limits in tools/list and the host refuses
// an over-limit argument before the plugin sees it. A field that declares
// no bound of its own gets these.
const (
	// DefaultMaxLength bounds a string, in characters.
	DefaultMaxLength = 4096
	// DefaultMaxItems bounds an array (a slice).
	DefaultMaxItems = 100
	// DefaultMaxProperties bounds an object without fixed properties (a map).
	DefaultMaxProperties = 100
)

// BoundsTag is the struct tag a field of a capability's input type declares
// its bounds with, as comma-separated key=value pairs:
//
//	Query string `json:"query" capgate:"maxLength=500"`
//	IDs   []string `json:"ids" capgate:"minItems=1,maxItems=20"`
//	Limit int    `json:"limit,omitempty" capgate:"minimum=0,maximum=1000"`
//
// The keys are the JSON Schema keywords minLength and maxLength (strings,
// in characters), minItems and maxItems (arrays), maxProperties (maps), and
// minimum and maximum (numbers). A key that does not fit the field's type is
// a declaration error: sdk.Add panics naming the field.
//
// The word sensitive, alone or among the pairs, marks a field whose value
// the host's audit trail never keeps (it records "[redacted]" instead):
//
//	Password string `json:"password" capgate:"sensitive,maxLength=128"`
//
// header=<Name> asks clients to mirror the argument into the HTTP header
// Mcp-Param-<Name> (MCP's x-mcp-header, Streamable HTTP from 2026-07-28),
// so a load balancer or gateway can route on it without reading the body;
// the host refuses a call whose header and argument disagree:
//
//	Region string `json:"region" capgate:"header=Region,maxLength=32"`
//
// Only a string, integer or boolean field reached from the input through
// struct fields alone (not inside a slice or map) may carry one, the name
// is an HTTP field-name token, and no two fields name one header, whatever
// the case: sdk.Add panics otherwise.
const BoundsTag = "capgate"

// boundInput declares the bounds of input schema s of Go type t: the
// fields' BoundsTag values, and the defaults wherever none is given.
func boundInput(s *jsonschema.Schema, t reflect.Type) error {
	return bound(s, t, "", "(input)")
}

func bound(s *jsonschema.Schema, t reflect.Type, tag, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tag != "" {
		if err := applyBounds(s, tag, path); err != nil {
			return err
		}
	}
	switch {
	case hasType(s, "string"):
		if s.MaxLength == nil {
			s.MaxLength = jsonschema.Ptr(DefaultMaxLength)
		}
	case hasType(s, "array"):
		if s.MaxItems == nil {
			s.MaxItems = jsonschema.Ptr(DefaultMaxItems)
		}
		if s.Items != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			return bound(s.Items, t.Elem(), "", path+"[]")
		}
	case hasType(s, "object") && t.Kind() == reflect.Map:
		if s.MaxProperties == nil {
			s.MaxProperties = jsonschema.Ptr(DefaultMaxProperties)
		}
		if s.AdditionalProperties != nil {
			return bound(s.AdditionalProperties, t.Elem(), "", path+"{}")
		}
	case hasType(s, "object") && t.Kind() == reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			name, ok := jsonName(f)
			if !ok {
				continue
			}
			fs := s.Properties[name]
			if fs == nil {
				continue
			}
			if err := bound(fs, f.Type, f.Tag.Get(BoundsTag), path+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonName is the property a struct field becomes, as encoding/json (and
// the schema inference) names it; false for a field that is not one.
func jsonName(f reflect.StructField) (string, bool) {
	if f.Anonymous || !f.IsExported() {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name, true
	}
	return f.Name, true
}

func hasType(s *jsonschema.Schema, typ string) bool {
	return s.Type == typ || slices.Contains(s.Types, typ)
}

// applyBounds sets the bounds a BoundsTag value declares on s.
func applyBounds(s *jsonschema.Schema, tag, path string) error {
	for _, kv := range strings.Split(tag, ",") {
		if strings.TrimSpace(kv) == "sensitive" {
			if s.Extra == nil {
				s.Extra = map[string]any{}
			}
			s.Extra[registry.SensitiveKeyword] = true
			continue
		}
		key, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || val == "" {
			return fmt.Errorf("field %s: %s tag %q: want key=value pairs such as maxLength=100", path, BoundsTag, tag)
		}
		fits := func(typ string) error {
			if !hasType(s, typ) {
				return fmt.Errorf("field %s: %s applies to a JSON %s, this field's schema type is %s", path, key, typ, typeOf(s))
			}
			return nil
		}
		count := func(typ string) (*int, error) {
			if err := fits(typ); err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("field %s: %s=%s: want a whole number of 0 or more", path, key, val)
			}
			return &n, nil
		}
		var err error
		switch key {
		case "minLength":
			s.MinLength, err = count("string")
		case "maxLength":
			s.MaxLength, err = count("string")
		case "minItems":
			s.MinItems, err = count("array")
		case "maxItems":
			s.MaxItems, err = count("array")
		case "maxProperties":
			s.MaxProperties, err = count("object")
		case "header":
			// Checked with the whole schema (registry.CheckParamHeaders):
			// name, type, place and uniqueness.
			if s.Extra == nil {
				s.Extra = map[string]any{}
			}
			s.Extra[registry.HeaderKeyword] = val
		case "minimum", "maximum":
			if !hasType(s, "number") && !hasType(s, "integer") {
				return fmt.Errorf("field %s: %s applies to a number, this field's schema type is %s", path, key, typeOf(s))
			}
			f, perr := strconv.ParseFloat(val, 64)
			if perr != nil {
				return fmt.Errorf("field %s: %s=%s: want a number", path, key, val)
			}
			if key == "minimum" {
				s.Minimum = &f
			} else {
				s.Maximum = &f
			}
		default:
			return fmt.Errorf("field %s: unknown %s key %q (known: sensitive, header, minLength, maxLength, minItems, maxItems, maxProperties, minimum, maximum)", path, BoundsTag, key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func typeOf(s *jsonschema.Schema) string {
	switch {
	case s.Type != "":
		return strconv.Quote(s.Type)
	case len(s.Types) > 0:
		return strconv.Quote(strings.Join(s.Types, "|"))
	}
	return "unconstrained"
}
