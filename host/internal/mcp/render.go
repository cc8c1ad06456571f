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
	// plain omits outputSchema, for 2025-03-26.
	plain []byte
	// full carries outputSchema when the capability declares one.
	full []byte
	// held is full with an outputSchema that also admits the pending
	// result, for a level at which calls wait for a human; nil when the
	// capability declares no output schema.
	held []byte
}

// renderTool projects a capability onto the MCP Tool shape. The hints follow
// the capability's kind: a read changes nothing (so it is also idempotent);
// an action is destructive only when the capability says its effect cannot
// be undone, and is not assumed idempotent. Every capability works on the
// platform's own data, never on an open set of outside systems, so
// openWorldHint is false.
func renderTool(e *registry.Entry) toolJSON {
	var b []byte
	b = append(b, `{"name":`...)
	b = appendString(b, e.Name)
	if e.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, e.Description)
	}
	b = append(b, `,"inputSchema":`...)
	b = appendCompact(b, e.InputSchema)
	read := e.Kind == registry.Read
	b = append(b, `,"annotations":{"readOnlyHint":`...)
	b = strconv.AppendBool(b, read)
	b = append(b, `,"destructiveHint":`...)
	b = strconv.AppendBool(b, !read && e.Destructive)
	b = append(b, `,"idempotentHint":`...)
	b = strconv.AppendBool(b, read)
	b = append(b, `,"openWorldHint":false}`...)
	t := toolJSON{plain: append(append([]byte(nil), b...), '}')}
	if len(e.OutputSchema) > 0 {
		head := len(b)
		b = append(b, `,"outputSchema":`...)
		b = appendCompact(b, e.OutputSchema)
		t.held = append(append(append(append([]byte(nil), b[:head]...), `,"outputSchema":`...), heldSchema(e.OutputSchema)...), '}')
	}
	t.full = append(b, '}')
	return t
}

// heldSchema is an output schema that admits what out does and the
// pending result of a held call. The root keeps type object, which MCP
// requires of an output schema; definitions move to the root, where the
// references in out point.
func heldSchema(out json.RawMessage) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		return appendCompact(nil, out)
	}
	defs, hasDefs := m["$defs"]
	delete(m, "$defs")
	branch, _ := json.Marshal(m)
	b := []byte(`{"type":"object",`)
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
