package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// codeHeaderMismatch is the transport's error for mirrored headers that
// do not match the body (2026-07-28).
const codeHeaderMismatch = -32020

// errTimedOut is the cause of an exchange ended by Options.Timeout.
var errTimedOut = errors.New("timed out")

// handle forwards one message and writes what comes back. A request whose
// forwarding fails is answered with a CodeBridge error naming the
// problem; a notification or a response is not answered, and the problem
// is logged.
func (b *Bridge) handle(ctx context.Context, m message) {
	var p params
	if !m.batch {
		p = readParams(m.params)
	}
	ver := b.version(p)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var f *flight
	if m.isRequest() {
		key := idKey(m.id)
		f = b.flights.start(key, ver, cancel)
		defer b.flights.end(key, f)
	}
	// Nothing more is written for a request the client cancelled, nor
	// once the bridge is stopping.
	gone := func() bool { return parent.Err() != nil || (f != nil && f.cancelled.Load()) }

	start := time.Now()
	if b.log.Enabled(parent, slog.LevelDebug) {
		b.log.LogAttrs(parent, slog.LevelDebug, "message forwarding", slog.String("method", m.methodName()), slog.String("version", clip(ver)))
	}
	status, retry, prob := b.exchange(ctx, &m, p, ver, true, gone)
	if retry {
		// The spec's remedy for a HeaderMismatch on tools/call: read the
		// tool's schema again (its x-mcp-header annotations) and send the
		// call once more. capgate refuses a mismatch before the call
		// runs, so nothing ran twice.
		b.refreshTools(ctx, p, ver)
		status, _, prob = b.exchange(ctx, &m, p, ver, false, gone)
	}
	attrs := []slog.Attr{slog.String("method", m.methodName()), slog.Int("status", status), slog.Duration("took", time.Since(start))}
	if m.id != nil {
		attrs = append(attrs, slog.String("id", clip(idKey(m.id))))
	}
	switch {
	case gone():
		b.log.LogAttrs(parent, slog.LevelDebug, "message cancelled", attrs...)
	case prob != nil:
		b.log.LogAttrs(parent, slog.LevelWarn, prob.Message, append(attrs, slog.String("problem", string(prob.Kind)))...)
		if m.isRequest() {
			b.writeProblem(m.id, prob)
		} else if m.batch && len(m.ids) > 0 {
			b.writeBatchProblem(m.ids, prob)
		}
	default:
		b.log.LogAttrs(parent, slog.LevelDebug, "message forwarded", attrs...)
	}
}

// exchange POSTs m and relays the answer. It returns the HTTP status (0
// when none came), whether the answer was a HeaderMismatch worth a retry
// (only when first), and the problem when m could not be forwarded or its
// answer not read.
func (b *Bridge) exchange(ctx context.Context, m *message, p params, ver string, first bool, gone func() bool) (int, bool, *Problem) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(b.opts.Timeout, func() { cancel(errTimedOut) })
	defer timer.Stop()
	alive := func() { timer.Reset(b.opts.Timeout) }

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url.String(), bytes.NewReader(m.raw))
	if err != nil {
		return 0, false, &Problem{Unreachable, fmt.Sprintf("cannot send to %s: %v", b.shown, err)}
	}
	b.setHeaders(req.Header, m, p, ver)
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, false, b.failed(ctx, err)
	}
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusAccepted:
		if m.isRequest() {
			return resp.StatusCode, false, &Problem{BadAnswer, fmt.Sprintf("%s accepted a request without answering it (202): is this capgate's MCP endpoint?", b.shown)}
		}
		return resp.StatusCode, false, nil
	case resp.StatusCode == http.StatusOK && ct == "text/event-stream":
		return resp.StatusCode, false, b.relayStream(ctx, resp.Body, m, alive, gone)
	case ct == "application/json":
		body, err := readBounded(resp.Body, maxAnswerBytes)
		if err != nil {
			return resp.StatusCode, false, b.failed(ctx, err)
		}
		msg, ok := compactMessage(body)
		if !ok {
			return resp.StatusCode, false, b.statusProblem(ctx, resp, body)
		}
		if first && resp.StatusCode == http.StatusBadRequest && m.method == "tools/call" && ver >= firstModern && errorCode(msg) == codeHeaderMismatch {
			return resp.StatusCode, true, nil
		}
		if m.isRequest() || !(m.isResponse || m.method != "") {
			// Notifications and responses get no answer; a message
			// that is neither (unreadable) gets capgate's error.
			b.deliver(m, msg, gone)
		} else if resp.StatusCode >= 300 {
			return resp.StatusCode, false, &Problem{BadAnswer, fmt.Sprintf("capgate refused the %s: %s", m.methodName(), errorText(msg))}
		}
		return resp.StatusCode, false, nil
	}
	body, _ := readBounded(resp.Body, 4<<10)
	return resp.StatusCode, false, b.statusProblem(ctx, resp, body)
}

