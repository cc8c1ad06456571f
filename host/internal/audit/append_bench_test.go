package audit

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAppendSQLite is the store's cost per record of a full batch of
// the writer on SQLite.
func BenchmarkAppendSQLite(b *testing.B) {
	st, err := OpenSQLite(b.Context(), filepath.Join(b.TempDir(), FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
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
		if err := st.Append(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}
