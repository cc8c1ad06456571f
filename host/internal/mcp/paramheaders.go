package mcp

import (
	"encoding/json"
	"math"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/capgate/capgate/internal/registry"
)

// paramHeader is one x-mcp-header annotation of a tool's input schema: a
// 2026-07-28 client mirrors the argument at path into header, and the
// server must check that the two agree (Streamable HTTP, custom headers).
type paramHeader struct {
	path   []string
	header string // canonical "Mcp-Param-<name>"
}

// schemaNode is the part of a JSON Schema the annotation lives in: it is
// only honoured on properties reachable through "properties" alone.
type schemaNode struct {
	Header     json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaNode `json:"properties"`
}

// paramHeadersOf collects the annotations of a capability's input schema.
// Annotations that are not non-empty strings are ignored: clients drop such
// tools, so no header can arrive for them.
func paramHeadersOf(e *registry.Entry) []paramHeader {
	var root schemaNode
	if json.Unmarshal(e.InputSchema, &root) != nil {
		return nil
	}
	var out []paramHeader
	var walk func(props map[string]schemaNode, prefix []string)
	walk = func(props map[string]schemaNode, prefix []string) {
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			var h string
			if json.Unmarshal(p.Header, &h) == nil && h != "" {
				out = append(out, paramHeader{path: path, header: textproto.CanonicalMIMEHeaderKey("Mcp-Param-" + h)})
			}
			walk(p.Properties, path)
		}
	}
	walk(root.Properties, nil)
	return out
}

// checkParamHeaders compares each annotated argument with its header. It
// returns a description of the first disagreement, or "".
func checkParamHeaders(hdr http.Header, bindings []paramHeader, args []byte) string {
	for _, b := range bindings {
		val, found := lookupPath(args, b.path)
		sent, hasHeader := header(hdr, b.header)
		if !found || string(val) == "null" {
			if hasHeader {
				return b.header + " was sent but " + strings.Join(b.path, ".") + " is absent"
			}
			continue
		}
		if val[0] == '{' || val[0] == '[' {
			// Not a primitive: the schema check in the gate rejects it.
			continue
		}
		if !hasHeader {
			return "the " + b.header + " header is required when " + strings.Join(b.path, ".") + " is given"
		}
		decoded, ok := decodeHeaderValue(sent)
		if !ok || !primitiveMatches(decoded, val) {
			return b.header + " does not match " + strings.Join(b.path, ".")
		}
	}
	return ""
}

// lookupPath finds the value at a chain of object keys.
func lookupPath(v []byte, path []string) ([]byte, bool) {
	for _, key := range path {
		if len(v) == 0 || v[0] != '{' {
			return nil, false
		}
		it := iterObject(v, 1)
		var m member
		var next []byte
		for it.next(&m) {
			if m.is(key) {
				next = m.val
			}
		}
		if next == nil || it.bad {
			return nil, false
		}
		v = next
	}
	return v, true
}

// primitiveMatches compares a header value with a JSON primitive: strings
// exactly, booleans as true/false, numbers numerically (so 42 and 42.0
// agree, as the transport recommends).
func primitiveMatches(h string, val []byte) bool {
	switch val[0] {
	case '"':
		return stringIs(val, h)
	case 't', 'f':
		return h == string(val)
	}
	want, err1 := strconv.ParseFloat(string(val), 64)
	got, err2 := strconv.ParseFloat(h, 64)
	return err1 == nil && err2 == nil && !math.IsNaN(got) && got == want
}
