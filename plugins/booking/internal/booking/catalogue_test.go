package booking_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// demoByID is the seeded catalogue as booking.resources shows it.
func demoByID(t *testing.T, c *sdktest.Client) map[string]booking.Resource {
	t.Helper()
	out := map[string]booking.Resource{}
	for _, r := range sdktest.Call[booking.ResourcesOut](t, c, "booking.resources", unbound, nil).Resources {
		out[r.ID] = r
	}
	if len(out) == 0 {
		t.Fatal("the demo seed has no resources")
	}
	return out
}

func sortedIDs(m map[string]booking.Resource) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func TestResourceEntityDescribed(t *testing.T) {
	d, err := start(t, nil).Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	es := d.GetEntities()
	if len(es) != 1 || es[0].GetName() != booking.EntityResource {
		t.Fatalf("entities = %v", es)
	}
	if es[0].GetVersion() != booking.ResourceDocVersion || booking.ResourceDocVersion == "" {
		t.Errorf("%s version %q; want ResourceDocVersion %q", booking.EntityResource, es[0].GetVersion(), booking.ResourceDocVersion)
	}
}

// TestResourceDocumentsPaging walks the demo catalogue in pages of every
// size from 1 to past its end: each resource comes once, in id order, and
// more is false exactly on the last page.
func TestResourceDocumentsPaging(t *testing.T) {
	c := start(t, demo)
	want := sortedIDs(demoByID(t, c))
	ctx := context.Background()
	for _, limit := range []int{0, 1, 2, 3, 5, 7, len(want) - 1, len(want), len(want) + 1, 1000} {
		t.Run("limit "+strconv.Itoa(limit), func(t *testing.T) {
			var got []string
			after := ""
			for pages := 1; ; pages++ {
				if pages > len(want)+1 {
					t.Fatalf("paging does not end: %v", got)
				}
				page, more, err := c.Documents(ctx, booking.EntityResource, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if limit > 0 && len(page) > limit {
					t.Fatalf("page of %d documents; limit %d", len(page), limit)
				}
				for _, d := range page {
					got = append(got, d.ID)
				}
				if !more {
					break
				}
				if len(page) == 0 {
					t.Fatal("an empty page says more follow")
				}
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages gave %v; want each resource once in id order: %v", got, want)
			}
		})
	}

	// After the last id, and after an id past every other, nothing is left.
	for _, after := range []string{want[len(want)-1], "zzz"} {
		page, more, err := c.Documents(ctx, booking.EntityResource, after, 0)
		if err != nil || len(page) != 0 || more {
			t.Errorf("after %q: %v, more %v, %v; want an empty last page", after, page, more, err)
		}
	}
	// An after that is not an id starts at the next id.
	page, _, err := c.Documents(ctx, booking.EntityResource, "room-aurora0", 1)
	if err != nil || len(page) != 1 || page[0].ID <= "room-aurora0" {
		t.Errorf("after room-aurora0: %v, %v; want the next id", page, err)
	}

	// Unseeded, the catalogue is empty.
	page, more, err := start(t, nil).Documents(ctx, booking.EntityResource, "", 0)
	if err != nil || len(page) != 0 || more {
		t.Errorf("unseeded documents: %v, more %v, %v", page, more, err)
	}
}

// TestResourceDocuments: a document is what search needs of a resource —
// name as title, description as body, kind, location and size as fields.
func TestResourceDocuments(t *testing.T) {
	c := start(t, demo)
	byID := demoByID(t, c)
	docs, _, err := c.Documents(context.Background(), booking.EntityResource, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != len(byID) {
		t.Fatalf("%d documents for %d resources", len(docs), len(byID))
	}
	for _, d := range docs {
		r := byID[d.ID]
		f := d.Fields
		if d.Title != r.Name || d.Body != r.Description || f["kind"] != r.Kind || f["location"] != r.Location ||
			f["capacity"] != "for "+strconv.Itoa(r.Capacity) {
			t.Errorf("document %v; want the text of %+v", d, r)
		}
	}
}

func TestResourceDocumentsByID(t *testing.T) {
	c := start(t, demo)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"all exist", []string{"room-aurora", "court-1"}, []string{"court-1", "room-aurora"}},
		{"unknown ids are left out", []string{"desk-a1", "room-nowhere", "", "studio-podcast"}, []string{"desk-a1", "studio-podcast"}},
		{"none exist", []string{"room-nowhere"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := c.DocumentsByID(ctx, booking.EntityResource, tc.ids...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.ID)
				if d.Title == "" || d.Body == "" {
					t.Errorf("document %v is not described", d)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("documents %v; want %v", got, tc.want)
			}
		})
	}
}

// TestResourceRecord: the record of every resource is exactly what
// booking.resources shows for it.
func TestResourceRecord(t *testing.T) {
	c := start(t, demo)
	ctx := context.Background()
	for id, r := range demoByID(t, c) {
		raw, err := c.Record(ctx, booking.EntityResource, id)
		if err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		want, _ := json.Marshal(r)
		if string(raw) != string(want) {
			t.Errorf("record %s = %s; want what booking.resources shows: %s", id, raw, want)
		}
	}
	for _, id := range []string{"room-nowhere", "", strings.Repeat("x", 500)} {
		raw, err := c.Record(ctx, booking.EntityResource, id)
		if !sdk.IsNotFound(err) || !strings.Contains(err.Error(), booking.EntityResource) {
			t.Errorf("record %.20q = %s, %v; want NotFound naming the entity type", id, raw, err)
			continue
		}
		if len(err.Error()) > 200 {
			t.Errorf("NotFound message of %d bytes quotes a long id whole", len(err.Error()))
		}
	}
}

// TestResourcesThroughHost: another plugin reads the booking catalogue
// through the host, as a search indexer does.
func TestResourcesThroughHost(t *testing.T) {
	var (
		catalogue []sdk.EntityInfo
		record    json.RawMessage
		docs      []sdk.Document
		missing   error
	)
	reader := sdk.New("reader", "1")
	reader.OnStart(func(ctx context.Context, env sdk.Env, _ sdk.Start) error {
		var err error
		if catalogue, err = env.Catalogue(ctx); err != nil {
			return err
		}
		if docs, _, err = env.Documents(ctx, booking.EntityResource, "", 3); err != nil {
			return err
		}
		if record, err = env.Record(ctx, booking.EntityResource, "room-aurora"); err != nil {
			return err
		}
		_, missing = env.Record(ctx, booking.EntityResource, "room-nowhere")
		return nil
	})
	h := sdktest.NewHost(t)
	if _, err := h.Add(reader, nil, ""); err != nil {
		t.Fatal(err)
	}
	c, err := h.Add(newPlugin(now), demo, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(catalogue) != 1 {
		t.Fatalf("catalogue %+v; want booking.resource alone", catalogue)
	}
	want := []sdk.EntityInfo{{
		Name: booking.EntityResource, Version: booking.ResourceDocVersion, Provider: "booking",
		Description: catalogue[0].Description,
	}}
	if !slices.Equal(catalogue, want) || !strings.Contains(catalogue[0].Description, "bookable resource") {
		t.Errorf("catalogue %+v; want booking.resource from booking", catalogue)
	}
	if len(docs) != 3 || !slices.IsSortedFunc(docs, func(a, b sdk.Document) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("first page %+v", docs)
	}
	var r booking.Resource
	if err := json.Unmarshal(record, &r); err != nil || r != demoByID(t, c)["room-aurora"] {
		t.Errorf("record %s, %v", record, err)
	}
	if !sdk.IsNotFound(missing) {
		t.Errorf("missing record: %v; want NotFound", missing)
	}
}
