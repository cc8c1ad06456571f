package sdk

import (
	"context"
	"encoding/json"
	"math"
	"sync"
	"time"
	"unicode/utf8"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// LogLevel is the severity of a log message a handler sends its caller
// (Call.Log): the RFC 5424 levels, least severe first.
type LogLevel int

// The levels, as MCP names them.
const (
	LogDebug     = LogLevel(capgatev1.LogLevel_LOG_LEVEL_DEBUG)
	LogInfo      = LogLevel(capgatev1.LogLevel_LOG_LEVEL_INFO)
	LogNotice    = LogLevel(capgatev1.LogLevel_LOG_LEVEL_NOTICE)
	LogWarning   = LogLevel(capgatev1.LogLevel_LOG_LEVEL_WARNING)
	LogError     = LogLevel(capgatev1.LogLevel_LOG_LEVEL_ERROR)
	LogCritical  = LogLevel(capgatev1.LogLevel_LOG_LEVEL_CRITICAL)
	LogAlert     = LogLevel(capgatev1.LogLevel_LOG_LEVEL_ALERT)
	LogEmergency = LogLevel(capgatev1.LogLevel_LOG_LEVEL_EMERGENCY)
)

// Bounds on what one call tells its caller before its result. What goes
// over them is dropped, never waited for: a handler reporting progress
// must not be slowed by a caller who reads it slowly, and one caller must
// not fill the host's link to the plugin for every other.
const (
	// MaxNoticeMessage bounds a progress message, in bytes; a longer one
	// is cut.
	MaxNoticeMessage = 1 << 10
	// MaxLogData bounds a log message's data encoded as JSON, in bytes; a
	// larger one is dropped.
	MaxLogData = 8 << 10
	// MaxNoticesPerCall bounds the notices (progress and log messages)
	// one call sends.
	MaxNoticesPerCall = 1000
	// NoticeBurst and NoticeRate bound how fast a call sends them: a
	// burst of NoticeBurst, then NoticeRate a second.
	NoticeBurst = 32
	NoticeRate  = 20
)

// WantsProgress reports whether the caller asked for this call's
// progress. Progress is cheap to call either way; ask only to skip work
// done for the report alone.
func (c Call) WantsProgress() bool { return c.notices != nil && c.notices.progress }

// WantsLog reports whether a log message at level would reach the caller.
func (c Call) WantsLog(level LogLevel) bool {
	return c.notices != nil && c.notices.level != 0 && capgatev1.LogLevel(level) >= c.notices.level
}

// Progress tells the caller how far the call has come: done out of total
// (0 when the total is unknown), with an optional message for a human.
// done must increase from one report to the next; a report that does not,
// one the caller did not ask for (WantsProgress), and one over the call's
// bounds (MaxNoticesPerCall, NoticeRate) is dropped. It never fails the
// call and never waits for the caller.
func (c Call) Progress(ctx context.Context, done, total float64, message string) {
	n := c.notices
	if n == nil || !n.progress || ctx.Err() != nil {
		return
	}
	if math.IsNaN(done) || math.IsInf(done, 0) || math.IsNaN(total) || math.IsInf(total, 0) || total < 0 {
		n.drop()
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.anyProgress && done <= n.lastProgress {
		return
	}
	if !n.admit() {
		return
	}
	n.anyProgress, n.lastProgress = true, done
	n.send(&capgatev1.CallsResponse{Id: n.id, Notice: &capgatev1.CallsResponse_Progress{Progress: &capgatev1.Progress{
		Progress: done, Total: total, Message: cut(message, MaxNoticeMessage)}}})
}

// Log sends the caller a log message at level, when it asked for messages
// that severe (WantsLog). data is any value encoding to JSON — a string,
// or a struct with details — of at most MaxLogData bytes. Say what the
// call is doing, never a secret: the message goes to the agent. A message
// over the call's bounds is dropped; Log never fails the call and never
// waits for the caller. Messages for the plugin's operator belong in the
// plugin's Logger instead.
func (c Call) Log(ctx context.Context, level LogLevel, data any) {
	n := c.notices
	if n == nil || n.level == 0 || capgatev1.LogLevel(level) < n.level || ctx.Err() != nil {
		return
	}
	if level > LogEmergency {
		level = LogEmergency
	}
	b, err := json.Marshal(data)
	if err != nil || len(b) > MaxLogData {
		n.drop()
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.admit() {
		return
	}
	n.send(&capgatev1.CallsResponse{Id: n.id, Notice: &capgatev1.CallsResponse_Log{Log: &capgatev1.LogMessage{
		Level: capgatev1.LogLevel(level), Logger: n.logger, Data: b}}})
}

// notifier sends one call's notices on the Calls stream, within the
// call's bounds, until the call has answered.
type notifier struct {
	id       uint64
	progress bool
	level    capgatev1.LogLevel // 0: no log wanted
	logger   string
	send     func(*capgatev1.CallsResponse)
	now      func() time.Time

	mu           sync.Mutex
	done         bool // the call has answered: nothing more is sent
	sent         int
	tokens       float64
	refilled     time.Time
	anyProgress  bool
	lastProgress float64
	dropped      int
}

// newNotifier returns the notifier of a call whose request asked for
// wants, or nil when it asked for nothing.
func newNotifier(id uint64, wants *capgatev1.Notices, logger string, send func(*capgatev1.CallsResponse)) *notifier {
	if wants == nil || (!wants.Progress && wants.LogLevel == capgatev1.LogLevel_LOG_LEVEL_UNSPECIFIED) {
		return nil
	}
	level := wants.LogLevel
	if level < 0 || level > capgatev1.LogLevel_LOG_LEVEL_EMERGENCY {
		// A level this SDK does not know: only the most severe pass.
		level = capgatev1.LogLevel_LOG_LEVEL_EMERGENCY
	}
	return &notifier{id: id, progress: wants.Progress, level: level, logger: logger, send: send,
		now: time.Now, tokens: NoticeBurst}
}

// admit takes one notice's place within the bounds, or counts it dropped.
// n.mu is held.
func (n *notifier) admit() bool {
	if n.done || n.sent >= MaxNoticesPerCall {
		n.dropped++
		return false
	}
	now := n.now()
	if !n.refilled.IsZero() {
		n.tokens = min(NoticeBurst, n.tokens+now.Sub(n.refilled).Seconds()*NoticeRate)
	}
	n.refilled = now
	if n.tokens < 1 {
		n.dropped++
		return false
	}
	n.tokens--
	n.sent++
	return true
}

func (n *notifier) drop() {
	n.mu.Lock()
	n.dropped++
	n.mu.Unlock()
}

// finish ends the call's notices before its result is sent, so that none
// follows it, and says how many were dropped.
func (n *notifier) finish() (sent, dropped int) {
	if n == nil {
		return 0, 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.done = true
	return n.sent, n.dropped
}

// cut shortens s to at most max bytes, on a rune boundary.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
