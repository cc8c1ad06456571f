package registry

import (
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Two members of one object with the same name are valid JSON, but
// decoders disagree on what they mean: encoding/json keeps the last,
// others the first, and a display may show both. Arguments an approver
// reads and arguments a plugin runs with must be the same, so every
// adapter refuses them; DuplicateMember is the one definition of the
// check, run on every call.

const (
	// maxShownName and maxShownPath bound what a refusal quotes of the
	// caller's bytes.
	maxShownName = 64
	maxShownPath = 256
	// linearMembers is how many members an object compares one by one
	// before the rest are found through a map: typical arguments never
	// reach it, and a hostile object of many members costs linear time.
	linearMembers = 16
)

// DuplicateError names a member whose name an earlier member of the same
// object already has.
type DuplicateError struct {
	// Name is the member's name (cut to 64 bytes).
	Name string
	// Path is the JSON Pointer of the second member (cut to 256 bytes),
	// e.g. /filters/0/kind.
	Path string
}

func (e *DuplicateError) Error() string {
	return "duplicate member " + strconv.Quote(e.Name) + " at " + e.Path
}

// structural marks the bytes the scan acts on outside strings, inString
// those it acts on inside one: everything else is passed over in one test.
var structural, inString = func() (s, in [256]bool) {
	for _, c := range []byte(`"{}[],`) {
		s[c] = true
	}
	in['"'], in['\\'] = true, true
	for c := utf8.RuneSelf; c < 256; c++ {
		in[c] = true
	}
	return s, in
}()

// nameSpan is a member name's place in the raw bytes, without its quotes.
// plain says the raw bytes are the name itself (no escapes, valid UTF-8),
// so comparing them needs no decoding.
type nameSpan struct {
	start, end int
	plain      bool
}

type dupFrame struct {
	object bool
	first  int      // index in names of this object's first member
	index  int      // the current element, in an array
	name   nameSpan // the current member, in an object
	// seen holds the names of an object past linearMembers.
	seen map[string]struct{}
}

// DuplicateMember reports the first member, at any depth of the JSON value
// raw, whose name (decoded, as encoding/json decodes it) an earlier member
// of the same object has; nil when there is none. It does not validate:
// bytes that are not JSON give some answer, never a panic, and are for the
// decoder to refuse. For a typical argument object it allocates nothing.
func DuplicateMember(raw []byte) *DuplicateError {
	var (
		frameBuf [16]dupFrame
		nameBuf  [32]nameSpan
	)
	frames, names := frameBuf[:0], nameBuf[:0]
	wantName := false // the next string is a member's name
	for i := 0; i < len(raw); i++ {
		if !structural[raw[i]] {
			continue
		}
		switch raw[i] {
		case '"':
			start, esc, high := i+1, false, false
			for i++; i < len(raw); i++ {
				c := raw[i]
				if !inString[c] {
					continue
				}
				if c == '"' {
					break
				}
				if c == '\\' {
					esc = true
					i++
				} else {
					high = true
				}
			}
			if !wantName || len(frames) == 0 {
				continue
			}
			wantName = false
			end := min(i, len(raw))
			n := nameSpan{start, end, !esc && (!high || utf8.Valid(raw[start:end]))}
			f := &frames[len(frames)-1]
			f.name = n
			if f.seen == nil && len(names)-f.first < linearMembers {
				for _, m := range names[f.first:] {
					if sameName(raw, m, n) {
						return duplicateAt(raw, frames)
					}
				}
				names = append(names, n)
				continue
			}
			if f.seen == nil {
				f.seen = make(map[string]struct{}, 2*linearMembers)
				for _, m := range names[f.first:] {
					f.seen[nameText(raw, m)] = struct{}{}
				}
				names = names[:f.first]
			}
			key := nameText(raw, n)
			if _, dup := f.seen[key]; dup {
				return duplicateAt(raw, frames)
			}
			f.seen[key] = struct{}{}
		case '{':
			frames = append(frames, dupFrame{object: true, first: len(names)})
			wantName = true
		case '[':
			frames = append(frames, dupFrame{first: len(names)})
			wantName = false
		case ',':
			if len(frames) > 0 {
				if f := &frames[len(frames)-1]; f.object {
					wantName = true
				} else {
					f.index++
				}
			}
		case '}', ']':
			if len(frames) > 0 {
				names = names[:frames[len(frames)-1].first]
				frames = frames[:len(frames)-1]
			}
			wantName = false
		}
	}
	return nil
}

func sameName(raw []byte, a, b nameSpan) bool {
	if a.plain && b.plain {
		return string(raw[a.start:a.end]) == string(raw[b.start:b.end])
	}
	return nameText(raw, a) == nameText(raw, b)
}

// nameText is the decoded name. Escapes go through encoding/json, so
// names it would take as one (U+FFFD for any invalid UTF-8, a lone
// surrogate) are one here too.
func nameText(raw []byte, n nameSpan) string {
	if n.plain || n.start == 0 || n.end >= len(raw) {
		// plain, or no name at all (an object never given one, in bytes
		// that are not JSON), or a name the bytes end in
		return string(raw[n.start:n.end])
	}
	var s string
	if json.Unmarshal(raw[n.start-1:n.end+1], &s) != nil {
		return string(raw[n.start:n.end])
	}
	return s
}

// duplicateAt is the error for the member just read in the innermost of
// frames, its place made of each enclosing frame's current member or
// element.
func duplicateAt(raw []byte, frames []dupFrame) *DuplicateError {
	var path []byte
	for i := range frames {
		if f := &frames[i]; f.object {
			path = appendSegment(path, nameText(raw, f.name))
		} else {
			path = strconv.AppendInt(append(path, '/'), int64(f.index), 10)
		}
		if len(path) > maxShownPath {
			path = append(clip(path, maxShownPath), "…"...)
			break
		}
	}
	name := nameText(raw, frames[len(frames)-1].name)
	if len(name) > maxShownName {
		name = string(clip([]byte(name), maxShownName)) + "…"
	}
	return &DuplicateError{Name: name, Path: string(path)}
}

// appendSegment appends one JSON Pointer segment: ~ and / escaped as the
// RFC says, and characters a terminal would act on written as Go escapes.
func appendSegment(b []byte, s string) []byte {
	b = append(b, '/')
	for _, r := range s {
		switch {
		case r == '~':
			b = append(b, "~0"...)
		case r == '/':
			b = append(b, "~1"...)
		case !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRuneToASCII(r)
			b = append(b, q[1:len(q)-1]...)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// clip cuts b to at most n bytes, at a character boundary.
func clip(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return b[:n]
}
