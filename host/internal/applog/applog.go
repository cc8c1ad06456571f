// Package applog builds the host's logger: slog, as text or JSON, with
// every attribute bounded.
//
// Log lines carry caller input (a failing call's error names its
// arguments, a plugin logs what it was asked), and a caller controls how
// long that input is. Unbounded, one request could write a line of
// megabytes and a few thousand could fill a disk. Every string value, and
// the text of every error or other value, is cut to MaxValueBytes, with
// the original length said; the record's message is cut too. This applies
// to the plugins' records as well, which the host re-emits through the
// same handler.
package applog

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"unicode/utf8"
)

// MaxValueBytes bounds one attribute value in a log record: enough for any
// error the host or a plugin writes about itself, far less than the
// arguments a caller may send.
const MaxValueBytes = 1024

// Format is how records are written.
type Format string

const (
	Text Format = "text"
	JSON Format = "json"
)

// New returns a logger writing records at level and above to w in format.
func New(w io.Writer, level slog.Leveler, format Format) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: Bound}
	if format == JSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Bound is a slog.HandlerOptions.ReplaceAttr that cuts long values to
// MaxValueBytes. Values within the bound, and values that are not text
// (numbers, times, durations), pass untouched and cost no allocation.
func Bound(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); len(s) > MaxValueBytes {
			a.Value = slog.StringValue(cut(s))
		}
	case slog.KindAny:
		var s string
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		case []byte:
			s = string(v)
		default:
			return a
		}
		if len(s) > MaxValueBytes {
			a.Value = slog.StringValue(cut(s))
		}
	}
	return a
}

// cut is s shortened to MaxValueBytes at a character boundary, saying how
// long it was.
func cut(s string) string {
	n := MaxValueBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…[" + strconv.Itoa(len(s)) + " bytes, cut]"
}
