package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capgate/capgate/internal/dispatch"
)

// handleBody answers a whole POST body: one message, or a batch where the
// protocol version allows one. It returns the HTTP status and the response
// appended to out (empty for 202 Accepted).
func (c *call) handleBody(body, out []byte) (int, []byte) {
	c.ver = v20250326
	if hv, ok := header(c.r.Header, hdrProtocolVersion); ok {
		c.header = hv
		c.ver = parseVersion(hv)
	}
	i := skipSpace(body, 0)
	if i < len(body) && body[i] == '[' {
		return c.batch(body, out)
	}
	var m message
	if code, msg := parseMessage(body, &m); code != 0 {
		return http.StatusBadRequest, appendError(out, m.id, code, msg)
	}
	if c.ver == 0 {
		return http.StatusBadRequest, c.unsupportedVersion(out, m.id)
	}
	if m.isResponse {
		if c.ver.modern() {
			return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: clients do not send responses in protocol version "+c.ver.String())
		}
		// The client answering what a call asked it on its stream.
		return c.answered(&m, out)
	}
	if m.id == nil {
		// A notification: none is answered. notifications/cancelled
		// cancels a request of this caller's still running here.
		c.notification(&m)
		return http.StatusAccepted, out
	}
	return c.request(&m, out)
}

// unsupportedVersion is the answer to an MCP-Protocol-Version the server
// does not speak, shaped as 2026-07-28's UnsupportedProtocolVersionError so
// a modern client can pick another version from it.
func (c *call) unsupportedVersion(out, id []byte) []byte {
	out = appendErrorHead(out, id, codeUnsupportedVersion, "unsupported protocol version "+strconv.Quote(c.header))
	out = append(out, `,"data":{"supported":["`+Version20260728+`","`+Version20251125+`","`+Version20250618+`","`+Version20250326+`"],"requested":`...)
	out = appendString(out, c.header)
	return append(out, "}}}"...)
}

