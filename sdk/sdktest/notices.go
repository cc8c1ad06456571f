package sdktest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/sdk"
)

// Heard is what a caller heard from its calls before their results:
// the progress and log messages a handler sent with sdk.Call.Progress and
// sdk.Call.Log, as the host passed them on.
type Heard struct {
	wants dispatch.Wants

	mu       sync.Mutex
	progress []Progress
	logs     []Log
}

// Progress is one progress report heard.
type Progress struct {
	Done, Total float64
	Message     string
}

// Log is one log message heard.
type Log struct {
	Level  sdk.LogLevel
	Logger string
	Data   json.RawMessage
}

// Listen returns ctx for Client.Invoke asking to hear the call's progress
// (when progress is set) and its log messages from level up (0: none),
// as an MCP client does, and what was heard.
func Listen(ctx context.Context, progress bool, level sdk.LogLevel) (context.Context, *Heard) {
	h := &Heard{wants: dispatch.Wants{Progress: progress, LogLevel: dispatch.LogLevel(min(max(level, 0), sdk.LogEmergency))}}
	return dispatch.WithNotices(ctx, h), h
}

// Wants implements dispatch.Notices.
func (h *Heard) Wants() dispatch.Wants { return h.wants }

// Notify implements dispatch.Notices.
func (h *Heard) Notify(n dispatch.Notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case n.Progress != nil:
		h.progress = append(h.progress, Progress{Done: n.Progress.Progress, Total: n.Progress.Total, Message: n.Progress.Message})
	case n.Log != nil:
		h.logs = append(h.logs, Log{Level: sdk.LogLevel(n.Log.Level), Logger: n.Log.Logger, Data: n.Log.Data})
	}
}

// Progress returns the progress reports heard, in order.
func (h *Heard) Progress() []Progress {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Progress(nil), h.progress...)
}

// Logs returns the log messages heard, in order.
func (h *Heard) Logs() []Log {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Log(nil), h.logs...)
}
