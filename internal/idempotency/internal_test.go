package idempotency

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sqlstore/sqlstoretest"
)

// The shipped history loads for both engines, with the same versions in
// each, and applies, recording itself in the store's own history table.
func TestShippedMigrationsApply(t *testing.T) {
	sch, err := schema(nil)
	if err != nil {
		t.Fatal(err)
	}
	sqlstoretest.CheckSchema(t, sch, "idempotency_records", HistoryTable)
}

// TestPurgeBatches: a purge of more records than one batch deletes them
// all, batch by batch.
func TestPurgeBatches(t *testing.T) {
	for _, engine := range []struct {
		name string
		open func(t *testing.T, now func() time.Time) (*Store, error)
	}{
		{"sqlite", func(t *testing.T, now func() time.Time) (*Store, error) {
			return OpenSQLite(context.Background(), filepath.Join(t.TempDir(), FileName), WithClock(now))
		}},
		{"postgres", func(t *testing.T, now func() time.Time) (*Store, error) {
			return OpenPostgres(context.Background(), pgtest.SchemaDSN(t), WithClock(now))
		}},
	} {
		t.Run(engine.name, func(t *testing.T) {
			t0 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
			s, err := engine.open(t, func() time.Time { return t0 })
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer s.Close()
			s.purgeBatch = 4
			const n = 10
			for i := range n {
				fp, _ := FingerprintOf("x", nil)
				res, err := s.Claim(context.Background(), Request{UserID: "alice", Key: fmt.Sprintf("k%d", i), Capability: "x", Fingerprint: fp}, time.Second, time.Minute)
				if err != nil || res.Status != Claimed {
					t.Fatalf("Claim %d = %+v, %v", i, res, err)
				}
			}
			if got, err := s.Purge(context.Background(), t0.Add(time.Minute-time.Second)); err != nil || got != 0 {
				t.Fatalf("Purge before expiry = %d, %v; want 0", got, err)
			}
			if got, err := s.Purge(context.Background(), t0.Add(time.Minute)); err != nil || got != n {
				t.Fatalf("Purge = %d, %v; want %d over batches of %d", got, err, n, s.purgeBatch)
			}
		})
	}
}
