package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxUnboundedListed caps how many places UnboundedInputs names; the rest
// are counted in a last "and N more" entry, so one careless schema cannot
// flood the start-up log.
const MaxUnboundedListed = 10

// UnboundedInputs lists the places of an input schema that declare no
// limit, each as "path: what is missing" (e.g. "tags[]: string without
// maxLength"). Without such a limit an agent cannot see how much a
// capability accepts, and the host's validation cannot refuse an oversized
// argument before the plugin reads it: only the request body limit stops it.
//
// A string needs maxLength, an array maxItems (or a closed tuple), an object
// maxProperties unless additionalProperties is false (then its properties
// bound it); a value with enum or const is bounded whatever its type, and
// one with no type at all needs all three. A bound declared by an enclosing
// schema of the same value (a parent of allOf/anyOf/oneOf, or an allOf
// sibling) counts. Local $refs (#, #/$defs/…, #/definitions/…) are
// followed. Paths name properties with dots, array items with [] (a tuple's
// with [i]) and map values with {}; (input) is the input itself.
func UnboundedInputs(schema json.RawMessage) []string {
	var s jsonschema.Schema
	if err := json.Unmarshal(schema, &s); err != nil {
		return []string{"(input): not a JSON Schema: " + err.Error()}
	}
	w := &boundsWalk{root: &s, onPath: map[*jsonschema.Schema]bool{}, listed: map[string]bool{}}
	w.check(&s, "", scope{})
	if n := len(w.found); n > MaxUnboundedListed {
		return append(w.found[:MaxUnboundedListed:MaxUnboundedListed], fmt.Sprintf("and %d more", n-MaxUnboundedListed))
	}
	return w.found
}

// UnboundedCapability is a capability whose input has places no declared
// bound limits.
type UnboundedCapability struct {
	Name, Plugin string
	// Places is UnboundedInputs of the input schema.
	Places []string
}

// Unbounded lists, in name order, the capabilities whose input schema
// leaves some place unbounded (see UnboundedInputs).
func (r *Registry) Unbounded() []UnboundedCapability {
	var out []UnboundedCapability
	for _, e := range r.ordered {
		if places := UnboundedInputs(e.InputSchema); len(places) > 0 {
			out = append(out, UnboundedCapability{Name: e.Name, Plugin: e.Plugin, Places: places})
		}
	}
	return out
}

// scope is what the schemas enclosing one value at the same place already
// say about it: its types (nil: any) and which of its kinds are bounded.
type scope struct {
	types         []string
	str, arr, obj bool
}

type boundsWalk struct {
	root *jsonschema.Schema
	// onPath holds the schemas being checked on the way down, so a
	// recursive $ref is checked once, at its shallowest place.
	onPath map[*jsonschema.Schema]bool
	found  []string
	listed map[string]bool
}

// add records one unbounded place once: a schema and its allOf or $ref can
// both see the same gap.
func (w *boundsWalk) add(format string, args ...any) {
	if p := fmt.Sprintf(format, args...); !w.listed[p] {
		w.listed[p] = true
		w.found = append(w.found, p)
	}
}

// check reports what s leaves unbounded at path, given what the enclosing
// schemas of the same value declare (in), then checks the schemas nested
// in it.
func (w *boundsWalk) check(s *jsonschema.Schema, path string, in scope) {
	if w.onPath[s] || isFalse(s) || len(s.Enum) > 0 || s.Const != nil {
		return // being checked above, admits nothing, or a fixed set of values
	}
	w.onPath[s] = true
	defer delete(w.onPath, s)

	cur := in
	own, alts := w.conj(s, map[*jsonschema.Schema]bool{})
	if own.types != nil {
		cur.types = own.types
	}
	cur.str, cur.arr, cur.obj = cur.str || own.str, cur.arr || own.arr, cur.obj || own.obj

	target := w.local(s.Ref)
	if s.Ref != "" && target == nil {
		w.add("%s: $ref %q not followed (only local #/$defs/… references are)", label(path), s.Ref)
	}
	// With anyOf/oneOf the value is one of the branches: each is checked
	// with what this schema declares, and this schema says no more itself;
	// nor does it when its type is behind a reference not followed.
	if !alts && (target != nil || s.Ref == "" || cur.types != nil) {
		w.report(path, cur)
	}
	if target != nil {
		w.check(target, path, cur)
	}
	eachChild(s, func(c *jsonschema.Schema) bool {
		switch where, key := childOf(s, c); where {
		case sameValue:
			w.check(c, path, cur)
		case propertyValue:
			w.check(c, join(path, key), scope{})
		case itemValue:
			w.check(c, label(path)+key, scope{})
		}
		return true
	})
}

