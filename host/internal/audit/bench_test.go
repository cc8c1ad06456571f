package audit_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/audit/audittest"
)

// BenchmarkWrite is the gate's cost of recording a decision: the writer
// bounds and encodes it into its queue, the store writes behind. The
// timer stops while the queue drains every few thousand records, so no
// record is dropped and the figure is Write's alone.
func BenchmarkWrite(b *testing.B) {
	s, err := audit.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), audit.FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	w, err := audit.NewWriter(s, audit.WriterConfig{QueueSize: 10000, FlushInterval: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	rs := make([]audit.Record, 1000)
	for i := range rs {
		rs[i] = audittest.Rec(fmt.Sprintf("req-%d", i), "booking.create", 0)
		rs[i].Args = json.RawMessage(`{"resource_id":"room-a","start":"2030-01-07T10:00:00Z"}`)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Write(rs[i%len(rs)]); err != nil {
			b.Fatal(err)
		}
		if i%5000 == 4999 {
			b.StopTimer()
			for w.Stats().Queued > 0 {
				time.Sleep(time.Millisecond)
			}
			b.StartTimer()
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
