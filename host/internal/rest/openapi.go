package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// The OpenAPI document is made per token, from exactly the capabilities
// the list shows it (Dispatcher.Visible): a client generating tools from
// it gets the ones it may call, and learns nothing of the others, as
// tools/list shows an MCP client. What does not depend on the token (each
// capability's schemas, with their references rewritten for their place
// in the document) is rendered once, at New.

// OpenAPIVersion is the version of the OpenAPI specification the document
// follows.
const OpenAPIVersion = "3.1.0"

// openAPIParts is what every token's document shares.
type openAPIParts struct {
	version string
	schemas map[*registry.Entry]entrySchemas
}

// entrySchemas are a capability's schemas as components of the document.
type entrySchemas struct {
	input, output json.RawMessage
}

func newOpenAPIParts(reg *registry.Registry, version string) openAPIParts {
	if version == "" {
		version = "dev"
	}
	parts := openAPIParts{version: version, schemas: map[*registry.Entry]entrySchemas{}}
	for _, e := range reg.All() {
		parts.schemas[e] = schemasOf(e)
	}
	return parts
}

func schemasOf(e *registry.Entry) entrySchemas {
	s := entrySchemas{input: placeSchema(e.InputSchema, inputComponent(e.Name))}
	if len(e.OutputSchema) > 0 {
		s.output = placeSchema(e.OutputSchema, outputComponent(e.Name))
	}
	return s
}

// Component names of a capability's schemas. Capability names hold no
// character a component name may not (letters, digits, _ and .), and the
// two suffixes end differently, so no two capabilities' names meet.
func inputComponent(name string) string  { return name + ".input" }
func outputComponent(name string) string { return name + ".output" }

// operationID is a capability's operationId: its name with each dot a
// hyphen, the characters tool-calling APIs accept in a function name.
// Segments of a name hold no hyphen, so no two names meet.
func operationID(name string) string { return strings.ReplaceAll(name, ".", "-") }

// placeSchema is schema as components.schemas[component]: its local
// references ("#", "#/$defs/x", "#/definitions/x") pointed at where it now
// sits, since a reference resolves against the document that holds it. A
// schema with an $id of its own is a resource whose references resolve
// against it, and is kept as it is.
func placeSchema(schema json.RawMessage, component string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return schema
	}
	m, ok := v.(map[string]any)
	if !ok {
		return schema
	}
	if _, hasID := m["$id"]; hasID {
		return schema
	}
	base := "#/components/schemas/" + escapePointer(component)
	rewriteRefs(m, base)
	b, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return b
}

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// rewriteRefs prefixes every local reference in the schema m with base.
// It knows which keywords hold schemas, so a property that happens to be
// named "$ref" or "const", and a value that happens to hold one, are left
// alone.
func rewriteRefs(m map[string]any, base string) {
	for k, v := range m {
		switch k {
		case "$ref", "$dynamicRef":
			if s, ok := v.(string); ok && strings.HasPrefix(s, "#") {
				m[k] = base + s[1:]
			}
		case "const", "enum", "default", "examples", "example":
			// Values, not schemas.
		case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies":
			if sub, ok := v.(map[string]any); ok {
				for _, s := range sub {
					rewriteAny(s, base)
				}
			}
		default:
			rewriteAny(v, base)
		}
	}
}

func rewriteAny(v any, base string) {
	switch t := v.(type) {
	case map[string]any:
		rewriteRefs(t, base)
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				rewriteRefs(m, base)
			}
		}
	}
}