// report records what cur leaves unbounded at path.
func (w *boundsWalk) report(path string, cur scope) {
	if cur.types == nil {
		var missing []string
		for _, m := range []struct {
			ok  bool
			key string
		}{{cur.str, "maxLength"}, {cur.arr, "maxItems"}, {cur.obj, "maxProperties"}} {
			if !m.ok {
				missing = append(missing, m.key)
			}
		}
		if len(missing) > 0 {
			w.add("%s: any JSON value (no type) without %s", label(path), strings.Join(missing, ", "))
		}
		return
	}
	if slices.Contains(cur.types, "string") && !cur.str {
		w.add("%s: string without maxLength", label(path))
	}
	if slices.Contains(cur.types, "array") && !cur.arr {
		w.add("%s: array without maxItems", label(path))
	}
	if slices.Contains(cur.types, "object") && !cur.obj {
		w.add("%s: object without maxProperties (additional properties allowed)", label(path))
	}
}

// conj is what s declares of its value's types and bounds, counting every
// schema that applies to the same value with it: its allOf and its $ref;
// alts is whether one of them has anyOf/oneOf branches.
func (w *boundsWalk) conj(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) (c scope, alts bool) {
	if seen[s] {
		return scope{}, false
	}
	seen[s] = true
	if len(s.Enum) > 0 || s.Const != nil || isFalse(s) {
		return scope{str: true, arr: true, obj: true}, false
	}
	alts = len(s.AnyOf)+len(s.OneOf) > 0
	c = scope{
		types: typesOf(s),
		str:   s.MaxLength != nil,
		arr: s.MaxItems != nil ||
			(len(s.PrefixItems) > 0 && s.Items != nil && isFalse(s.Items)) ||
			(len(s.ItemsArray) > 0 && s.AdditionalItems != nil && isFalse(s.AdditionalItems)),
		obj: s.MaxProperties != nil || (len(s.PatternProperties) == 0 &&
			(s.AdditionalProperties != nil && isFalse(s.AdditionalProperties) ||
				s.UnevaluatedProperties != nil && isFalse(s.UnevaluatedProperties))),
	}
	others := s.AllOf
	if t := w.local(s.Ref); t != nil {
		others = append(slices.Clip(others), t)
	}
	for _, o := range others {
		oc, oalts := w.conj(o, seen)
		if c.types == nil {
			c.types = oc.types
		}
		c.str, c.arr, c.obj = c.str || oc.str, c.arr || oc.arr, c.obj || oc.obj
		alts = alts || oalts
	}
	return c, alts
}

// local resolves a reference within the input schema: the schema itself,
// or one of its $defs or definitions; nil for any other.
func (w *boundsWalk) local(ref string) *jsonschema.Schema {
	if ref == "#" {
		return w.root
	}
	for prefix, defs := range map[string]map[string]*jsonschema.Schema{"#/$defs/": w.root.Defs, "#/definitions/": w.root.Definitions} {
		if name, ok := strings.CutPrefix(ref, prefix); ok && !strings.Contains(name, "/") {
			return defs[strings.NewReplacer("~1", "/", "~0", "~").Replace(name)]
		}
	}
	return nil
}

// Where a nested schema applies, relative to its parent's value.
const (
	elsewhere     = iota // not to a value of the input: not, if, contains, $defs, …
	sameValue            // allOf, anyOf, oneOf, then, else, dependentSchemas
	propertyValue        // a named property
	itemValue            // an array item or an open object's value
)

// childOf says where c, a schema directly nested in s (as eachChild finds
// it), applies: to s's own value, to a property (key is its name), or to an
// item or map value (key is the path suffix: [], [i] or {}).
func childOf(s, c *jsonschema.Schema) (where int, key string) {
	for _, l := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, {s.Then, s.Else}} {
		if slices.Contains(l, c) {
			return sameValue, ""
		}
	}
	for _, d := range s.DependentSchemas {
		if d == c {
			return sameValue, ""
		}
	}
	for k, p := range s.Properties {
		if p == c {
			return propertyValue, k
		}
	}
	for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.ItemsArray} {
		if i := slices.Index(l, c); i >= 0 {
			return itemValue, fmt.Sprintf("[%d]", i)
		}
	}
	if c == s.Items || c == s.AdditionalItems || c == s.UnevaluatedItems {
		return itemValue, "[]"
	}
	if c == s.AdditionalProperties || c == s.UnevaluatedProperties {
		return itemValue, "{}"
	}
	for _, p := range s.PatternProperties {
		if p == c {
			return itemValue, "{}"
		}
	}
	return elsewhere, ""
}

// typesOf is s's declared types; nil when it declares none.
func typesOf(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

// isFalse reports whether s is the false schema, which admits nothing (the
// JSON false, or {"not": {}}, which the schema package encodes as false).
func isFalse(s *jsonschema.Schema) bool {
	if s.Not == nil {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && string(b) == "false"
}

func label(path string) string {
	if path == "" {
		return "(input)"
	}
	return path
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
