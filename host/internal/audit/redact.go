package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Path names a property of a call's arguments: object member names from
// the root, with "*" standing for every element of an array and every
// member of an object. Path{"card", "number"} is args.card.number;
// Path{"guests", "*", "phone"} is the phone of every guest.
type Path = []string

// Redact returns args ready for Record.Args: each value at one of the
// sensitive paths (whatever its type) replaced by the string RedactedMarker,
// the rest kept in its order, compacted; then capped at max bytes
// (MaxArgs when max ≤ 0): a longer result becomes the placeholder
// {"$audit":"truncated","bytes":N}. Arguments that are not one valid JSON
// value become {"$audit":"invalid","bytes":N}, those nested deeper than
// MaxDepth {"$audit":"too_deep","bytes":N}; empty ones stay empty. The
// result is always valid JSON (or empty) and never panics; it is args
// itself when args needed no change. Names match as encoding/json matches
// a member to a field: case-insensitively (strings.EqualFold), so that a
// value the plugin decodes into a sensitive field is redacted whatever
// the case its caller wrote the name in.
func Redact(args json.RawMessage, sensitive []Path, max int) json.RawMessage {
	if max <= 0 {
		max = MaxArgs
	}
	if len(bytes.TrimSpace(args)) == 0 {
		return nil
	}
	for _, p := range sensitive {
		if len(p) == 0 { // the whole value is sensitive
			if !json.Valid(args) {
				return placeholder("invalid", len(args))
			}
			return json.RawMessage(strconv.Quote(RedactedMarker))
		}
	}
	if NamesNone(args, sensitive) {
		// Nothing to redact: compact and cap, as the walk would.
		if nesting(args) > MaxDepth {
			return placeholder("too_deep", len(args))
		}
		return capArgs(args, max)
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber() // numbers keep their literal
	r := redactor{dec: dec}
	if err := r.value(sensitive, 0); errors.Is(err, errTooDeep) {
		return placeholder("too_deep", len(args))
	} else if err != nil {
		return placeholder("invalid", len(args))
	}
	if _, err := dec.Token(); err != io.EOF {
		return placeholder("invalid", len(args)) // more than one value
	}
	if r.out.Len() > max {
		return placeholder("truncated", r.out.Len())
	}
	return r.out.Bytes()
}

var errSyntax = errors.New("unexpected token")

type redactor struct {
	dec *json.Decoder
	out bytes.Buffer
	enc *json.Encoder
}

// MaxDepth bounds the nesting of arguments Redact copies; deeper ones
// become {"$audit":"too_deep","bytes":N}. Capability schemas nest a few
// levels, so anything near it is not a real call's arguments.
const MaxDepth = 64

var errTooDeep = errors.New("nested too deep")

// value copies the next value to out, redacting what active (the paths
// matched down to depth) names below it.
func (r *redactor) value(active []Path, depth int) error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return errTooDeep
		}
		switch v {
		case '{':
			return r.object(active, depth)
		case '[':
			return r.array(active, depth)
		}
		return errSyntax
	case string:
		return r.str(v)
	case json.Number:
		r.out.WriteString(v.String())
	case bool:
		r.out.WriteString(strconv.FormatBool(v))
	case nil:
		r.out.WriteString("null")
	default:
		return errSyntax
	}
	return nil
}

func (r *redactor) object(active []Path, depth int) error {
	r.out.WriteByte('{')
	for i := 0; r.dec.More(); i++ {
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return errSyntax
		}
		if i > 0 {
			r.out.WriteByte(',')
		}
		if err := r.str(key); err != nil {
			return err
		}
		r.out.WriteByte(':')
		if err := r.member(active, depth, key); err != nil {
			return err
		}
	}
	return r.end('}')
}

func (r *redactor) array(active []Path, depth int) error {
	r.out.WriteByte('[')
	for i := 0; r.dec.More(); i++ {
		if i > 0 {
			r.out.WriteByte(',')
		}
		if err := r.member(active, depth, "*"); err != nil {
			return err
		}
	}
	return r.end(']')
}

// member copies the value of the member (or element, name "*") name,
// redacted when a path ends at it.
func (r *redactor) member(active []Path, depth int, name string) error {
	var next []Path
	for _, p := range active {
		if p[depth] != "*" && !strings.EqualFold(p[depth], name) {
			continue
		}
		if len(p) == depth+1 {
			var skipped json.RawMessage
			if err := r.dec.Decode(&skipped); err != nil {
				return err
			}
			return r.str(RedactedMarker)
		}
		next = append(next, p)
	}
	return r.value(next, depth+1)
}

func (r *redactor) end(d json.Delim) error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errSyntax
	}
	r.out.WriteByte(byte(d))
	return nil
}

func (r *redactor) str(s string) error {
	if r.enc == nil {
		r.enc = json.NewEncoder(&r.out)
		r.enc.SetEscapeHTML(false)
	}
	if err := r.enc.Encode(s); err != nil {
		return err
	}
	r.out.Truncate(r.out.Len() - 1) // Encode's newline
	return nil
}

// NamesNone reports, without decoding args, that no value of args is at
// one of the paths, so that Redact would only compact and cap them (as
// Writer.Write does anyway). With no backslash in args every member name
// is written literally, and with no byte outside ASCII none folds to
// another's case but by ASCII's rules, so a path with a name that appears
// nowhere quoted in args, in any case, matches nothing. Most calls hold no
// sensitive field, and the token walk costs more than the rest of their
// record.
func NamesNone(args []byte, paths []Path) bool {
	for _, c := range args {
		// A Unicode name can match an ASCII one (the Kelvin sign folds to
		// k, the long s to s): only the walk decides.
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	for _, p := range paths {
		absent := false
		for _, name := range p {
			if name == "*" {
				continue
			}
			if !quotedFold(args, name) {
				absent = true
				break
			}
		}
		if !absent {
			return false
		}
	}
	return true
}

// quotedFold reports whether args, which are ASCII, hold "name" quoted,
// in any case. A name outside ASCII could still match: it reports true.
func quotedFold(args []byte, name string) bool {
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			return true
		}
	}
	for i := 0; i+len(name)+1 < len(args); i++ {
		j := bytes.IndexByte(args[i:len(args)-len(name)-1], '"')
		if j < 0 {
			return false
		}
		i += j
		if args[i+len(name)+1] == '"' && asciiEqualFold(args[i+1:i+1+len(name)], name) {
			return true
		}
	}
	return false
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// nesting is the deepest nesting of arrays and objects in args, which hold
// no backslash, so every quote opens or closes a string.
func nesting(args []byte) int {
	depth, deepest, inString := 0, 0, false
	for _, c := range args {
		switch {
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
