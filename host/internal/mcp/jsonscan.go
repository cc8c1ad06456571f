package mcp

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/registry"
)

// The request path does not hand bodies to encoding/json: a reflective
// decode of the envelope would cost more than the rest of the adapter
// together. Instead a small validating scanner finds the extent of each
// value and the adapter keeps sub-slices of the body. The grammar accepted
// is exactly RFC 8259, the same as json.Valid (FuzzDecode checks that).

// maxDepth bounds nesting, as encoding/json does, so a hostile body cannot
// exhaust the stack.
const maxDepth = 10000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i], or
// -1 when there is no valid value there.
func skipValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := skipString(b, i)
		return end
	case c == '{':
		if depth >= maxDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			if i, _ = skipString(b, i); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = skipValue(b, skipSpace(b, i+1), depth+1); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			if b[i] == '}' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		if depth >= maxDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for {
			if i = skipValue(b, i, depth+1); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			if b[i] == ']' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return -1
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// skipString returns the index past the closing quote of the string opening
// at b[i], and whether it contains escapes.
func skipString(b []byte, i int) (int, bool) {
	escaped := false
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped
		case c < 0x20:
			return -1, false
		case c == '\\':
			escaped = true
			i++
			if i >= len(b) {
				return -1, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 {
					return -1, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1, false
					}
				}
				i += 4
			default:
				return -1, false
			}
		}
	}
	return -1, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i
}

// validJSON reports whether b holds exactly one JSON value, with optional
// surrounding whitespace.
func validJSON(b []byte) bool {
	end := skipValue(b, skipSpace(b, 0), 0)
	return end >= 0 && skipSpace(b, end) == len(b)
}

// member is one name/value pair of an object. Both are sub-slices of the
// scanned input: key with its quotes, val trimmed of whitespace.
type member struct {
	key        []byte
	keyEscaped bool
	val        []byte
}

// is reports whether the member's name is name. Names are compared exactly,
// as JSON-RPC and MCP are case-sensitive.
func (m *member) is(name string) bool {
	if !m.keyEscaped {
		return len(m.key) == len(name)+2 && string(m.key[1:len(m.key)-1]) == name
	}
	s, ok := decodeString(m.key)
	return ok && s == name
}

// objectIter walks the members of one object, validating as it goes.
type objectIter struct {
	b     []byte
	i     int
	depth int
	done  bool
	bad   bool
}

// iterObject starts a walk of the object in v, which must be trimmed.
func iterObject(v []byte, depth int) objectIter {
	it := objectIter{b: v, depth: depth}
	if len(v) < 2 || v[0] != '{' {
		it.bad, it.done = true, true
		return it
	}
	it.i = skipSpace(v, 1)
	if it.i < len(v) && v[it.i] == '}' {
		it.done = true
		if skipSpace(v, it.i+1) != len(v) {
			it.bad = true
		}
	}
	return it
}

// next returns the next member; false at the end or on malformed input
// (then it.bad is set).
func (it *objectIter) next(m *member) bool {
	if it.done {
		return false
	}
	b, i := it.b, it.i
	fail := func() bool { it.bad, it.done = true, true; return false }
	if i >= len(b) || b[i] != '"' {
		return fail()
	}
	end, esc := skipString(b, i)
	if end < 0 {
		return fail()
	}
	m.key, m.keyEscaped = b[i:end], esc
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return fail()
	}
	start := skipSpace(b, i+1)
	end = skipValue(b, start, it.depth+1)
	if end < 0 {
		return fail()
	}
	m.val = b[start:end]
	i = skipSpace(b, end)
	if i >= len(b) {
		return fail()
	}
	switch b[i] {
	case '}':
		it.done = true
		if skipSpace(b, i+1) != len(b) {
			return fail()
		}
	case ',':
		it.i = skipSpace(b, i+1)
	default:
		return fail()
	}
	return true
}

