package sdk

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/internal/registry"
)

// inferred is a Go type's JSON Schema with the named struct types that
// refer to themselves moved to $defs, each with its Go type, so the
// bounds and the other passes over the type reach them too.
type inferred struct {
	root *jsonschema.Schema
	defs map[string]reflect.Type
}

// inferSchema infers t's JSON Schema. Inference alone refuses a type that
// contains itself (a tree, a linked list), which a schema says with a
// reference: each such struct type becomes one entry of $defs, named after
// the type, and every place that holds it a "$ref" to the entry.
func inferSchema(t reflect.Type) (inferred, error) {
	rec := recursiveTypes(t)
	if len(rec) == 0 {
		s, err := jsonschema.ForType(t, nil)
		return inferred{root: s}, err
	}
	names, err := defNames(rec)
	if err != nil {
		return inferred{}, err
	}
	refs := map[reflect.Type]*jsonschema.Schema{}
	for _, r := range rec {
		refs[r] = &jsonschema.Schema{Ref: "#/$defs/" + names[r]}
	}
	opts := &jsonschema.ForOptions{TypeSchemas: refs}
	defs := map[string]*jsonschema.Schema{}
	out := inferred{defs: map[string]reflect.Type{}}
	for _, r := range rec {
		d, err := structSchema(r, opts)
		if err != nil {
			return inferred{}, err
		}
		defs[names[r]] = d
		out.defs[names[r]] = r
	}
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	if _, self := refs[base]; self {
		out.root, err = structSchema(base, opts)
	} else {
		out.root, err = jsonschema.ForType(t, opts)
	}
	if err != nil {
		return inferred{}, err
	}
	out.root.Defs = defs
	nullableRefs(out.root)
	return out, nil
}

// structSchema infers the schema of struct type r itself, not the
// reference that stands for it: it is inferred through an unnamed struct
// with r's fields, which the references do not match.
func structSchema(r reflect.Type, opts *jsonschema.ForOptions) (s *jsonschema.Schema, err error) {
	var fields []reflect.StructField
	for i := range r.NumField() {
		if f := r.Field(i); f.IsExported() {
			fields = append(fields, f)
		}
	}
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("type %s refers to itself and cannot be described (%v)", r, p)
		}
	}()
	return jsonschema.ForType(reflect.StructOf(fields), opts)
}

// nullableRefs rewrites what inference makes of a pointer to a referenced
// type, a "$ref" with type ["null"] (which together admit nothing), into
// "null or the reference".
func nullableRefs(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.Ref != "" && len(s.Types) == 1 && s.Types[0] == "null" {
		ref := s.Ref
		s.Ref, s.Types = "", nil
		s.AnyOf = []*jsonschema.Schema{{Type: "null"}, {Ref: ref}}
	}
	eachSchema(s, nullableRefs)
}

// eachSchema calls f on the schemas directly nested in s that inference
// produces.
func eachSchema(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	for _, c := range s.Properties {
		f(c)
	}
	for _, c := range s.Defs {
		f(c)
	}
	for _, c := range s.AnyOf {
		f(c)
	}
	if s.Items != nil {
		f(s.Items)
	}
	if s.AdditionalProperties != nil {
		f(s.AdditionalProperties)
	}
}

// recursiveTypes lists, in a stable order, the named struct types reachable
// from t that contain themselves.
func recursiveTypes(t reflect.Type) []reflect.Type {
	var (
		out     []reflect.Type
		onPath  = map[reflect.Type]bool{}
		visited = map[reflect.Type]bool{}
	)
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if onPath[t] {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
			return
		}
		if visited[t] || t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
			return
		}
		visited[t] = true
		switch t.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			walk(t.Elem())
		case reflect.Struct:
			if t.Name() != "" {
				onPath[t] = true
				defer delete(onPath, t)
			}
			for _, f := range reflect.VisibleFields(t) {
				if _, ok := jsonName(f); ok {
					walk(f.Type)
				}
			}
		}
	}
	walk(t)
	return out
}

// defNames names each type's $defs entry after the type, and refuses two
// types of one name from different packages.
func defNames(types []reflect.Type) (map[reflect.Type]string, error) {
	names := map[reflect.Type]string{}
	by := map[string]reflect.Type{}
	for _, t := range types {
		n := t.Name()
		if i := strings.IndexByte(n, '['); i >= 0 {
			n = n[:i] // a generic type: its name without the arguments
		}
		if prev, dup := by[n]; dup {
			return nil, fmt.Errorf("types %s and %s both refer to themselves under one name", prev, t)
		}
		by[n], names[t] = t, n
	}
	return names, nil
}

// schemaFor is T's schema as a capability declares it: inferred, with
// nulls left out of arrays and, for an input, its bounds and x-mcp-header
// annotations, all checked as the host will check them.
func schemaFor(t reflect.Type, input bool) ([]byte, error) {
	inf, err := inferSchema(t)
	if err != nil {
		return nil, err
	}
	s := inf.root
	// Arguments are a JSON object; a result may be any JSON value, which
	// MCP 2026-07-28 carries as structuredContent (older revisions as
	// text).
	if input && s.Type != "object" {
		return nil, fmt.Errorf("type must be a struct (a JSON object), its schema type is %q", s.Type)
	}
	arraysNotNull(s, t, map[reflect.Type]bool{})
	for name, dt := range inf.defs {
		arraysNotNull(s.Defs[name], dt, map[reflect.Type]bool{})
	}
	if input {
		if err := boundInput(s, t); err != nil {
			return nil, err
		}
		for _, name := range slices.Sorted(maps.Keys(inf.defs)) {
			if err := bound(s.Defs[name], inf.defs[name], "", "$defs."+name); err != nil {
				return nil, err
			}
		}
		if err := registry.CheckParamHeaders(s); err != nil {
			return nil, err
		}
	}
	return json.Marshal(s)
}

// declaredSchema checks an input schema a capability declares itself
// (Tool.InputSchema) as the host will: a JSON Schema object, every place
// bounded, its x-mcp-header annotations valid.
func declaredSchema(raw json.RawMessage) ([]byte, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("type must be \"object\", got %q", s.Type)
	}
	if places := registry.UnboundedInputs(raw); len(places) > 0 {
		return nil, fmt.Errorf("unbounded: %s", strings.Join(places, "; "))
	}
	if err := registry.CheckParamHeaders(&s); err != nil {
		return nil, err
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, err
	}
	return raw, nil
}
