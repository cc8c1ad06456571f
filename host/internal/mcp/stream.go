package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
)

// A tools/call whose client asked to hear the call while it runs (a
// progress token in _meta, a log level) and accepts text/event-stream is
// answered as an SSE stream once the call has something to say: its
// notifications/progress and notifications/message, then the JSON-RPC
// response as the last event, and the stream ends. A call that says
// nothing is answered with application/json as any other. The stream
// belongs to the POST that opened it: no session, no event ids to resume
// from (a client that loses the stream loses the call, which is cancelled,
// and calls again), no GET stream.

// defaultLogLevel is the level of a call's log messages at the revisions
// with logging/setLevel, when the request's _meta names none. Being
// stateless, the server cannot keep what a setLevel asked for past its
// own request, so every call gets what a server without a level sends:
// messages from info up.
const defaultLogLevel = dispatch.LogInfo

// Bounds on one call's stream: a call cannot make its client read without
// end, nor hold the host's memory for a client that reads slowly.
const (
	// maxStreamNotices bounds the notices written on one stream.
	maxStreamNotices = 1000
	// maxStreamBytes bounds the notices' bytes on one stream.
	maxStreamBytes = 4 << 20
	// noticeQueue is how many notices wait for a slow client before
	// further ones are dropped.
	noticeQueue = 64
)

var (
	eventStreamType = []string{"text/event-stream"}
	noCache         = []string{"no-cache"}
)

// noticeSink is the dispatch.Notices of one tools/call whose client may
// hear it. The plugin's notices arrive on the host's receiving goroutine;
// the first one starts a writer goroutine, which writes them as events
// while the request's goroutine waits for the call, from a bounded queue.
// A call that says nothing costs no goroutine, no queue and no stream.
type noticeSink struct {
	wants  dispatch.Wants
	stream *noticeStream
	cancel context.CancelFunc // the call's, for a client gone mid-stream

	mu      sync.Mutex
	closed  bool
	queue   chan dispatch.Notice // nil until the first notice
	written chan struct{}        // closed when the writer has written the queue
	dropped int
}

func (s *noticeSink) Wants() dispatch.Wants { return s.wants }

// Notify queues n without waiting; a full queue or a finished call drops it.
func (s *noticeSink) Notify(n dispatch.Notice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.queue == nil {
		s.queue, s.written = make(chan dispatch.Notice, noticeQueue), make(chan struct{})
		go s.write()
	}
	select {
	case s.queue <- n:
	default:
		s.dropped++
	}
}

// write writes the queued notices until finish closes the queue. A client
// gone cancels the call; what is left is then read and dropped.
func (s *noticeSink) write() {
	defer close(s.written)
	for n := range s.queue {
		if !s.stream.write(n) {
			s.cancel()
		}
	}
}

// finish ends the call's notices once its result is in: none is taken
// after it, and those queued before it are written before it. It returns
// how many a slow client made it drop.
func (s *noticeSink) finish() int {
	s.mu.Lock()
	s.closed = true
	q := s.queue
	s.mu.Unlock()
	if q != nil {
		close(q)
		<-s.written
	}
	return s.dropped
}

// noticeStream writes one call's notices as SSE events on the response.
type noticeStream struct {
	w     http.ResponseWriter
	rc    *http.ResponseController // set as the stream starts
	token []byte                   // the request's progressToken, raw JSON; nil: none

	started  bool // the response is an event stream
	broken   bool // a write failed: the client is gone
	written  int
	bytes    int
	progress float64 // the last progress written
	anyProg  bool
	buf      []byte
}

