package pluginhost

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogLogger lets go-plugin log through the host's slog logger. go-plugin
// re-emits each structured line a plugin writes to stderr through it, so
// plugin records land in the host's log with their level and attributes.
type slogLogger struct {
	l    *slog.Logger
	name string
	args []any
}

func newHCLog(l *slog.Logger) hclog.Logger { return &slogLogger{l: l} }

var levels = map[hclog.Level]slog.Level{
	hclog.Trace: slog.LevelDebug - 4,
	hclog.Debug: slog.LevelDebug,
	hclog.Info:  slog.LevelInfo,
	hclog.Warn:  slog.LevelWarn,
	hclog.Error: slog.LevelError,
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...any) {
	lvl, ok := levels[level]
	if !ok {
		lvl = slog.LevelInfo
	}
	// go-plugin's own line for a process that exited with an error: the
	// exit watcher (liveness.go) logs a death once at error level, and an
	// exit while the host stops the plugin is no error.
	if s.name == "" && msg == "plugin process exited" && lvl > slog.LevelInfo {
		lvl = slog.LevelInfo
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, lvl) {
		return
	}
	// go-plugin appends the plugin's own timestamp; slog stamps the record
	// itself, so drop the duplicate.
	for i := 0; i+1 < len(args); i += 2 {
		if args[i] == "timestamp" {
			args = append(args[:i:i], args[i+2:]...)
			break
		}
	}
	all := make([]any, 0, len(s.args)+len(args)+2)
	if s.name != "" {
		all = append(all, "logger", s.name)
	}
	all = append(all, s.args...)
	all = append(all, args...)
	s.l.Log(ctx, lvl, msg, all...)
}

func (s *slogLogger) Trace(msg string, args ...any) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...any) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...any)  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...any)  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...any) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(l slog.Level) bool { return s.l.Enabled(context.Background(), l) }
func (s *slogLogger) IsTrace() bool             { return s.enabled(levels[hclog.Trace]) }
func (s *slogLogger) IsDebug() bool             { return s.enabled(slog.LevelDebug) }
func (s *slogLogger) IsInfo() bool              { return s.enabled(slog.LevelInfo) }
func (s *slogLogger) IsWarn() bool              { return s.enabled(slog.LevelWarn) }
func (s *slogLogger) IsError() bool             { return s.enabled(slog.LevelError) }
func (s *slogLogger) ImpliedArgs() []any        { return s.args }

func (s *slogLogger) With(args ...any) hclog.Logger {
	c := *s
	c.args = append(append([]any(nil), s.args...), args...)
	return &c
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	c := *s
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *s
	c.name = name
	return &c
}

// SetLevel is ignored: the host's slog handler decides what is written.
func (s *slogLogger) SetLevel(hclog.Level) {}

func (s *slogLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if s.enabled(levels[l]) {
			return l
		}
	}
	return hclog.Error
}

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		s.Info(string(p))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
