package mcp

import (
	"strconv"

	"github.com/capgate/capgate/internal/dispatch"
)

// message is one decoded JSON-RPC message. Every field is a sub-slice of the
// request body, which stays alive (pooled) until the response is written.
type message struct {
	id     []byte // raw id token; nil when absent or unusable
	hasID  bool   // an "id" member was present, even if unusable
	method []byte // raw method string token; nil when absent
	params []byte // raw params value; nil when absent
	// isResponse marks a message with result or error and no method: the
	// client answering a server request; result and errVal are the raw
	// values of those members.
	isResponse     bool
	result, errVal []byte
}

// parseMessage decodes one message. A non-zero code is the JSON-RPC error to
// answer with (-32700 for bytes that are not JSON, -32600 for JSON that is
// not a request), with m.id set when it could be read.
func parseMessage(b []byte, m *message) (code int, msg string) {
	start := skipSpace(b, 0)
	end := len(b)
	for end > start && isSpace(b[end-1]) {
		end--
	}
	v := b[start:end]
	if len(v) == 0 {
		return codeParseError, "parse error: empty body"
	}
	if v[0] != '{' {
		if validJSON(v) {
			return codeInvalidRequest, "invalid request: a JSON-RPC message is a JSON object"
		}
		return codeParseError, notJSON(v)
	}
	var (
		it                  = iterObject(v, 0)
		mb                  member
		version             []byte
		hasResult, hasError bool
		badID               bool
	)
	for it.next(&mb) {
		switch {
		case mb.is("jsonrpc"):
			version = mb.val
		case mb.is("id"):
			m.hasID = true
			switch c := mb.val[0]; {
			case c == '"' || c == '-' || (c >= '0' && c <= '9'):
				m.id, badID = mb.val, false
			default:
				// MCP forbids a null id, and JSON-RPC allows only strings
				// and numbers.
				m.id, badID = nil, true
			}
		case mb.is("method"):
			m.method = mb.val
		case mb.is("params"):
			m.params = mb.val
		case mb.is("result"):
			hasResult, m.result = true, mb.val
		case mb.is("error"):
			hasError, m.errVal = true, mb.val
		}
	}
	if it.bad {
		m.id = nil
		return codeParseError, notJSON(v)
	}
	if code, msg := refuseDuplicates(v, m); code != 0 {
		return code, msg
	}
	if !stringIs(version, "2.0") {
		return codeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`
	}
	if badID {
		return codeInvalidRequest, `invalid request: "id" must be a string or a number`
	}
	if m.method == nil {
		if (hasResult || hasError) && m.id != nil {
			m.isResponse = true
			return 0, ""
		}
		return codeInvalidRequest, `invalid request: "method" is missing`
	}
	if m.method[0] != '"' {
		return codeInvalidRequest, `invalid request: "method" must be a string`
	}
	if len(m.params) == 4 && string(m.params) == "null" {
		m.params = nil
	}
	return 0, ""
}

// notJSON is the parse error for a body the scanner refused: one nested
// deeper than it follows is told so, any other is not JSON.
func notJSON(b []byte) string {
	d := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if d++; d > maxDepth {
				return "parse error: the body nests deeper than " + strconv.Itoa(maxDepth) + " levels"
			}
		case '}', ']':
			d--
		}
	}
	return "parse error: the body is not valid JSON"
}

// method identifies the methods the adapter serves.
type method uint8

const (
	mUnknown method = iota
	mInitialize
	mPing
	mDiscover
	mToolsList
	mToolsCall
	mResourcesList
	mResourceTemplatesList
	mResourcesRead
	mTasksGet
	mTasksUpdate
	mTasksCancel
	mLoggingSetLevel
	mPromptsList
	mPromptsGet
	mCompletionComplete
)

// lookupMethod maps the raw method token to a method without allocating.
func lookupMethod(raw []byte) method {
	if len(raw) < 2 {
		return mUnknown
	}
	name := raw[1 : len(raw)-1]
	for _, c := range name {
		if c == '\\' {
			s, ok := decodeString(raw)
			if !ok {
				return mUnknown
			}
			return methodByName(s)
		}
	}
	return methodByName(string(name))
}

func methodByName(s string) method {
	switch s {
	case "initialize":
		return mInitialize
	case "ping":
		return mPing
	case "server/discover":
		return mDiscover
	case "tools/list":
		return mToolsList
	case "tools/call":
		return mToolsCall
	case "resources/list":
		return mResourcesList
	case "resources/templates/list":
		return mResourceTemplatesList
	case "resources/read":
		return mResourcesRead
	case "tasks/get":
		return mTasksGet
	case "tasks/update":
		return mTasksUpdate
	case "tasks/cancel":
		return mTasksCancel
	case "logging/setLevel":
		return mLoggingSetLevel
	case "prompts/list":
		return mPromptsList
	case "prompts/get":
		return mPromptsGet
	case "completion/complete":
		return mCompletionComplete
	}
	return mUnknown
}

// params holds the request parameters any served method reads. One pass
// over the params object collects them all.
type params struct {
	name, uri, cursor, protocolVersion []byte // raw values
	level                              []byte // logging/setLevel
	arguments                          []byte
	meta                               []byte
	requestID                          []byte // notifications/cancelled
	taskID                             []byte // tasks/get, tasks/update, tasks/cancel
	// requestState and inputResponses answer an input_required result
	// (2026-07-28).
	requestState, inputResponses []byte
	// ref, argument and context are completion/complete's.
	ref, argument, context []byte
}

// parseParams reads the params object; false when params is not an object.
func parseParams(raw []byte, p *params) bool {
	if raw == nil {
		return true
	}
	it := iterObject(raw, 1)
	var mb member
	for it.next(&mb) {
		switch {
		case mb.is("name"):
			p.name = mb.val
		case mb.is("arguments"):
			p.arguments = mb.val
		case mb.is("uri"):
			p.uri = mb.val
		case mb.is("cursor"):
			p.cursor = mb.val
		case mb.is("protocolVersion"):
			p.protocolVersion = mb.val
		case mb.is("level"):
			p.level = mb.val
		case mb.is("_meta"):
			p.meta = mb.val
		case mb.is("requestId"):
			p.requestID = mb.val
		case mb.is("taskId"):
			p.taskID = mb.val
		case mb.is("requestState"):
			p.requestState = mb.val
		case mb.is("inputResponses"):
			p.inputResponses = mb.val
		case mb.is("ref"):
			p.ref = mb.val
		case mb.is("argument"):
			p.argument = mb.val
		case mb.is("context"):
			p.context = mb.val
		}
	}
	return !it.bad
}

// isString reports whether a raw value is a JSON string token.
func isString(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' }

// requestMeta is the per-request protocol metadata of 2026-07-28.
type requestMeta struct {
	protocolVersion []byte
	capabilities    []byte
	idempotencyKey  []byte
	// progressToken asks for the call's progress; logLevel for its log
	// messages from that level up.
	progressToken, logLevel []byte
	// traceparent and tracestate are the caller's W3C trace context, which
	// the request's span continues.
	traceparent, tracestate []byte
}

// Keys of the 2026-07-28 per-request _meta fields.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
)

func parseMeta(raw []byte, rm *requestMeta) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	it := iterObject(raw, 2)
	var mb member
	for it.next(&mb) {
		switch {
		case mb.is(metaProtocolVersion):
			rm.protocolVersion = mb.val
		case mb.is(metaClientCapabilities):
			rm.capabilities = mb.val
		case mb.is(dispatch.MetaIdempotencyKey):
			rm.idempotencyKey = mb.val
		case mb.is("progressToken"):
			rm.progressToken = mb.val
		case mb.is(metaLogLevel):
			rm.logLevel = mb.val
		case mb.is("traceparent"):
			rm.traceparent = mb.val
		case mb.is("tracestate"):
			rm.tracestate = mb.val
		}
	}
	return !it.bad
}
