package audit_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
)

// BenchmarkWrite is the gate's cost of recording a decision: the writer
// takes it in memory, the store writes behind.
func BenchmarkWrite(b *testing.B) {
	s, err := audit.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), audit.FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := audit.NewWriter(s, audit.WriterConfig{QueueSize: 100000})
	if err != nil {
		b.Fatal(err)
	}
	r := audittest.Rec("req", "booking.create", 0)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(r); err != nil && !errors.Is(err, audit.ErrQueueFull) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = w.Close(b.Context())
}

// BenchmarkRedact: arguments holding sensitive fields are walked token by
// token; arguments holding none of their names are only compacted.
func BenchmarkRedact(b *testing.B) {
	paths := []audit.Path{{"card", "number"}, {"guests", "*", "phone"}}
	for _, tc := range []struct {
		name string
		args json.RawMessage
	}{
		{"walked", json.RawMessage(`{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","guests":[{"name":"a","phone":"+1"},{"name":"b","phone":"+2"}],"card":{"number":"4111","exp":"12/30"},"note":"` + strings.Repeat("n", 500) + `"}`)},
		{"none-named", json.RawMessage(`{"resource_id":"room-a","start":"2030-01-07T10:00:00Z","guests":[{"name":"a"},{"name":"b"}],"note":"` + strings.Repeat("n", 500) + `"}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				audit.Redact(tc.args, paths, 0)
			}
		})
	}
}
