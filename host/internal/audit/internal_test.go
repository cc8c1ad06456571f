package audit

import (
	"testing"

	"github.com/capgate/capgate/sdk/sqlstore/sqlstoretest"
)

// The shipped history loads for both engines, with the same versions in
// each, and applies, recording itself in the store's own history table.
func TestShippedMigrationsApply(t *testing.T) {
	sch, err := schema(nil)
	if err != nil {
		t.Fatal(err)
	}
	sqlstoretest.CheckSchema(t, sch, "audit_records", HistoryTable)
}
