package audit

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAppendSQLite is the store's cost per record of a full batch on
// SQLite, appended as prepared one-row INSERTs (what the store does) and,
// beside it, as multi-row INSERTs (what PostgreSQL gets), whose $N
// parameters SQLite resolves by linear search.
func BenchmarkAppendSQLite(b *testing.B) {
	for _, mode := range []struct {
		name   string
		oneRow bool
	}{{"prepared-row", true}, {"multi-row", false}} {
		b.Run(mode.name, func(b *testing.B) {
			st, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), FileName))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			s := st.(*sqlStore)
			s.d.oneRowInserts = mode.oneRow
			batch := make([]Record, DefaultBatchSize)
			for i := range batch {
				batch[i] = Record{Time: time.Now(), RequestID: fmt.Sprint(i), Protocol: "mcp", ProtocolVersion: "2025-11-25",
					TokenLabel: "tokens-0", Role: "customer", Scope: "action", UserID: "alice", Capability: "hello.greet",
					Plugin: "hello", Args: []byte(`{"name":"bench"}`), Decision: Admitted, Outcome: OutcomeOK, Latency: time.Millisecond}
			}
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					batch[i].ID = ""
				}
				if err := s.Append(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
		})
	}
}