// document renders the OpenAPI document of the capabilities visible.
func (h *Handler) document(visible []dispatch.Listed) ([]byte, error) {
	paths := make(map[string]any, len(visible)+1)
	schemas := map[string]any{
		"Problem":         json.RawMessage(problemSchema),
		"PendingApproval": dispatch.PendingSchema,
		"CapabilityList":  json.RawMessage(listSchema),
	}
	paths[CapabilitiesPath] = map[string]any{"get": map[string]any{
		"operationId": "listCapabilities",
		"summary":     "The capabilities this token may call",
		"description": "Every capability the gate admits this token to before looking at arguments, in name order: what MCP's tools/list shows the same token.",
		"tags":        []string{"capgate"},
		"responses": map[string]any{
			"200": map[string]any{"description": "the capabilities", "content": map[string]any{
				"application/json": map[string]any{"schema": ref("schemas", "CapabilityList")}}},
			"403": ref("responses", "OriginRefused"),
		},
	}}
	for _, l := range visible {
		s, ok := h.doc.schemas[l.Entry]
		if !ok {
			s = schemasOf(l.Entry)
		}
		schemas[inputComponent(l.Name)] = s.input
		if s.output != nil {
			schemas[outputComponent(l.Name)] = s.output
		}
		paths[CapabilitiesPath+"/"+l.Name] = map[string]any{"post": operation(l, s.output != nil)}
	}
	doc := openAPIDoc{
		OpenAPI: OpenAPIVersion,
		Info: map[string]any{
			"title":   "capgate",
			"version": h.doc.version,
			"description": "The capabilities this token may call, each an operation: POST its arguments as a JSON object, " +
				"get its result. Every call passes capgate's gate; a refusal is a problem (RFC 9457) naming the gate's step.",
		},
		Security: []map[string][]string{{"bearer": {}}},
		Paths:    paths,
		Components: map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{
				"type": "http", "scheme": "bearer", "description": "a capgate token (tokens: in the configuration)",
			}},
			"parameters": map[string]any{"IdempotencyKey": map[string]any{
				"name": IdempotencyKeyHeader, "in": "header", "required": false,
				"description": "Makes a repeat of this action within the retention replay its first outcome, running nothing: " +
					"1 to 255 printable ASCII characters, as a structured-field string (\"…\") or bare.",
				"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": 257},
			}},
			"headers": map[string]any{"RetryAfter": map[string]any{
				"description": "seconds until the same call may be admitted",
				"schema":      map[string]any{"type": "integer", "minimum": 0},
			}},
			"responses": problemResponses(),
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode the OpenAPI document: %w", err)
	}
	return b, nil
}

// openAPIDoc orders the document's top-level members as readers expect.
type openAPIDoc struct {
	OpenAPI    string                `json:"openapi"`
	Info       map[string]any        `json:"info"`
	Security   []map[string][]string `json:"security"`
	Paths      map[string]any        `json:"paths"`
	Components map[string]any        `json:"components"`
}

func ref(kind, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + kind + "/" + escapePointer(name)}
}

// operation is the POST of one capability.
func operation(l dispatch.Listed, hasOutput bool) map[string]any {
	result := map[string]any{}
	if hasOutput {
		result["schema"] = ref("schemas", outputComponent(l.Name))
	}
	responses := map[string]any{
		"200": map[string]any{"description": "the capability's result", "content": map[string]any{"application/json": result}},
		"400": ref("responses", "BadRequest"),
		"403": ref("responses", "Refused"),
		"404": ref("responses", "UnknownCapability"),
		"413": ref("responses", "TooLarge"),
		"415": ref("responses", "UnsupportedMediaType"),
		"422": ref("responses", "ToolError"),
		"429": ref("responses", "RateLimited"),
		"500": ref("responses", "InternalError"),
		"503": ref("responses", "Unavailable"),
		"504": ref("responses", "Timeout"),
	}
	if dispatch.MayBeHeld(l.Risk) {
		responses["202"] = ref("responses", "PendingApproval")
	}
	desc := l.Description
	if dispatch.MayBeHeld(l.Risk) {
		desc += "\n\nRisk " + string(l.Risk) + ": a call waits for a human's approval and answers 202 with the pending approval; nothing has run yet."
	}
	op := map[string]any{
		"operationId": operationID(l.Name),
		"summary":     l.Name,
		"description": desc,
		"tags":        []string{l.Pack},
		"requestBody": map[string]any{
			"description": "the arguments; an absent body is the empty object",
			"required":    false,
			"content":     map[string]any{"application/json": map[string]any{"schema": ref("schemas", inputComponent(l.Name))}},
		},
		"responses":            responses,
		"x-capgate-capability": l.Name,
		"x-capgate-kind":       l.Kind.String(),
		"x-capgate-risk":       string(l.Risk),
	}
	if l.Kind == registry.Action {
		op["parameters"] = []any{ref("parameters", "IdempotencyKey")}
	}
	return op
}

