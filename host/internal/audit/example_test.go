package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
)

// A decision goes through the writer to SQLite in the data directory, and
// is read back with a filter.
func Example() {
	dir, err := os.MkdirTemp("", "audit-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := audit.Open(ctx, "", dir) // no DSN: SQLite in dir
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	w, err := audit.NewWriter(store, audit.WriterConfig{Retention: 90 * 24 * time.Hour})
	if err != nil {
		fmt.Println(err)
		return
	}

	args := audit.Redact(json.RawMessage(`{"resource_id":"room-a","card":{"number":"4111 1111 1111 1111"}}`),
		[]audit.Path{{"card", "number"}}, 0)
	parent := audit.NewID(time.Now()) // known before the call runs, for its nested calls
	for _, r := range []audit.Record{
		{ID: parent, RequestID: "req-1", Protocol: "mcp", TokenLabel: "front-desk", Role: "member", Scope: "action",
			UserID: "alice", Capability: "booking.create", Plugin: "booking", Args: args,
			Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 12 * time.Millisecond},
		{RequestID: "req-2", Protocol: "mcp", TokenLabel: "front-desk", Role: "member", Scope: "read",
			UserID: "alice", Capability: "booking.cancel", Plugin: "booking",
			Decision: audit.Refused, Step: "scope", Reason: `this is an action and the token's scope is "read"`},
	} {
		if err := w.Write(r); err != nil {
			fmt.Println(err)
		}
	}
	if err := w.Close(ctx); err != nil { // writes what is queued
		fmt.Println(err)
		return
	}

	page, err := store.Query(ctx, audit.Filter{UserID: "alice", Order: audit.OldestFirst})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range page.Records {
		fmt.Printf("%s %s step=%q outcome=%q args=%s\n", r.Capability, r.Decision, r.Step, r.Outcome, r.Args)
	}
	refused, _ := store.Query(ctx, audit.Filter{Decision: audit.Refused})
	fmt.Println("refused:", len(refused.Records), "at", refused.Records[0].Step)
	// Output:
	// booking.create admitted step="" outcome="ok" args={"resource_id":"room-a","card":{"number":"[redacted]"}}
	// booking.cancel refused step="scope" outcome="" args=
	// refused: 1 at scope
}
