package dispatch

import (
	"context"
	"encoding/json"
)

// Notices is where a running call's mid-call traffic goes: the protocol
// adapter that owns the caller's connection puts one in the call's context
// (WithNotices), and the provider of a call the gate admitted hands it
// what the call says before its result (NoticesOf). A call whose context
// carries none tells its caller nothing until it ends, which is every
// caller but one that asked (an MCP client with a progress token, say).
//
// The gate gives the context to a provider only for a call it admitted,
// so a refused call reaches no sink. A nested call (one a plugin makes
// through the host while serving a call) streams nothing: it runs under
// the plugin's request, not the caller's connection.
//
// An adapter may give its sink more methods for other mid-call traffic;
// a provider that knows them finds them by type assertion.
type Notices interface {
	// Wants says what the caller wants to hear. It is fixed for the call.
	Wants() Wants
	// Notify hands the caller one notice. It must not block: the provider
	// calls it from the goroutine that receives every call of a plugin, so
	// a sink that cannot keep up drops (and counts) what it cannot take.
	// A notice the caller did not ask for is dropped; so is one after the
	// call's result.
	Notify(Notice)
}

// Wants is what a caller wants to hear while its call runs. The zero
// value wants nothing.
type Wants struct {
	// Progress asks for the call's progress.
	Progress bool
	// LogLevel is the least severe log message wanted; LogNone wants none.
	LogLevel LogLevel
}

// Any reports whether the caller wants to hear anything at all.
func (w Wants) Any() bool { return w.Progress || w.LogLevel != LogNone }

// Allows reports whether n is something the caller asked for.
func (w Wants) Allows(n Notice) bool {
	switch {
	case n.Progress != nil:
		return w.Progress
	case n.Log != nil:
		return w.LogLevel != LogNone && n.Log.Level >= w.LogLevel
	}
	return false
}

// LogLevel is a log message's severity, the RFC 5424 levels MCP uses,
// least severe first.
type LogLevel uint8

// The levels; LogNone is no level at all (no log wanted).
const (
	LogNone LogLevel = iota
	LogDebug
	LogInfo
	LogNotice
	LogWarning
	LogError
	LogCritical
	LogAlert
	LogEmergency
)

var logLevelNames = [...]string{"", "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// String is the level's MCP name ("" for LogNone).
func (l LogLevel) String() string {
	if int(l) < len(logLevelNames) {
		return logLevelNames[l]
	}
	return ""
}

// Valid reports whether l is one of the eight levels.
func (l LogLevel) Valid() bool { return l >= LogDebug && l <= LogEmergency }

// ParseLogLevel reads a level by its MCP name.
func ParseLogLevel(s string) (LogLevel, bool) {
	for i, n := range logLevelNames {
		if i > 0 && n == s {
			return LogLevel(i), true
		}
	}
	return LogNone, false
}

// Notice is one thing a running call tells its caller: exactly one of
// Progress and Log is set.
type Notice struct {
	Progress *Progress
	Log      *LogMessage
}

// Progress is how far a call has come.
type Progress struct {
	// Progress increases with each notice; Total, when known (not 0), is
	// where it ends.
	Progress, Total float64
	// Message describes the step, for a human.
	Message string
}

// LogMessage is a log message a call sends its caller.
type LogMessage struct {
	Level LogLevel
	// Logger names the part of the provider that speaks; may be empty.
	Logger string
	// Data is a JSON value.
	Data json.RawMessage
}

type noticesKey struct{}

// WithNotices returns ctx carrying the sink of the call about to be made;
// a nil n leaves ctx as it is.
func WithNotices(ctx context.Context, n Notices) context.Context {
	if n == nil {
		return ctx
	}
	return context.WithValue(ctx, noticesKey{}, n)
}

// NoticesOf returns the sink WithNotices put in ctx, or nil.
func NoticesOf(ctx context.Context) Notices {
	n, _ := ctx.Value(noticesKey{}).(Notices)
	return n
}