// failed explains an exchange that ended in err: the timeout, a cancel
// (no problem to report), or a transport failure.
func (b *Bridge) failed(ctx context.Context, err error) *Problem {
	switch {
	case errors.Is(context.Cause(ctx), errTimedOut):
		return b.transportProblem(context.DeadlineExceeded)
	case ctx.Err() != nil:
		return nil // cancelled: the caller knows
	case errors.Is(err, errTooLarge):
		return &Problem{TooLarge, fmt.Sprintf("capgate's answer exceeds %d bytes, more than the bridge reads of one answer", maxAnswerBytes)}
	}
	return b.transportProblem(err)
}

// relayStream writes each message of an event stream as it arrives, until
// the answer to m (when m is a request) or the end of the stream.
func (b *Bridge) relayStream(ctx context.Context, body io.Reader, m *message, alive func(), gone func() bool) *Problem {
	events := &sseReader{r: bufio.NewReaderSize(body, 64<<10), max: maxAnswerBytes, seen: alive}
	want := ""
	if m.isRequest() {
		want = idKey(m.id)
	}
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			if want != "" {
				return &Problem{BadAnswer, fmt.Sprintf("capgate at %s ended the event stream without answering the request", b.shown)}
			}
			return nil
		}
		if errors.Is(err, errEventTooLarge) {
			return &Problem{TooLarge, fmt.Sprintf("an event from capgate exceeds %d bytes, more than the bridge reads of one answer", maxAnswerBytes)}
		}
		if err != nil {
			if p := b.failed(ctx, err); p != nil {
				return p
			}
			return nil
		}
		msg, ok := compactMessage(data)
		if !ok {
			b.log.Warn("event from capgate skipped: not a JSON-RPC message", slog.Int("bytes", len(data)))
			continue
		}
		answer := parse(msg)
		if want != "" && answer.isResponse && idKey(answer.id) == want {
			b.deliver(m, msg, gone)
			return nil
		}
		if !gone() {
			b.out.write(msg)
		}
	}
}

// deliver writes capgate's answer to m, learning on the way what later
// messages need: the version initialize chose and the tools' mirrored
// arguments. An error capgate gave without an id (one it sent before
// reading the body) is given m's, so the client can match it.
func (b *Bridge) deliver(m *message, msg []byte, gone func() bool) {
	if m.isRequest() && len(msg) > 0 && msg[0] == '{' {
		var a struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(msg, &a) == nil {
			switch {
			case a.Error != nil && (a.ID == nil || string(a.ID) == "null"):
				msg = errorResponse(m.id, a.Error)
			case a.Result != nil && m.method == "initialize":
				var r struct {
					ProtocolVersion string `json:"protocolVersion"`
				}
				if json.Unmarshal(a.Result, &r) == nil && r.ProtocolVersion != "" {
					b.negotiated.Store(&r.ProtocolVersion)
					b.log.Info("protocol version negotiated", slog.String("version", clip(r.ProtocolVersion)))
				}
			case a.Result != nil && m.method == "tools/list":
				b.tools.learn(a.Result)
			}
		}
	}
	if !gone() {
		b.out.write(msg)
	}
}

