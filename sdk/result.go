package sdk

import (
	"encoding/json"
	"reflect"
	"slices"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// A slice in a capability's input or output is a JSON array, never null:
// the schemas say "array" (schema inference alone says "null or array"),
// and results are encoded with nil slices and maps as [] and {}, which is
// what an agent reading the schema expects. Pointers stay nullable.

// arraysNotNull drops "null" from the schemas of the slices of Go type t.
func arraysNotNull(s *jsonschema.Schema, t reflect.Type, seen map[reflect.Type]bool) {
	if s == nil {
		return
	}
	nullable := false
	for t.Kind() == reflect.Pointer {
		t, nullable = t.Elem(), true
	}
	switch {
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		// It encodes itself (json.RawMessage, time.Time): what inference
		// read from its Go shape is not what it writes.
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			*s = jsonschema.Schema{Description: s.Description}
		}
		return
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		// encoding/json writes a []byte as a base64 string (null when nil).
		*s = jsonschema.Schema{Description: s.Description, Types: []string{"null", "string"}, ContentEncoding: "base64"}
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		if !nullable && len(s.Types) == 2 && slices.Contains(s.Types, "null") && slices.Contains(s.Types, "array") {
			s.Type, s.Types = "array", nil
		}
		arraysNotNull(s.Items, t.Elem(), seen)
	case reflect.Array:
		arraysNotNull(s.Items, t.Elem(), seen)
	case reflect.Map:
		arraysNotNull(s.AdditionalProperties, t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		for _, f := range reflect.VisibleFields(t) {
			if name, ok := jsonName(f); ok {
				arraysNotNull(s.Properties[name], f.Type, seen)
			}
		}
	}
}

// encodeResult marshals a handler's result with every nil slice and map
// reached through its exported fields encoded as [] and {}. It copies what
// it changes and never writes to memory the handler still holds.
func encodeResult(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || !needsFill(rv.Type()) {
		return json.Marshal(v)
	}
	cp := reflect.New(rv.Type()).Elem()
	cp.Set(rv)
	fill(cp)
	return json.Marshal(cp.Interface())
}

var fillCache sync.Map // reflect.Type → bool

// needsFill reports whether a value of type t can hold a nil slice or map
// that encoding/json would write as null.
func needsFill(t reflect.Type) bool {
	if v, ok := fillCache.Load(t); ok {
		return v.(bool)
	}
	need := needsFillSeen(t, map[reflect.Type]bool{})
	fillCache.Store(t, need)
	return need
}

func needsFillSeen(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Slice:
		return t.Elem().Kind() != reflect.Uint8 // []byte is a base64 string
	case reflect.Map:
		return true
	case reflect.Pointer, reflect.Array:
		return needsFillSeen(t.Elem(), seen)
	case reflect.Struct:
		if t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
			return false
		}
		for _, f := range reflect.VisibleFields(t) {
			if _, ok := jsonName(f); ok && needsFillSeen(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// fill replaces, in the settable v, nil slices and maps with empty ones,
// copying slices, maps and pointed-to values before changing what is in
// them.
func fill(v reflect.Value) {
	t := v.Type()
	if !needsFill(t) {
		return
	}
	switch t.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			v.Set(reflect.MakeSlice(t, 0, 0))
			return
		}
		if needsFill(t.Elem()) {
			cp := reflect.MakeSlice(t, v.Len(), v.Len())
			reflect.Copy(cp, v)
			for i := range cp.Len() {
				fill(cp.Index(i))
			}
			v.Set(cp)
		}
	case reflect.Map:
		if v.IsNil() {
			v.Set(reflect.MakeMap(t))
			return
		}
		if needsFill(t.Elem()) {
			cp := reflect.MakeMapWithSize(t, v.Len())
			for it := v.MapRange(); it.Next(); {
				e := reflect.New(t.Elem()).Elem()
				e.Set(it.Value())
				fill(e)
				cp.SetMapIndex(it.Key(), e)
			}
			v.Set(cp)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		cp := reflect.New(t.Elem())
		cp.Elem().Set(v.Elem())
		fill(cp.Elem())
		v.Set(cp)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if _, named := jsonName(f); !named && !f.Anonymous {
				continue
			}
			if fv := v.Field(i); fv.CanSet() {
				fill(fv)
			}
		}
	}
}
