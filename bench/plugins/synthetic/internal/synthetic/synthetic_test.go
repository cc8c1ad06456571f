package synthetic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/bench/plugins/synthetic/internal/synthetic"
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
		docs, more, err := c.Documents(ctx, synthetic.Entity, after, 500)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range docs {
			if d.ID <= after {
				t.Fatalf("id %q after %q: not in order", d.ID, after)
			}
			if seen[d.ID] {
				t.Fatalf("%q twice", d.ID)
			}
			if d.Title == "" || d.Body == "" {
				t.Fatalf("empty document %+v", d)
			}
			seen[d.ID], after = true, d.ID
		}
		if !more {
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
	docs, more, err := c.Documents(context.Background(), synthetic.Entity, "item-099998", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || docs[0].ID != "item-099999" || more {
		t.Errorf("after item-099998: %+v, more %v", docs, more)
	}
}

// Two plugins with the same config serve the same documents, and List and
// Get agree.
func TestDeterministic(t *testing.T) {
	ctx := context.Background()
	a, b := start(t, map[string]any{"documents": 300}), start(t, map[string]any{"documents": 300})
	pa, _, err := a.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	pb, _, err := b.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(pa) != 50 {
		t.Fatalf("%d documents", len(pa))
	}
	for i := range pa {
		if !same(pa[i], pb[i]) {
			t.Fatalf("document %d differs:\n%+v\n%+v", i, pa[i], pb[i])
		}
	}
	byID, err := b.DocumentsByID(ctx, synthetic.Entity, pa[7].ID)
	if err != nil || len(byID) != 1 || !same(byID[0], pa[7]) {
		t.Fatalf("Get(%s) = %+v, %v", pa[7].ID, byID, err)
	}
	other := start(t, map[string]any{"documents": 300, "seed": 7})
	po, _, err := other.Documents(ctx, synthetic.Entity, "item-000100", 50)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range po {
		if !same(po[i], pa[i]) {
			differ++
		}
	}
	if differ == 0 {
		t.Error("another seed gives the same documents")
	}
}

func same(a, b sdk.Document) bool {
	if a.ID != b.ID || a.Title != b.Title || a.Body != b.Body || len(a.Fields) != len(b.Fields) {
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
	for _, d := range resp {
		ids = append(ids, d.ID)
	}
	if len(ids) != 2 || ids[0] != "item-000003" || ids[1] != "item-000009" {
		t.Errorf("ids = %v, want the two that exist", ids)
	}
}

func TestRecord(t *testing.T) {
	c := start(t, map[string]any{"documents": 10})
	ctx := context.Background()
	raw, err := c.Record(ctx, synthetic.Entity, "item-000004")
	if err != nil {
		t.Fatalf("Record: %v", err)
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
		if _, err := c.Record(ctx, synthetic.Entity, id); !sdk.IsNotFound(err) {
			t.Errorf("Record(%q) = %v, want NotFound", id, err)
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
