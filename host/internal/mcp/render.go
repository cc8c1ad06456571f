package mcp

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// JSON-RPC and MCP error codes the adapter emits.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	// codeForbidden is a gate refusal. It sits in the implementation-defined
	// part of the server-error range, where earlier servers of this kind put
	// it, so agents that already know it keep working.
	codeForbidden = -32003
	// codeResourceNotFound is how revisions up to 2025-11-25 report an
	// unknown resource; 2026-07-28 uses -32602 instead.
	codeResourceNotFound = -32002
	// Codes reserved by the 2026-07-28 specification.
	codeHeaderMismatch     = -32020
	codeUnsupportedVersion = -32022
)

// toolJSON is one capability rendered as an MCP Tool, once at start-up:
// listing tools then only concatenates bytes.
type toolJSON struct {
	// plain is the 2025-03-26 shape: no outputSchema, no title or icons
	// beside the name (the title goes in the annotations, where that
	// revision has it).
	plain []byte
	// full carries outputSchema when the capability declares one, and the
	// title, per revision: [0] for 2025-06-18, [1] with icons as well for
	// 2025-11-25, [2] for 2026-07-28, the only one whose outputSchema may
	// describe a value other than an object (the others leave such a
	// schema out, as their structuredContent leaves such a value out).
	full [3][]byte
	// held is full with an outputSchema that also admits the pending
	// result, for a level at which calls wait for a human; nil when the
	// capability declares no output schema.
	held [3][]byte
}

// forVersion returns the rendering for v, held or not.
func (t *toolJSON) forVersion(v version, held bool) []byte {
	i := 0
	switch {
	case v.modern():
		i = 2
	case v >= v20251125:
		i = 1
	}
	if held && t.held[i] != nil {
		return t.held[i]
	}
	return t.full[i]
}

// renderTool projects a capability onto the MCP Tool shape. The hints follow
// the capability's kind unless it declares them: a read changes nothing
// (so it is also idempotent); an action is destructive only when the
// capability says its effect cannot be undone, and is not assumed
// idempotent. Every capability works on the platform's own data, never on
// an open set of outside systems, so openWorldHint is false unless the
// capability says otherwise (one that reaches the web, say).
func renderTool(e *registry.Entry) toolJSON {
	t := toolJSON{plain: renderShape(e, false, false, nil)}
	for i, icons := range []bool{false, true, true} {
		out := e.OutputSchema
		if i < 2 && !e.ObjectOutput() {
			out = nil
		}
		t.full[i] = renderShape(e, true, icons, out)
		if len(out) > 0 {
			t.held[i] = renderShape(e, true, icons, heldSchema(out))
		}
	}
	return t
}

// renderShape renders one shape of a tool: titled puts the title beside
// the name (2025-06-18 on) rather than in the annotations, icons adds them
// (2025-11-25 on), and out, when not empty, is the output schema.
func renderShape(e *registry.Entry, titled, icons bool, out []byte) []byte {
	var b []byte
	b = append(b, `{"name":`...)
	b = appendString(b, e.Name)
	if titled && e.Title != "" {
		b = append(b, `,"title":`...)
		b = appendString(b, e.Title)
	}
	if e.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, e.Description)
	}
	if icons && len(e.Icons) > 0 {
		b = appendIcons(append(b, `,"icons":`...), e.Icons)
	}
	b = append(b, `,"inputSchema":`...)
	b = appendCompact(b, e.InputSchema)
	read := e.Kind == registry.Read
	b = append(b, `,"annotations":{`...)
	if !titled && e.Title != "" {
		b = append(b, `"title":`...)
		b = appendString(b, e.Title)
		b = append(b, ',')
	}
	b = append(b, `"readOnlyHint":`...)
	b = strconv.AppendBool(b, read)
	b = append(b, `,"destructiveHint":`...)
	b = strconv.AppendBool(b, !read && e.Destructive)
	b = append(b, `,"idempotentHint":`...)
	b = strconv.AppendBool(b, hint(e.IdempotentHint, read))
	b = append(b, `,"openWorldHint":`...)
	b = strconv.AppendBool(b, hint(e.OpenWorldHint, false))
	b = append(b, '}')
	if len(out) > 0 {
		b = append(b, `,"outputSchema":`...)
		b = appendCompact(b, out)
	}
	return append(b, '}')
}

