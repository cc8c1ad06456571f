package mcp

import (
	"bytes"
	"strconv"
	"time"
)

// Operation is one JSON-RPC request as the adapter answered it, for
// metrics named after OpenTelemetry's MCP conventions
// (mcp.server.operation.duration and its attributes). Every field is
// bounded: a name the caller chose that this server does not know is
// reported as unknown, never as sent.
type Operation struct {
	// Method is the request's method, "unknown" for one this server does
	// not serve.
	Method string
	// Tool is the registered tool a tools/call named; empty for another
	// method or an unknown tool.
	Tool            string
	ProtocolVersion string
	// ErrorType is the JSON-RPC error code the request was answered with
	// ("-32003" for a refusal), "tool_error" for a tool result with
	// isError, and empty for a success.
	ErrorType string
	Duration  time.Duration
}

// methodNames are the names Operation reports, by method.
var methodNames = [...]string{
	mUnknown: "unknown", mInitialize: "initialize", mPing: "ping", mDiscover: "server/discover",
	mToolsList: "tools/list", mToolsCall: "tools/call", mResourcesList: "resources/list",
	mResourceTemplatesList: "resources/templates/list", mResourcesRead: "resources/read",
	mTasksGet: "tasks/get", mTasksUpdate: "tasks/update", mTasksCancel: "tasks/cancel",
	mLoggingSetLevel: "logging/setLevel",
	mPromptsList:     "prompts/list", mPromptsGet: "prompts/get", mCompletionComplete: "completion/complete",
}

// observe reports the request m, answered in resp since start.
func (c *call) observe(m *message, resp []byte, start time.Time) {
	meth := lookupMethod(m.method)
	op := Operation{Method: methodNames[meth], ProtocolVersion: c.ver.String(), Duration: time.Since(start)}
	if c.tool != "" {
		if e, ok := c.h.reg.Lookup(c.tool); ok {
			op.Tool = e.Name
		}
	}
	op.ErrorType = errorType(resp)
	c.h.observe(op)
}

// errorType reads how the adapter answered from the response it wrote:
// its own bytes, so the first unescaped "error" member after the id is
// the error's (an id cannot hold an unescaped quote), and the last
// "isError" member is the result's own (only the serverInfo follows it).
func errorType(resp []byte) string {
	const errHead = `,"error":{"code":`
	if i := bytes.Index(resp, []byte(errHead)); i >= 0 && bytes.HasPrefix(resp, []byte(`{"jsonrpc":"2.0",`)) &&
		!bytes.Contains(resp[:i], []byte(`"result":`)) {
		rest := resp[i+len(errHead):]
		n := 0
		for n < len(rest) && (rest[n] == '-' || (rest[n] >= '0' && rest[n] <= '9')) {
			n++
		}
		if _, err := strconv.Atoi(string(rest[:n])); err == nil {
			return string(rest[:n])
		}
		return "unknown"
	}
	if i := bytes.LastIndex(resp, []byte(`"isError":`)); i >= 0 && bytes.HasPrefix(resp[i+len(`"isError":`):], []byte("true")) {
		return "tool_error"
	}
	return ""
}
