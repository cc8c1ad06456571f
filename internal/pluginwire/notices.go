package pluginwire

import (
	"encoding/json"
	"math"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/dispatch"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Bounds the host holds a plugin's notices to, whatever its SDK did: one
// call's notices never reach its caller beyond them. They are looser than
// the SDK's own (sdk.MaxNoticesPerCall, ...), so a plugin within those is
// never cut here.
const (
	// MaxCallNotices bounds the notices of one call passed on.
	MaxCallNotices = 1000
	// MaxNoticeMessage bounds a progress message, in bytes; a longer one
	// is dropped.
	MaxNoticeMessage = 4 << 10
	// MaxNoticeLogger bounds a log message's logger name, in bytes.
	MaxNoticeLogger = 128
	// MaxNoticeData bounds a log message's JSON data, in bytes.
	MaxNoticeData = 16 << 10
)

// notify passes one notice of the call to its caller's sink, when the
// caller asked for it and it is within the bounds. It runs on the
// stream's receiving goroutine, which Notices.Notify must not block.
func (pc *pendingCall) notify(resp *capgatev1.CallsResponse) {
	if pc.notices == nil || pc.notified >= MaxCallNotices {
		return
	}
	n, ok := Notice(resp)
	if !ok || !pc.wants.Allows(n) {
		return
	}
	pc.notified++
	pc.notices.Notify(n)
}

// Notice is a CallsResponse's notice in the gate's terms; ok is false for
// one that is malformed or over the bounds, which is dropped.
func Notice(resp *capgatev1.CallsResponse) (n dispatch.Notice, ok bool) {
	switch {
	case resp.GetProgress() != nil:
		p := resp.GetProgress()
		if !finite(p.Progress) || !finite(p.Total) || p.Total < 0 ||
			len(p.Message) > MaxNoticeMessage || !utf8.ValidString(p.Message) {
			return n, false
		}
		n.Progress = &dispatch.Progress{Progress: p.Progress, Total: p.Total, Message: p.Message}
	case resp.GetLog() != nil:
		l := resp.GetLog()
		level := dispatch.LogLevel(l.Level)
		if l.Level < 0 || !level.Valid() || len(l.Logger) > MaxNoticeLogger || !utf8.ValidString(l.Logger) ||
			len(l.Data) == 0 || len(l.Data) > MaxNoticeData || !json.Valid(l.Data) {
			return n, false
		}
		n.Log = &dispatch.LogMessage{Level: level, Logger: l.Logger, Data: json.RawMessage(l.Data)}
	default:
		return n, false
	}
	return n, true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
