package sdktest_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// BenchmarkOwnerGuard measures what making a read owner-guarded costs: the
// same lookup of the same row, answered by a tool without an Owner and by
// one whose Owner looks the row up, keeps it and lets the gate compare the
// owner with the caller. Both go through the real gate and call stream, so
// the difference between the two is the guard alone.
func BenchmarkOwnerGuard(b *testing.B) {
	rows := map[string]note{"n1": {ID: "n1", Text: "alice's"}}
	owners := map[string]string{"n1": "alice"}
	lookup := func(id string) (note, error) {
		n, ok := rows[id]
		if !ok {
			return note{}, sdk.NotFound("no note %q", id)
		}
		return n, nil
	}
	p := sdk.New("notes", "1")
	sdk.Add(p, sdk.Tool[noteID, note]{Name: "notes.open", Kind: sdk.Read,
		Handler: func(_ context.Context, _ sdk.Call, in noteID) (note, error) { return lookup(in.ID) }})
	sdk.Add(p, sdk.Tool[noteID, note]{Name: "notes.guarded", Kind: sdk.Read,
		Owner: func(_ context.Context, call sdk.Call, in noteID) (string, error) {
			n, err := lookup(in.ID)
			if err != nil {
				return "", err
			}
			call.Keep(n)
			return owners[in.ID], nil
		},
		Handler: func(_ context.Context, call sdk.Call, in noteID) (note, error) {
			if n, ok := sdk.Kept[note](call); ok {
				return n, nil
			}
			return lookup(in.ID)
		}})
	c := sdktest.Start(b, p, nil)
	alice := sdk.Principal{Role: "customer", Scope: "read", UserID: "alice"}
	args := json.RawMessage(`{"id":"n1"}`)
	for _, capability := range []string{"notes.open", "notes.guarded"} {
		b.Run(capability, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Invoke(context.Background(), capability, alice, args); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
