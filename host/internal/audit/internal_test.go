package audit

import (
	"testing"
	"time"

	"github.com/capgate/capgate/sdk/sqlstore/sqlstoretest"
)

// The shipped history loads for both engines, with the same versions in
// each, and applies, recording itself in the store's own history table.
func TestShippedMigrationsApply(t *testing.T) {
	sch, err := schema(nil)
	if err != nil {
		t.Fatal(err)
	}
	sqlstoretest.CheckSchema(t, sch, "audit_blocks", "audit_sequence", HistoryTable)
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for failures, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		if got := b.delay(failures); got != want {
			t.Errorf("delay after %d failures = %v; want %v", failures, got, want)
		}
	}
}