// refuseDuplicates answers a message, v, holding two members of one
// object with the same name anywhere: which of them the adapter, the
// gate, a plugin or an approver would read is not the same. A duplicate
// in the envelope is an invalid request, one in params invalid params;
// one in a tools/call's arguments alone is left to the gate, which
// refuses it as invalid input of the tool, as every adapter's call is.
func refuseDuplicates(v []byte, m *message) (code int, msg string) {
	d := registry.DuplicateMember(v)
	if d == nil {
		return 0, ""
	}
	if strings.HasPrefix(d.Path, "/params/arguments/") && stringIs(m.method, "tools/call") {
		if d = registry.DuplicateMember(withoutArguments(v)); d == nil {
			return 0, ""
		}
	}
	if d.Path == "/id" {
		m.id = nil // which of the two to answer is not known
	}
	if strings.HasPrefix(d.Path, "/params/") {
		return codeInvalidParams, "invalid params: " + d.Error()
	}
	return codeInvalidRequest, "invalid request: " + d.Error()
}

// withoutArguments is the object v, valid JSON, with the value of each
// params.arguments member replaced by {}, the same in every other respect.
func withoutArguments(v []byte) []byte {
	return appendWithoutArguments(make([]byte, 0, len(v)), v, 0)
}

// appendWithoutArguments appends the object v at depth 0 (the message) or
// 1 (its params), leaving out the arguments of params.
func appendWithoutArguments(out, v []byte, depth int) []byte {
	out = append(out, '{')
	it := iterObject(v, depth)
	var mb member
	for n := 0; it.next(&mb); n++ {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(append(out, mb.key...), ':')
		switch {
		case depth == 1 && mb.is("arguments"):
			out = append(out, "{}"...)
		case depth == 0 && mb.is("params") && mb.val[0] == '{':
			out = appendWithoutArguments(out, mb.val, 1)
		default:
			out = append(out, mb.val...)
		}
	}
	return append(out, '}')
}

// decodeString returns the text of the JSON string token s (with quotes).
// Unescaped strings take the fast path; escapes go through encoding/json,
// which is rare enough on the wire not to matter.
func decodeString(s []byte) (string, bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", false
	}
	for _, c := range s[1 : len(s)-1] {
		if c == '\\' {
			var out string
			if err := json.Unmarshal(s, &out); err != nil {
				return "", false
			}
			return out, true
		}
	}
	return string(s[1 : len(s)-1]), true
}

// stringIs reports whether the JSON string token s holds exactly want,
// without allocating on the common unescaped path.
func stringIs(s []byte, want string) bool {
	if len(s) < 2 || s[0] != '"' {
		return false
	}
	inner := s[1 : len(s)-1]
	for _, c := range inner {
		if c == '\\' {
			got, ok := decodeString(s)
			return ok && got == want
		}
	}
	return string(inner) == want
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD so
// the response is always valid UTF-8 JSON whatever the plugin returned; the
// HTML-significant characters are left alone, as the output is never
// embedded in HTML.
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript parsers
		// that eval the text; escaping them costs nothing.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeRune is utf8.DecodeRune for either strings or byte slices, so
// appendString needs no conversion (and no allocation) for either.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	const bad = utf8.RuneError
	n := len(s)
	if n == 0 {
		return bad, 0
	}
	c0 := s[0]
	cont := func(c byte) bool { return c&0xC0 == 0x80 }
	switch {
	case c0 < 0x80:
		return rune(c0), 1
	case c0 < 0xC2:
		return bad, 1
	case c0 < 0xE0:
		if n < 2 || !cont(s[1]) {
			return bad, 1
		}
		return rune(c0&0x1F)<<6 | rune(s[1]&0x3F), 2
	case c0 < 0xF0:
		lo, hi := byte(0x80), byte(0xBF)
		if c0 == 0xE0 {
			lo = 0xA0
		} else if c0 == 0xED {
			hi = 0x9F
		}
		if n < 3 || s[1] < lo || s[1] > hi || !cont(s[2]) {
			return bad, 1
		}
		return rune(c0&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	case c0 < 0xF5:
		lo, hi := byte(0x80), byte(0xBF)
		if c0 == 0xF0 {
			lo = 0x90
		} else if c0 == 0xF4 {
			hi = 0x8F
		}
		if n < 4 || s[1] < lo || s[1] > hi || !cont(s[2]) || !cont(s[3]) {
			return bad, 1
		}
		return rune(c0&0x07)<<18 | rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F), 4
	}
	return bad, 1
}