// problemResponses are the answers every call may get besides its result.
func problemResponses() map[string]any {
	problem := func(desc string, retry bool) map[string]any {
		r := map[string]any{"description": desc, "content": map[string]any{
			"application/problem+json": map[string]any{"schema": ref("schemas", "Problem")}}}
		if retry {
			r["headers"] = map[string]any{"Retry-After": ref("headers", "RetryAfter")}
		}
		return r
	}
	return map[string]any{
		"BadRequest":           problem("the body is not JSON, or the Idempotency-Key header is malformed", false),
		"OriginRefused":        problem("a browser origin this server does not allow (http.allowed_origins)", false),
		"Refused":              problem("the gate refused the call: step, reason and capability say at which step and why; or a browser origin this server does not allow", false),
		"UnknownCapability":    problem("no capability has this name", false),
		"TooLarge":             problem("the body exceeds http.max_body_bytes", false),
		"UnsupportedMediaType": problem("the body is not application/json", false),
		"ToolError":            problem("the call failed in a way the caller can act on: code is invalid_input, not_found or conflict", false),
		"RateLimited":          problem("refused at step rate_limit: retry after Retry-After seconds (retry_after_ms, exactly)", true),
		"InternalError":        problem("the call failed inside capgate or its plugin; reference names it in the host's log and audit trail", false),
		"Unavailable":          problem("nothing ran and the same call may succeed later: the plugin is restarting or busy (code unavailable), the audit trail cannot be written (step audit), or the server is at http.max_in_flight", true),
		"Timeout":              problem("the call did not finish within http.request_timeout; reference names it", false),
		"PendingApproval": map[string]any{
			"description": "the call waits for a human's approval; nothing has run yet. Follow it with approvals.get {approval_id}",
			"content":     map[string]any{"application/json": map[string]any{"schema": ref("schemas", "PendingApproval")}},
		},
	}
}

// problemSchema is the JSON Schema of the problems the adapter answers.
const problemSchema = `{"type":"object","description":"RFC 9457 problem details",` +
	`"properties":{` +
	`"type":{"type":"string","description":"always about:blank: the status says what kind of problem it is"},` +
	`"title":{"type":"string"},"status":{"type":"integer"},"detail":{"type":"string"},` +
	`"step":{"type":"string","enum":["kill_switch","pack","user_binding","scope","permission","risk","audit","rate_limit","ownership"],"description":"the gate's step that refused the call"},` +
	`"reason":{"type":"string","description":"why the gate refused, for a human"},` +
	`"capability":{"type":"string"},` +
	`"retry_after_ms":{"type":"integer","description":"for a rate limit: milliseconds until the same call is admitted"},` +
	`"code":{"type":"string","enum":["invalid_input","not_found","conflict","unavailable"],"description":"what kind of failure the caller can act on"},` +
	`"reference":{"type":"string","description":"names an internal failure in the host's log and audit trail"}},` +
	`"required":["type","title","status","detail"]}`

// listSchema is the JSON Schema of GET /api/v1/capabilities's answer.
const listSchema = `{"type":"object","properties":{"capabilities":{"type":"array","items":{"type":"object",` +
	`"properties":{"name":{"type":"string"},"description":{"type":"string"},"kind":{"type":"string","enum":["read","action"]},` +
	`"pack":{"type":"string"},"risk":{"type":"string","enum":["safe","review_required","dangerous"]},` +
	`"destructive":{"type":"boolean"},"owner_guarded":{"type":"boolean"},"path":{"type":"string"},` +
	`"input_schema":{"type":"object"},"output_schema":{"type":"object"}},` +
	`"required":["name","kind","pack","risk","destructive","owner_guarded","path","input_schema"]}}},"required":["capabilities"]}`
