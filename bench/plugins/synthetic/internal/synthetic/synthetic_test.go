package synthetic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/bench/plugins/synthetic/internal/synthetic"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func start(t *testing.T, cfg any) *sdktest.Client {
	t.Helper()
	p := sdk.New("synthetic", "test")
	synthetic.Register(p)
	return sdktest.Start(t, p, cfg)
}

// Paging from "" to the end returns every document exactly once, in id
// order, and the last page says there is no more.
func TestPagesThroughEveryDocumentOnce(t *testing.T) {
	const n = 2_345
	c := start(t, map[string]any{"documents": n})
	ctx := context.Background()
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		resp, err := c.Documents(ctx, synthetic.Entity, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range resp.Documents {
			if d.Id <= after {
				t.Fatalf("id %q after %q: not in order", d.Id, after)
			}
			if seen[d.Id] {
				t.Fatalf("%q twice", d.Id)
			}
			if d.Title == "" || d.Body == "" {
				t.Fatalf("empty document %+v", d)
			}
			seen[d.Id], after = true, d.Id
		}
		if !resp.More {
			break
		}
		if pages > n {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != n || pages != 5 {
		t.Errorf("%d documents in %d pages, want %d in 5", len(seen), pages, n)
	}
	if !seen["item-000000"] || !seen["item-002344"] || seen["item-002345"] {
		t.Error("wrong first or last id")
	}
}

func TestDefaultIsHundredThousand(t *testing.T) {
	c := start(t, nil)
	resp, err := c.Documents(context.Background(), synthetic.Entity, "item-099998", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Documents) != 1 || resp.Documents[0].Id != "item-099999" || resp.More {
		t.Errorf("after item-099998: %+v", resp)
	}
}

// Two plugins with the same config serve the same documents, and List and
// Get agree.
func TestDeterministic(t *testing.T) {
	ctx := context.Background()
	a, b := start(t, map[string]any{"documents": 300}), start(t, map[string]any{"documents": 300})
	pa, err := a.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := b.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa.Documents) != 50 {
		t.Fatalf("%d documents", len(pa.Documents))
	}
	for i := range pa.Documents {
		if !same(pa.Documents[i], pb.Documents[i]) {
			t.Fatalf("document %d differs:\n%+v\n%+v", i, pa.Documents[i], pb.Documents[i])
		}
	}
	byID, err := b.DocumentsByID(ctx, synthetic.Entity, pa.Documents[7].Id)
	if err != nil || len(byID.Documents) != 1 || !same(byID.Documents[0], pa.Documents[7]) {
		t.Fatalf("Get(%s) = %+v, %v", pa.Documents[7].Id, byID, err)
	}
	other := start(t, map[string]any{"documents": 300, "seed": 7})
	po, err := other.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range po.Documents {
		if !same(po.Documents[i], pa.Documents[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("another seed gives the same documents")
	}
}

func same(a, b *capgatev1.Document) bool {
	if a.Id != b.Id || a.Title != b.Title || a.Body != b.Body || len(a.Fields) != len(b.Fields) {
		return false
	}
	for k, v := range a.Fields {
		if b.Fields[k] != v {
			return false
		}
	}
	return true
}

func TestGetSkipsMissingIDs(t *testing.T) {
	c := start(t, map[string]any{"documents": 10})
	resp, err := c.DocumentsByID(context.Background(), synthetic.Entity, "item-000003", "item-000010", "nope", "item-3", "item-000009")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range resp.Documents {
		ids = append(ids, d.Id)
	}
	if len(ids) != 2 || ids[0] != "item-000003" || ids[1] != "item-000009" {
		t.Errorf("ids = %v, want the two that exist", ids)
	}
}

func TestRecord(t *testing.T) {
	c := start(t, map[string]any{"documents": 10})
	ctx := context.Background()
	raw, te, err := c.Record(ctx, synthetic.Entity, "item-000004")
	if err != nil || te != nil {
		t.Fatalf("Record = %v, %v", te, err)
	}
	var rec struct {
		ID, Kind, Title, Description string
		Fields                       map[string]string
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != "item-000004" || rec.Kind != "resource" || rec.Title == "" || rec.Fields["kind"] == "" {
		t.Errorf("record = %s", raw)
	}
	for _, id := range []string{"item-000010", "item-999999", "", "42"} {
		_, te, err := c.Record(ctx, synthetic.Entity, id)
		if err != nil {
			t.Fatalf("Record(%q): %v", id, err)
		}
		if te == nil || te.Code != capgatev1.ToolError_CODE_NOT_FOUND {
			t.Errorf("Record(%q) = %v, want NotFound", id, te)
		}
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []map[string]any{{"documents": 0}, {"documents": 1_000_001}, {"docs": 5}} {
		p := sdk.New("synthetic", "test")
		synthetic.Register(p)
		if _, err := sdktest.StartErr(t, p, cfg); err == nil {
			t.Errorf("config %v accepted", cfg)
		}
	}
}
