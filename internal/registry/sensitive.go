package registry

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// SensitiveKeyword marks a property of an input schema whose values the
// audit trail must never keep (a password, a card number): "true" on the
// property's schema. The SDK writes it for fields tagged
// `capgate:"sensitive"`; JSON Schema validators ignore it.
const SensitiveKeyword = "x-capgate-sensitive"

// sensitivePaths lists the property paths an input schema marks
// sensitive: object keys from the root, "*" for every element of an array
// or member of a map.
func sensitivePaths(raw json.RawMessage) [][]string {
	var s jsonschema.Schema
	if json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var out [][]string
	var walk func(s *jsonschema.Schema, path []string, depth int)
	walk = func(s *jsonschema.Schema, path []string, depth int) {
		if s == nil || depth > MaxArgsDepth {
			return
		}
		if v, _ := s.Extra[SensitiveKeyword].(bool); v && len(path) > 0 {
			out = append(out, slices.Clone(path))
			return // everything under it goes with it
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			walk(s.Properties[name], append(path, name), depth+1)
		}
		walk(s.Items, append(path, "*"), depth+1)
		walk(s.AdditionalProperties, append(path, "*"), depth+1)
	}
	walk(&s, nil, 0)
	return out
}