// refreshTools lists capgate's tools again, every page, under the version
// and client metadata of the call that needs them, to learn their
// x-mcp-header annotations.
func (b *Bridge) refreshTools(ctx context.Context, p params, ver string) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	meta := map[string]json.RawMessage{}
	for _, k := range []string{metaProtocolVersion, metaClientInfo, metaClientCapabilities} {
		if v, ok := p.Meta[k]; ok {
			meta[k] = v
		}
	}
	var cursor json.RawMessage
	for page := 0; page < 100; page++ {
		ps := map[string]any{"_meta": meta}
		if cursor != nil {
			ps["cursor"] = cursor
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "capgate-stdio-tools-" + strconv.Itoa(page), "method": "tools/list", "params": ps})
		if err != nil {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url.String(), bytes.NewReader(body))
		if err != nil {
			return
		}
		list := message{method: "tools/list"}
		b.setHeaders(req.Header, &list, params{Meta: meta}, ver)
		resp, err := b.client.Do(req)
		if err != nil {
			return
		}
		answer, err := readBounded(resp.Body, maxAnswerBytes)
		resp.Body.Close()
		var a struct {
			Result json.RawMessage `json:"result"`
		}
		if err != nil || resp.StatusCode != http.StatusOK || json.Unmarshal(answer, &a) != nil || a.Result == nil {
			return
		}
		b.tools.learn(a.Result)
		var next struct {
			NextCursor json.RawMessage `json:"nextCursor"`
		}
		if json.Unmarshal(a.Result, &next) != nil || next.NextCursor == nil || string(next.NextCursor) == "null" || string(next.NextCursor) == `""` {
			return
		}
		cursor = next.NextCursor
	}
}

// writeProblem answers request id with the problem.
func (b *Bridge) writeProblem(id json.RawMessage, p *Problem) {
	b.out.write(b.problemResponse(id, p))
}

// writeBatchProblem answers each request of a batch with the problem.
func (b *Bridge) writeBatchProblem(ids []json.RawMessage, p *Problem) {
	out := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b.problemResponse(id, p)...)
	}
	b.out.write(append(out, ']'))
}

func (b *Bridge) problemResponse(id json.RawMessage, p *Problem) []byte {
	e, _ := json.Marshal(map[string]any{
		"code":    CodeBridge,
		"message": p.Message,
		"data":    map[string]string{"problem": string(p.Kind), "url": b.shown},
	})
	return errorResponse(id, e)
}

// errorResponse is a JSON-RPC error response; a nil id is written null.
func errorResponse(id, errObj json.RawMessage) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	out := append([]byte(`{"jsonrpc":"2.0","id":`), idKey(id)...)
	out = append(append(out, `,"error":`...), errObj...)
	return append(out, '}')
}

var errTooLarge = errors.New("over the bound")

// readBounded reads r whole, failing with errTooLarge past max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errTooLarge
	}
	return b, nil
}

// compactMessage returns b compacted onto one line when it is a JSON-RPC
// message or a batch of them: what may be written to the client.
func compactMessage(b []byte) ([]byte, bool) {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return nil, false
	}
	out := buf.Bytes()
	switch {
	case len(out) > 0 && out[0] == '{':
		return out, isJSONRPC(out)
	case len(out) > 1 && out[0] == '[':
		var elems []json.RawMessage
		if json.Unmarshal(out, &elems) != nil {
			return nil, false
		}
		for _, e := range elems {
			if !isJSONRPC(e) {
				return nil, false
			}
		}
		return out, true
	}
	return nil, false
}

func isJSONRPC(obj []byte) bool {
	var v struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return json.Unmarshal(obj, &v) == nil && v.JSONRPC == "2.0"
}

// errorCode is the code of a JSON-RPC error response, 0 for anything else.
func errorCode(msg []byte) int {
	var a struct {
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(msg, &a)
	return a.Error.Code
}

// errorText is the code and message of a JSON-RPC error response.
func errorText(msg []byte) string {
	var a struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(msg, &a) != nil || a.Error.Message == "" {
		return "no reason given"
	}
	return fmt.Sprintf("%d %s", a.Error.Code, clip(a.Error.Message))
}
