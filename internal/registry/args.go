package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
)

// MaxArgsDepth bounds how deeply arguments may nest: no capability needs
// more, and a schema that leaves a value open (any JSON) must not let a
// caller make every decoder and validator recurse without end.
const MaxArgsDepth = 32

// MaxArgsValues bounds the members and elements arguments may hold. They
// are decoded whole before the schema is checked, at some forty times
// their size in memory when they hold many small values: a 1 MiB body of
// empty objects would take 40 MiB per request before its refusal. Counted
// on the raw bytes first, a request over the bound costs only the count.
const MaxArgsValues = 10_000

// maxBytesPerChar is the most bytes one character may take in a JSON
// string: a surrogate pair written as two \uXXXX escapes.
const maxBytesPerChar = 12

// checkShape refuses, from one pass over the raw bytes and before any
// decoding, arguments that nest too deeply, hold too many values, or hold
// a string longer than any the schema accepts. Decoding and validating a
// 300 KB string only to learn it is over a 500-character limit costs
// milliseconds of CPU per request; this costs the pass.
func (e *Entry) checkShape(raw []byte) error {
	sh := shape(raw)
	switch {
	case sh.depth > MaxArgsDepth:
		return fmt.Errorf("arguments nest deeper than %d levels", MaxArgsDepth)
	case sh.values > MaxArgsValues:
		return fmt.Errorf("arguments hold more than %d values (object members and array elements)", MaxArgsValues)
	case e.maxString >= 0 && sh.longest > maxBytesPerChar*e.maxString:
		where := "an argument"
		if k := sh.longestKey; k.end > k.start {
			where = strconv.Quote(string(raw[k.start:min(k.end, k.start+64)]))
		}
		return fmt.Errorf("%s holds a string of %d bytes: more than %d characters, the longest any string of %s may have",
			where, sh.longest, e.maxString, e.Name)
	}
	return nil
}

// argsShape is what one pass over raw arguments learns.
type argsShape struct {
	depth  int // deepest nesting of arrays and objects
	values int // one per comma and per container, outside strings
	// longest is the byte length of the longest string (value or key),
	// longestKey the place of the member's name it belongs to.
	longest    int
	longestKey span
}

// span is a string's place in the raw bytes; the key is made a string
// only for the message, so measuring allocates nothing.
type span struct{ start, end int }

// shape measures raw, stopping once it is over the depth or value bound.
// Malformed JSON is for the decoder to refuse.
func shape(raw []byte) argsShape {
	var (
		sh   argsShape
		d    int
		last = span{-1, -1} // the last string, a key if ':' follows
		key  span           // the member being read
	)
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			start := i + 1
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			end := min(i, len(raw))
			if n := end - start; n > sh.longest {
				sh.longest, sh.longestKey = n, key
			}
			last = span{start, end}
		case ':':
			if last.start >= 0 {
				key = last
			}
		case '{', '[':
			sh.values++
			if d++; d > sh.depth {
				sh.depth = d
			}
		case ',':
			sh.values++
		case '}', ']':
			d--
		}
		if sh.depth > MaxArgsDepth || sh.values > MaxArgsValues {
			break
		}
	}
	return sh
}

// longestString is the most characters a string anywhere in arguments
// valid for the input schema raw may have: the largest maxLength, enum
// string or property name; -1 when some string is unbounded (a string
// without maxLength, a value of any type, an object open to keys of any
// length).
func longestString(raw json.RawMessage) int {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return -1
	}
	longest := 0
	var walk func(*jsonschema.Schema) bool
	walk = func(s *jsonschema.Schema) bool {
		types := s.Types
		if s.Type != "" {
			types = append(types, s.Type)
		}
		switch {
		case s.Not != nil && isEmpty(s.Not):
			return true // the false schema: nothing is valid, no string at all
		case s.Ref != "" || (len(types) == 0 && s.Enum == nil && s.Const == nil && !hasSubschemas(s)):
			return false // a reference or any JSON value: not followed here
		case s.Enum != nil || s.Const != nil:
			for _, v := range append(slices.Clone(s.Enum), deref(s.Const)) {
				if str, ok := v.(string); ok {
					longest = max(longest, len([]rune(str)))
				}
			}
		case slices.Contains(types, "string"):
			if s.MaxLength == nil {
				return false
			}
			longest = max(longest, *s.MaxLength)
		}
		if slices.Contains(types, "object") {
			if !closed(s) {
				return false // keys of any length
			}
			for name := range s.Properties {
				longest = max(longest, len([]rune(name))) // keys are strings too
			}
		}
		ok := true
		eachChild(s, func(c *jsonschema.Schema) bool {
			ok = walk(c)
			return ok
		})
		return ok
	}
	if !walk(&s) {
		return -1
	}
	return longest
}

// closed reports whether an object schema allows no properties but those
// it names.
func closed(s *jsonschema.Schema) bool {
	a := s.AdditionalProperties
	return a != nil && a.Not != nil && isEmpty(a.Not) && s.PatternProperties == nil
}

func isEmpty(s *jsonschema.Schema) bool {
	b, err := json.Marshal(s)
	return err == nil && (string(b) == "true" || string(b) == "{}")
}

func hasSubschemas(s *jsonschema.Schema) bool {
	return len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0
}

func deref(v *any) any {
	if v == nil {
		return nil
	}
	return *v
}