// batch answers a JSON-RPC batch, which only 2025-03-26 allows.
func (c *call) batch(body, out []byte) (int, []byte) {
	if !validJSON(body) {
		return http.StatusBadRequest, appendError(out, nil, codeParseError, notJSON(body))
	}
	if c.ver == 0 {
		return http.StatusBadRequest, c.unsupportedVersion(out, nil)
	}
	if !c.ver.batches() {
		return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: protocol version "+c.ver.String()+" does not allow JSON-RPC batches")
	}
	var elems [][]byte
	i := skipSpace(body, skipSpace(body, 0)+1)
	for i < len(body) && body[i] != ']' {
		end := skipValue(body, i, 1)
		elems = append(elems, body[i:end])
		i = skipSpace(body, end)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	switch {
	case len(elems) == 0:
		return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: empty batch")
	case len(elems) > maxBatch:
		return http.StatusBadRequest, appendError(out, nil, codeInvalidRequest, "invalid request: a batch holds at most "+strconv.Itoa(maxBatch)+" messages")
	}
	start := len(out)
	out = append(out, '[')
	c.inBatch = true
	defer func() { c.inBatch = false }()
	for _, e := range elems {
		var m message
		code, msg := parseMessage(e, &m)
		switch {
		case code != 0:
		case m.isResponse:
			// An answer to a call's request: taken, or dropped when none
			// waits for it, as a batch of responses gets no answer.
			c.answered(&m, nil)
			continue
		case m.id == nil:
			c.notification(&m)
			continue
		case lookupMethod(m.method) == mInitialize:
			code, msg = codeInvalidRequest, "invalid request: initialize must not be part of a batch"
		}
		if len(out) > start+1 {
			out = append(out, ',')
		}
		if code != 0 {
			out = appendError(out, m.id, code, msg)
			continue
		}
		_, out = c.request(&m, out)
	}
	if len(out) == start+1 {
		return http.StatusAccepted, out[:start]
	}
	return http.StatusOK, append(out, ']')
}

// request answers one JSON-RPC request, and tells the observer and the
// tracer of it.
func (c *call) request(m *message, out []byte) (int, []byte) {
	if c.h.observe == nil && c.h.tracing == nil {
		return c.answer(m, out)
	}
	start, before := time.Now(), len(out)
	c.tool = ""
	if c.h.tracing != nil {
		outer := c.ctx
		var span trace.Span
		c.ctx, span = c.startSpan(m)
		defer func() { c.ctx = outer }()
		defer func() { c.endSpan(span, m, out[before:]) }()
	}
	status, out := c.answer(m, out)
	if c.h.observe != nil {
		c.observe(m, out[before:], start)
	}
	return status, out
}

// answer answers one JSON-RPC request. What it adds to the context (a
// cancellation, an idempotency key) is this request's alone: the next
// message of a batch starts from the HTTP request's context again.
func (c *call) answer(m *message, out []byte) (int, []byte) {
	defer func(ctx context.Context) { c.ctx = ctx }(c.ctx)
	// The audit trail names the protocol and the request each call came in.
	c.ctx = dispatch.WithOrigin(c.ctx, dispatch.Origin{Protocol: "mcp", ProtocolVersion: c.ver.String(), RequestID: requestID(m.id)})
	meth := lookupMethod(m.method)
	var ps params
	if !parseParams(m.params, &ps) {
		return http.StatusOK, appendError(out, m.id, codeInvalidParams, "invalid params: params must be an object")
	}
	// A client that opens with initialize gets the handshake revisions. A
	// request declaring 2026-07-28 is served statelessly, and that revision
	// has no initialize: it falls through to method-not-found below.
	if meth == mInitialize && !c.ver.modern() {
		return c.initialize(m.id, &ps, out)
	}
	if c.ver.modern() {
		if status, failed, ok := c.checkModern(m, meth, &ps, out); !ok {
			return status, failed
		}
	}
	switch meth {
	case mToolsCall, mResourcesList, mResourcesRead, mPromptsGet, mCompletionComplete:
		// These reach plugins and may run long: the client may cancel them.
		g := c.cancellable(m.id)
		defer g.end()
	}
	switch meth {
	case mToolsCall:
		return c.toolsCall(m.id, &ps, out)
	case mToolsList:
		return c.toolsList(m.id, &ps, out)
	case mResourcesList:
		return c.resourcesList(m.id, &ps, out)
	case mResourceTemplatesList:
		return c.resourceTemplatesList(m.id, &ps, out)
	case mResourcesRead:
		return c.resourcesRead(m.id, &ps, out)
	case mPromptsList:
		return c.promptsList(m.id, &ps, out)
	case mPromptsGet:
		return c.promptsGet(m.id, &ps, out)
	case mCompletionComplete:
		return c.complete(m.id, &ps, out)
	case mDiscover:
		if c.ver.modern() {
			return c.discover(m.id, out)
		}
	case mTasksGet, mTasksUpdate, mTasksCancel:
		// Only where the extension is offered: elsewhere they are unknown.
		if c.ver.modern() && c.h.tasks != nil {
			return c.tasksMethod(meth, m.id, &ps, out)
		}
	case mLoggingSetLevel:
		// 2026-07-28 removed it: a request's _meta carries its level.
		if !c.ver.modern() {
			return c.setLevel(m.id, &ps, out)
		}
	case mPing:
		// 2026-07-28 removed ping along with the handshake.
		if !c.ver.modern() {
			return http.StatusOK, append(appendResultHead(out, m.id), "{}}"...)
		}
	}
	status := http.StatusOK
	if c.ver.modern() {
		// The 2026-07-28 transport answers an unknown method with 404, so
		// the JSON body tells it apart from a server without the endpoint.
		status = http.StatusNotFound
	}
	name, _ := decodeString(m.method)
	msg := "method not found: " + name
	if meth == mInitialize {
		// A client that only knows the handshake reads this and nothing
		// else, so it names what would work.
		msg += "; protocol version " + c.ver.String() + " has no initialize (use server/discover), and initialize is served for " +
			Version20251125 + ", " + Version20250618 + " and " + Version20250326
	}
	return status, appendError(out, m.id, codeMethodNotFound, msg)
}

// checkModern applies what 2026-07-28 asks of every request: the mirrored
// Mcp-Method/Mcp-Name headers match the body, and _meta carries the
// protocol version (matching MCP-Protocol-Version) and client capabilities.
// On failure it returns the 400 response to send.
func (c *call) checkModern(m *message, meth method, ps *params, out []byte) (int, []byte, bool) {
	mismatch := func(msg string) (int, []byte, bool) {
		return http.StatusBadRequest, appendError(out, m.id, codeHeaderMismatch, "header mismatch: "+msg), false
	}
	hm, ok := header(c.r.Header, hdrMethod)
	if !ok {
		return mismatch("the Mcp-Method header is required")
	}
	if !stringIs(m.method, hm) {
		return mismatch("Mcp-Method " + strconv.Quote(hm) + " does not match the body's method")
	}
	if meth == mToolsCall || meth == mPromptsGet || meth == mResourcesRead || meth == mTasksGet || meth == mTasksUpdate || meth == mTasksCancel {
		field, want := "params.name", ps.name
		switch meth {
		case mResourcesRead:
			field, want = "params.uri", ps.uri
		case mTasksGet, mTasksUpdate, mTasksCancel:
			field, want = "params.taskId", ps.taskID
		}
		hn, ok := header(c.r.Header, hdrName)
		if !ok {
			return mismatch("the Mcp-Name header is required for " + methodName(meth))
		}
		decoded, ok := decodeHeaderValue(hn)
		if !ok {
			return mismatch("the Mcp-Name header is not valid base64")
		}
		if !isString(want) || !stringIs(want, decoded) {
			return mismatch("Mcp-Name " + strconv.Quote(hn) + " does not match " + field)
		}
		if meth == mToolsCall {
			if b := c.h.paramHeaders[decoded]; b != nil {
				if msg := checkParamHeaders(c.r.Header, b, ps.arguments); msg != "" {
					return mismatch(msg)
				}
			}
		}
	}
	var rm requestMeta
	if !parseMeta(ps.meta, &rm) || !isString(rm.protocolVersion) {
		return http.StatusBadRequest, appendError(out, m.id, codeInvalidParams, "invalid params: _meta must carry "+metaProtocolVersion), false
	}
	if len(rm.capabilities) == 0 || rm.capabilities[0] != '{' {
		return http.StatusBadRequest, appendError(out, m.id, codeInvalidParams, "invalid params: _meta must carry "+metaClientCapabilities+" as an object"), false
	}
	if !stringIs(rm.protocolVersion, c.header) {
		return mismatch("MCP-Protocol-Version " + strconv.Quote(c.header) + " does not match _meta " + metaProtocolVersion)
	}
	return 0, nil, true
}

func methodByID(m method) string {
	switch m {
	case mToolsCall:
		return "tools/call"
	case mResourcesRead:
		return "resources/read"
	case mPromptsGet:
		return "prompts/get"
	}
	return "this method"
}

// closeResult ends a result object: 2026-07-28 results carry resultType and
// serverInfo, older ones end as they are. It also closes the response.
func (c *call) closeResult(out []byte, cacheable bool) []byte {
	if c.ver.modern() {
		if cacheable {
			out = append(out, c.h.cacheTail...)
		}
		out = append(out, c.h.modernTail...)
	}
	return append(out, "}}"...)
}

func (c *call) initialize(id []byte, ps *params, out []byte) (int, []byte) {
	if ps.protocolVersion != nil && !isString(ps.protocolVersion) {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: protocolVersion must be a string")
	}
	// Echo the client's revision when it is one with a handshake, else
	// offer the newest such revision and let the client decide.
	v := latestLegacy
	if s, ok := decodeString(ps.protocolVersion); ok {
		if pv := parseVersion(s); pv != 0 && !pv.modern() {
			v = pv
		}
	}
	out = appendResultHead(out, id)
	out = append(out, `{"protocolVersion":"`...)
	out = append(out, v.String()...)
	out = append(out, `","capabilities":`...)
	out = append(out, c.h.capabilities...)
	out = append(out, `,"serverInfo":`...)
	out = append(out, c.h.serverInfo...)
	out = append(out, c.h.instructions...)
	return http.StatusOK, append(out, "}}"...)
}

func (c *call) discover(id []byte, out []byte) (int, []byte) {
	out = appendResultHead(out, id)
	out = append(out, `{"supportedVersions":["`+Version20260728+`","`+Version20251125+`","`+Version20250618+`","`+Version20250326+`"],"capabilities":`...)
	out = append(out, c.h.discoverCapabilities...)
	out = append(out, c.h.instructions...)
	return http.StatusOK, c.closeResult(out, true)
}

// checkCursor rejects a cursor: lists come in one page, so no cursor this
// server issued can exist.
func checkCursor(id []byte, ps *params, out []byte) ([]byte, bool) {
	if ps.cursor == nil || string(ps.cursor) == `""` || string(ps.cursor) == "null" {
		return out, true
	}
	return appendError(out, id, codeInvalidParams, "invalid params: unknown cursor"), false
}

func (c *call) toolsList(id []byte, ps *params, out []byte) (int, []byte) {
	if out, ok := checkCursor(id, ps, out); !ok {
		return http.StatusOK, out
	}
	out = appendResultHead(out, id)
	out = append(out, `{"tools":[`...)
	for i, l := range c.h.d.Visible(c.p) {
		if i > 0 {
			out = append(out, ',')
		}
		t, ok := c.h.tools[l.Entry]
		if !ok {
			t = renderTool(l.Entry)
		}
		if c.ver.structured() {
			// The risk is the policy's, which a reload changes, so it is
			// added here rather than rendered once; 2025-03-26 has no
			// _meta on a tool.
			full := t.forVersion(c.ver, dispatch.MayBeHeld(l.Risk))
			out = append(out, full[:len(full)-1]...)
			out = appendToolMeta(out, l.Risk)
		} else {
			out = append(out, t.plain...)
		}
	}
	out = append(out, ']')
	return http.StatusOK, c.closeResult(out, true)
}

func (c *call) emptyList(id []byte, ps *params, open string, out []byte) (int, []byte) {
	if out, ok := checkCursor(id, ps, out); !ok {
		return http.StatusOK, out
	}
	out = append(appendResultHead(out, id), open...)
	return http.StatusOK, c.closeResult(out, true)
}

func (c *call) toolsCall(id []byte, ps *params, out []byte) (int, []byte) {
	if !isString(ps.name) {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: tools/call needs params.name, the tool to call")
	}
	name := c.h.toolName(ps.name)
	c.tool = name
	if c.ver.modern() && !c.inTask {
		if status, out, ok := c.toolsCallAsTask(id, name, ps, out); ok {
			return status, out
		}
	}
	var rm requestMeta
	if len(ps.meta) > 0 && string(ps.meta) != "null" {
		if !parseMeta(ps.meta, &rm) {
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: _meta must be an object")
		}
		if rm.idempotencyKey != nil {
			key, ok := decodeString(rm.idempotencyKey)
			if !ok || !isString(rm.idempotencyKey) {
				return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: _meta "+dispatch.MetaIdempotencyKey+" must be a string")
			}
			c.ctx = dispatch.WithIdempotencyKey(c.ctx, key)
		}
	}
	askable := c.askableBefore()
	if askable != nil {
		// No capabilities come with the call: it is told what the
		// revision lets a server ask (askOnStream).
		c.ctx = dispatch.WithInput(c.ctx, dispatch.Input{CanAsk: askable})
	}
	if c.ver.modern() {
		// Only this revision can put the gate's question to the client's
		// user; older ones are held for an approver instead.
		if msg := c.takeRound(ps, &rm, true); msg != "" {
			return http.StatusOK, appendError(out, id, codeInvalidParams, msg)
		}
	}
	// The provider hands the call's content blocks here; the gate's
	// result stays the structured value.
	var rep dispatch.ContentReport
	c.ctx = dispatch.WithContentReport(c.ctx, &rep)
	wants, msg := c.noticesWanted(&rm)
	if msg != "" {
		return http.StatusOK, appendError(out, id, codeInvalidParams, msg)
	}
	res, err := c.invokeHeard(name, ps.arguments, wants, rm.progressToken)
	if askable != nil {
		err = c.askOnStream(id, askable, err, func() (err error) {
			res, err = c.invokeHeard(name, ps.arguments, wants, rm.progressToken)
			return err
		})
	}
	if err != nil {
		return c.callFailed(id, name, err, out)
	}
	start := skipSpace(res, 0)
	end := skipValue(res, start, 0)
	if end < 0 || skipSpace(res, end) != len(res) {
		return c.callFailed(id, name, fmt.Errorf("capability %s returned invalid JSON", name), out)
	}
	res = res[start:end]
	return http.StatusOK, c.closeResult(c.appendCallResult(appendResultHead(out, id), res, rep.Blocks), false)
}

// appendCallResult appends a successful tool result: the content blocks
// and the structured value res, as the revision allows. Up to 2025-11-25
// structuredContent must be an object; 2026-07-28 takes any JSON value,
// and a null one (a call that answered blocks alone) is left out. Without
// blocks of its own, the call's content is one text block repeating the
// structured value for clients that predate structuredContent; with
// blocks, that text block is added only where structuredContent cannot
// carry the value.
func (c *call) appendCallResult(out, res []byte, blocks []dispatch.Content) []byte {
	null := string(res) == "null"
	structured := !null && (c.ver.modern() || (c.ver.structured() && res[0] == '{'))
	out = append(out, `{"content":[`...)
	for i := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = c.appendContent(out, &blocks[i])
	}
	if len(blocks) == 0 || (!structured && !null) {
		if len(blocks) > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"text","text":`...)
		out = appendString(out, res)
		out = append(out, '}')
	}
	out = append(out, ']')
	if structured {
		out = append(out, `,"structuredContent":`...)
		out = appendRaw(out, res)
	}
	return append(out, `,"isError":false`...)
}

// toolName turns the raw name into a string, taking the registry's own
// copy when it exists so the common case allocates nothing. Unknown names
// still go to the gate, which is what refuses them.
func (h *Handler) toolName(raw []byte) string {
	if e, ok := h.reg.Lookup(string(raw[1 : len(raw)-1])); ok {
		return e.Name
	}
	s, _ := decodeString(raw)
	return s
}

// invokeHeard runs the call, streaming its notices when its client wants
// to hear any.
func (c *call) invokeHeard(name string, args []byte, wants dispatch.Wants, token []byte) (json.RawMessage, error) {
	if wants.Any() {
		return c.invokeStreaming(name, args, wants, token)
	}
	return c.invoke(name, args)
}

// panicError carries a panic out of a provider so it is answered like any
// internal failure instead of dropping the connection.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

func (c *call) invoke(name string, args []byte) (res json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &panicError{value: v, stack: debug.Stack()}
		}
	}()
	if t := c.h.tracing; t != nil && t.Invoke != nil {
		return t.Invoke(c.ctx, c.p, name, args)
	}
	return c.h.d.Invoke(c.ctx, c.p, name, args)
}

// callFailed maps a gate or plugin failure onto the wire: refusals are
// JSON-RPC errors, failures the agent can act on are tool results, and
// anything else is a tool result with a reference, never the cause.
func (c *call) callFailed(id []byte, name string, err error, out []byte) (int, []byte) {
	var refusal *dispatch.Refusal
	if errors.As(err, &refusal) {
		return http.StatusOK, c.refused(id, refusal, out)
	}
	var nc *dispatch.NeedsConfirmation
	if errors.As(err, &nc) {
		return c.askToConfirm(id, nc, out)
	}
	var ni *dispatch.NeedsInput
	if errors.As(err, &ni) {
		return c.askForInput(id, ni, out)
	}
	var mc *dispatch.MissingCapability
	if errors.As(err, &mc) {
		return c.missingCapability(id, mc, out)
	}
	var toolErr *dispatch.ToolError
	if errors.As(err, &toolErr) {
		return http.StatusOK, c.errorResult(id, toolErr.Message, out)
	}
	if errors.Is(err, dispatch.ErrUnknownCapability) {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: unknown tool "+strconv.Quote(name))
	}
	msg := c.internalFailure(name, err)
	if c.inTask {
		return http.StatusOK, appendError(out, id, codeInternalError, msg)
	}
	return http.StatusOK, c.errorResult(id, msg, out)
}

// refused logs a gate refusal and appends its JSON-RPC error: -32003 with
// data naming the step, the reason and the capability (and, for a rate
// limit, retry_after_ms). Every method that
// reaches the gate answers a refusal with exactly these bytes.
func (c *call) refused(id []byte, refusal *dispatch.Refusal, out []byte) []byte {
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: call refused",
		slog.String("capability", refusal.Capability), slog.String("step", string(refusal.Step)),
		slog.String("role", c.p.Role), slog.String("user", c.p.UserID))
	out = appendErrorHead(out, id, codeForbidden, "forbidden: "+refusal.Reason)
	out = append(out, `,"data":{"step":`...)
	out = appendString(out, string(refusal.Step))
	out = append(out, `,"reason":`...)
	out = appendString(out, refusal.Reason)
	out = append(out, `,"capability":`...)
	out = appendString(out, refusal.Capability)
	if refusal.RetryAfter > 0 {
		// Whole milliseconds, rounded up: retrying at the time said must
		// not be refused again for being a fraction early.
		out = append(out, `,"retry_after_ms":`...)
		out = strconv.AppendInt(out, (refusal.RetryAfter + time.Millisecond - 1).Milliseconds(), 10)
	}
	return append(out, "}}}"...)
}

// internalFailure logs a failure that is neither a refusal nor the
// caller's to fix, under a fresh correlation id, and returns what the agent
// may read about it: what happened and the reference, never the cause.
func (c *call) internalFailure(name string, err error) string {
	// The gate names the failure after its audit record when it keeps one.
	ref := correlationID()
	var ie *dispatch.InternalError
	if errors.As(err, &ie) {
		ref, err = ie.Ref, ie.Err
	}
	attrs := []slog.Attr{slog.String("correlation_id", ref), slog.String("capability", name), slog.String("error", err.Error())}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		c.h.log.LogAttrs(c.ctx, slog.LevelWarn, "mcp: call timed out", attrs...)
		return name + " did not finish within the time limit; it may be retried later (reference " + ref + ")"
	case errors.Is(err, context.Canceled):
		c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: call cancelled", attrs...)
		return name + " was cancelled (reference " + ref + ")"
	}
	var pe *panicError
	if errors.As(err, &pe) {
		attrs = append(attrs, slog.String("stack", string(pe.stack)))
	}
	c.h.log.LogAttrs(c.ctx, slog.LevelError, "mcp: call failed", attrs...)
	return "internal error while running " + name + " (reference " + ref + ")"
}

// errorResult is a tool result with isError set: the agent reads msg.
func (c *call) errorResult(id []byte, msg string, out []byte) []byte {
	out = appendResultHead(out, id)
	out = append(out, `{"content":[{"type":"text","text":`...)
	out = appendString(out, msg)
	out = append(out, `}],"isError":true`...)
	return c.closeResult(out, false)
}

// maxRequestIDBytes bounds the request id the audit trail is given: a
// JSON-RPC id is the caller's to choose.
const maxRequestIDBytes = 128

// requestID is a JSON-RPC id as the audit trail keeps it: its JSON text
// (a string keeps its quotes, so "1" and 1 stay apart), cut to a bound.
func requestID(raw []byte) string {
	if len(raw) > maxRequestIDBytes {
		raw = raw[:maxRequestIDBytes]
	}
	return string(raw)
}

// correlationID names one failure in the log and in the agent's
// transcript; it needs to be unique, not secret.
func correlationID() string {
	var b [16]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = hexDigits[n&0xf]
		n >>= 4
	}
	return string(b[:])
}