// hint is the capability's declared hint, or def when it declares none.
func hint(declared *bool, def bool) bool {
	if declared != nil {
		return *declared
	}
	return def
}

// appendIcons appends icons as the MCP Icon array.
func appendIcons(b []byte, icons []registry.Icon) []byte {
	b = append(b, '[')
	for i, ic := range icons {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"src":`...)
		b = appendString(b, ic.Src)
		if ic.MIMEType != "" {
			b = append(b, `,"mimeType":`...)
			b = appendString(b, ic.MIMEType)
		}
		if len(ic.Sizes) > 0 {
			b = append(b, `,"sizes":[`...)
			for j, s := range ic.Sizes {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, s)
			}
			b = append(b, ']')
		}
		if ic.Theme != "" {
			b = append(b, `,"theme":`...)
			b = appendString(b, ic.Theme)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// heldSchema is an output schema that admits what out does and the
// pending result of a held call. An object schema's root keeps type
// object, which MCP before 2026-07-28 requires of an output schema;
// definitions move to the root, where the references in out point.
func heldSchema(out json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		return appendCompact(nil, out)
	}
	defs, hasDefs := m["$defs"]
	delete(m, "$defs")
	object := string(m["type"]) == `"object"`
	branch, _ := json.Marshal(m)
	b := []byte(`{`)
	if object {
		b = append(b, `"type":"object",`...)
	}
	if hasDefs {
		b = append(append(append(b, `"$defs":`...), appendCompact(nil, defs)...), ',')
	}
	b = append(b, `"anyOf":[`...)
	b = append(b, branch...)
	b = append(b, ',')
	b = appendCompact(b, dispatch.PendingSchema)
	return append(b, "]}"...)
}

// MetaRisk is the key of a tool's _meta that gives its risk level, so an
// agent knows before calling whether a call will wait for a human.
const MetaRisk = "io.capgate/risk"

// appendToolMeta closes a rendered tool with its _meta.
func appendToolMeta(b []byte, risk registry.Risk) []byte {
	b = append(b, `,"_meta":{"`+MetaRisk+`":`...)
	b = appendString(b, string(risk))
	return append(b, "}}"...)
}

// appendCompact appends raw JSON without insignificant whitespace. The
// registry has already parsed every schema, so Compact cannot fail on
// them; the fallback keeps any other input valid as a JSON null.
func appendCompact(b []byte, raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return append(b, "null"...)
	}
	return append(b, buf.Bytes()...)
}

// appendResultHead starts a result response for id.
func appendResultHead(b, id []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendRaw(b, id)
	return append(b, `,"result":`...)
}

// appendErrorHead starts an error response; a nil id is left out, as MCP
// prescribes for errors about a message whose id could not be read.
func appendErrorHead(b, id []byte, code int, msg string) []byte {
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id != nil {
		b = append(b, `"id":`...)
		b = appendRaw(b, id)
		b = append(b, ',')
	}
	b = append(b, `"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	return appendString(b, msg)
}

// appendError appends a complete error response without data.
func appendError(b, id []byte, code int, msg string) []byte {
	return append(appendErrorHead(b, id, code, msg), "}}"...)
}

// appendRaw appends a JSON value taken from a request or a plugin. Such
// values are valid JSON but may hold invalid UTF-8 inside strings (the only
// place a non-ASCII byte can be); those bytes become U+FFFD so the response
// stays valid UTF-8.
func appendRaw(b, raw []byte) []byte {
	if utf8.Valid(raw) {
		return append(b, raw...)
	}
	for i := 0; i < len(raw); {
		r, n := decodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, raw[i:i+n]...)
		}
		i += n
	}
	return b
}