// write writes n as an event, unless it breaks the stream's rules (a
// progress that does not advance) or bounds. It reports false once the
// client is gone.
func (s *noticeStream) write(n dispatch.Notice) bool {
	if s.broken {
		return false
	}
	if s.written >= maxStreamNotices || s.bytes >= maxStreamBytes {
		return true
	}
	b := s.buf[:0]
	switch {
	case n.Progress != nil:
		if s.token == nil || (s.anyProg && n.Progress.Progress <= s.progress) {
			return true
		}
		s.anyProg, s.progress = true, n.Progress.Progress
		b = append(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
		b = append(b, s.token...)
		b = append(b, `,"progress":`...)
		b = strconv.AppendFloat(b, n.Progress.Progress, 'g', -1, 64)
		if n.Progress.Total > 0 {
			b = append(b, `,"total":`...)
			b = strconv.AppendFloat(b, n.Progress.Total, 'g', -1, 64)
		}
		if n.Progress.Message != "" {
			b = append(b, `,"message":`...)
			b = appendString(b, n.Progress.Message)
		}
	case n.Log != nil:
		b = append(b, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"`...)
		b = append(b, n.Log.Level.String()...)
		b = append(b, '"')
		if n.Log.Logger != "" {
			b = append(b, `,"logger":`...)
			b = appendString(b, n.Log.Logger)
		}
		b = append(b, `,"data":`...)
		b = appendCompact(b, n.Log.Data)
	default:
		return true
	}
	b = append(b, "}}"...)
	s.buf = b
	s.written++
	s.bytes += len(b)
	return s.event(b)
}

// event writes one SSE event carrying a JSON-RPC message, starting the
// stream first when needed, and flushes it to the client.
func (s *noticeStream) event(msg []byte) bool {
	if s.broken {
		return false
	}
	if !s.started {
		s.started = true
		h := s.w.Header()
		h[hdrContentType] = eventStreamType
		h["Cache-Control"] = noCache
		s.w.WriteHeader(http.StatusOK)
		if s.rc == nil {
			s.rc = http.NewResponseController(s.w)
		}
	}
	// JSON as this adapter writes it holds no raw newline, so one data
	// line carries the whole message.
	if _, err := s.w.Write([]byte("event: message\ndata: ")); err != nil {
		s.broken = true
		return false
	}
	if _, err := s.w.Write(msg); err != nil {
		s.broken = true
		return false
	}
	if _, err := s.w.Write([]byte("\n\n")); err != nil {
		s.broken = true
		return false
	}
	if err := s.rc.Flush(); err != nil {
		s.broken = true
		return false
	}
	return true
}

// holdOpenUntil moves the connection's read and write deadlines, which the
// server sets from the request timeout, to t (none when t is zero): a
// call waiting for its client's answers outlives them. Past the read
// deadline the server would take the idle connection for a broken one and
// cancel the call.
func (s *noticeStream) holdOpenUntil(t time.Time) {
	if s.rc == nil {
		s.rc = http.NewResponseController(s.w)
	}
	// A writer that cannot move them (a test's recorder) has none.
	_ = s.rc.SetReadDeadline(t)
	_ = s.rc.SetWriteDeadline(t)
}

// setLevel answers logging/setLevel (up to 2025-11-25) with {} once the
// level is one of the eight. Stateless, the server keeps it for no later
// request: each call's level is its own _meta's, or defaultLogLevel.
func (c *call) setLevel(id []byte, ps *params, out []byte) (int, []byte) {
	s, ok := decodeString(ps.level)
	if !ok || !isString(ps.level) {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: logging/setLevel needs params.level, one of "+levelNames)
	}
	if _, ok := dispatch.ParseLogLevel(s); !ok {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: unknown log level; use one of "+levelNames)
	}
	return http.StatusOK, c.closeResult(append(appendResultHead(out, id), '{'), false)
}

const levelNames = "debug, info, notice, warning, error, critical, alert, emergency"

// noticesWanted is what the client of a tools/call wants to hear while it
// runs: its progress when _meta carries a progressToken (a string or a
// number), its log messages from the level _meta names, or, at the
// revisions with logging/setLevel, from defaultLogLevel. 2026-07-28 sends
// no log message to a request that names no level. Nothing is streamed
// inside a batch or a task, nor to a client that does not accept
// text/event-stream.
func (c *call) noticesWanted(rm *requestMeta) (dispatch.Wants, string) {
	var w dispatch.Wants
	if rm.logLevel != nil {
		s, ok := decodeString(rm.logLevel)
		l, known := dispatch.ParseLogLevel(s)
		if !ok || !isString(rm.logLevel) || !known {
			return w, "invalid params: _meta " + metaLogLevel + " must be one of " + levelNames
		}
		w.LogLevel = l
	} else if !c.ver.modern() {
		w.LogLevel = defaultLogLevel
	}
	if t := rm.progressToken; len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		w.Progress = true
	}
	if c.inBatch || c.inTask || !c.sseOK {
		return dispatch.Wants{}, ""
	}
	return w, ""
}

// invokeStreaming runs the call with a sink for its notices, which are
// written to the client as they come; the response is written by Serve,
// as the last event when any notice was.
func (c *call) invokeStreaming(name string, args []byte, wants dispatch.Wants, token []byte) (json.RawMessage, error) {
	if !wants.Progress {
		token = nil
	}
	// The token points into the request's body, which outlives the
	// stream: Serve writes the last event before the body is reused. A
	// call asking its client runs again on the stream it asked on.
	if c.stream == nil {
		c.stream = &noticeStream{w: c.w}
	}
	c.stream.token = token
	sink := &noticeSink{wants: wants, stream: c.stream, cancel: c.cancel}
	outer := c.ctx
	c.ctx = dispatch.WithNotices(c.ctx, sink)
	res, err := c.invoke(name, args)
	c.ctx = outer
	if dropped := sink.finish(); dropped > 0 {
		c.h.log.LogAttrs(c.ctx, slog.LevelDebug, "mcp: notices dropped for a slow client",
			slog.String("capability", name), slog.Int("dropped", dropped))
	}
	return res, err
}
