package sdk

import (
	"io"
	"log/slog"
	"os"
	"strings"
)

// hclogTime is the timestamp layout go-plugin parses from a plugin's stderr.
const hclogTime = "2006-01-02T15:04:05.000000Z07:00"

// newLogger writes JSON lines in the shape go-plugin recognises on a
// plugin's stderr (@level, @message, @timestamp), so the host re-emits each
// record through its own structured logger instead of as opaque text.
func newLogger(plugin string) *slog.Logger {
	return newLoggerTo(os.Stderr, plugin)
}

func newLoggerTo(w io.Writer, plugin string) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug, // the host filters by its own level
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format(hclogTime))
			}
			return a
		},
	})
	return slog.New(h)
}
