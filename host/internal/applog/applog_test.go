package applog_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/applog"
)

type stringer string

func (s stringer) String() string { return string(s) }

// A hostile argument that reaches a log record, as an error, a string, a
// Stringer, bytes, in a group or as the message, never makes the record
// longer than the bound; short values are written as they are.
func TestValuesAreBounded(t *testing.T) {
	huge := strings.Repeat("é", 50_000) // 100 KB of two-byte characters
	for _, format := range []applog.Format{applog.JSON, applog.Text} {
		var buf bytes.Buffer
		log := applog.New(&buf, slog.LevelInfo, format)
		log.Error(huge, "err", errors.New("search "+huge+": timeout"), "query", huge, "s", stringer(huge),
			"raw", []byte(huge), slog.Group("call", "args", huge), "n", 42, "short", "kept as is")
		line := buf.String()
		if len(line) > 8*applog.MaxValueBytes+512 {
			t.Errorf("%s: record is %d bytes for 6 huge values", format, len(line))
		}
		if !utf8.ValidString(line) {
			t.Errorf("%s: a cut split a character", format)
		}
		if n := strings.Count(line, "100000 bytes, cut]"); n < 5 {
			t.Errorf("%s: %d values say they were cut, want the message and every huge value:\n%.400s", format, n, line)
		}
		if !strings.Contains(line, "kept as is") || !strings.Contains(line, "42") {
			t.Errorf("%s: short values changed:\n%.400s", format, line)
		}
		if format == applog.JSON {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("cut JSON record does not parse: %v", err)
			}
		}
	}
}

func TestShortValuesUntouched(t *testing.T) {
	a := slog.String("k", strings.Repeat("x", applog.MaxValueBytes))
	if got := applog.Bound(nil, a); got.Value.String() != a.Value.String() {
		t.Error("a value at the bound was cut")
	}
	e := slog.Any("err", errors.New("short"))
	if got := applog.Bound(nil, e); got.Value.Any() != e.Value.Any() {
		t.Error("a short error was replaced")
	}
}
