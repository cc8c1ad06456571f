package stdio

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
)

// Keys of a request's _meta that the 2026-07-28 revision defines.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// firstModern is the first protocol revision whose requests carry their
// version in _meta and mirror the method and name into headers. Revisions
// are dates, so a later one compares greater.
const firstModern = "2026-07-28"

// params is what the bridge reads of a request's params.
type params struct {
	Name      json.RawMessage            `json:"name"`
	URI       json.RawMessage            `json:"uri"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

func readParams(raw json.RawMessage) params {
	var p params
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &p) // what does not parse is left for capgate to refuse
	}
	return p
}

// version is the protocol version a message is sent under: the one its
// _meta names (2026-07-28 and later carry it in every request), else the
// one initialize negotiated, else none (a client that has not negotiated
// yet, which capgate takes as 2025-03-26).
func (b *Bridge) version(p params) string {
	var v string
	if raw, ok := p.Meta[metaProtocolVersion]; ok && json.Unmarshal(raw, &v) == nil && v != "" {
		return v
	}
	if n := b.negotiated.Load(); n != nil {
		return *n
	}
	return ""
}

// setHeaders sets the headers of the POST carrying m: the transport's own,
// the token, and at 2026-07-28 and later the request metadata mirrored
// from the body (Mcp-Method, Mcp-Name, Mcp-Param-*), as the Streamable HTTP
// transport asks.
func (b *Bridge) setHeaders(h http.Header, m *message, p params, ver string) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Authorization", "Bearer "+b.opts.Token)
	h.Set("User-Agent", b.ua)
	if ver != "" {
		h.Set("Mcp-Protocol-Version", ver)
	}
	if ver < firstModern || m.batch || m.method == "" {
		return
	}
	h.Set("Mcp-Method", headerValue(m.method))
	var name json.RawMessage
	switch m.method {
	case "tools/call", "prompts/get":
		name = p.Name
	case "resources/read":
		name = p.URI
	}
	var s string
	if name != nil && json.Unmarshal(name, &s) == nil {
		h.Set("Mcp-Name", headerValue(s))
	}
	if m.method == "tools/call" && s != "" {
		for _, bd := range b.tools.get(s) {
			if v, ok := bd.value(p.Arguments); ok {
				h.Set(bd.header, v)
			}
		}
	}
}

// headerValue encodes a value for a header as the transport says: plain
// when it is printable ASCII without surrounding whitespace and does not
// look encoded itself, else "=?base64?…?=" of its UTF-8.
func headerValue(s string) string {
	plain := s == strings.TrimSpace(s) && !(strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?="))
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain {
		return s
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
}

// binding is one x-mcp-header annotation of a tool's input schema: the
// argument at path is mirrored into header.
type binding struct {
	path   []string
	header string // canonical "Mcp-Param-<name>"
}

// value is the header value of the argument at the binding's path, and
// whether one is sent: absent and null arguments send none, and neither
// do objects or arrays, which no annotation may name.
func (bd binding) value(args json.RawMessage) (string, bool) {
	v := args
	for _, key := range bd.path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return "", false
		}
		var ok bool
		if v, ok = obj[key]; !ok {
			return "", false
		}
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return headerValue(s), true
	case 't', 'f':
		return string(v), true
	case 'n', '{', '[':
		return "", false
	}
	return string(v), true // a number, as the client wrote it
}

// toolHeaders holds the x-mcp-header bindings of the tools capgate listed,
// by tool name; most tools have none.
type toolHeaders struct {
	mu sync.Mutex
	m  map[string][]binding
}

func (t *toolHeaders) get(name string) []binding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[name]
}

// learn records the bindings of the tools in a tools/list result.
func (t *toolHeaders) learn(result json.RawMessage) {
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tool := range r.Tools {
		bs := bindingsOf(tool.InputSchema)
		if len(bs) == 0 {
			delete(t.m, tool.Name)
			continue
		}
		if t.m == nil {
			t.m = map[string][]binding{}
		}
		t.m[tool.Name] = bs
	}
}

// schemaNode is the part of a JSON Schema an annotation may live in: only
// properties reachable through "properties" alone count.
type schemaNode struct {
	Header     json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaNode `json:"properties"`
}

// bindingsOf collects a schema's annotations whose names are header
// tokens.
func bindingsOf(schema json.RawMessage) []binding {
	var root schemaNode
	if json.Unmarshal(schema, &root) != nil {
		return nil
	}
	var out []binding
	var walk func(props map[string]schemaNode, prefix []string, depth int)
	walk = func(props map[string]schemaNode, prefix []string, depth int) {
		if depth > 32 {
			return
		}
		for name, p := range props {
			path := append(append([]string(nil), prefix...), name)
			var h string
			if json.Unmarshal(p.Header, &h) == nil && isToken(h) {
				out = append(out, binding{path: path, header: textproto.CanonicalMIMEHeaderKey("Mcp-Param-" + h)})
			}
			walk(p.Properties, path, depth+1)
		}
	}
	walk(root.Properties, nil, 0)
	return out
}

// isToken reports an HTTP field-name token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
