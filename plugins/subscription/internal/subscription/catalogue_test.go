package subscription_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func demoPlans(t *testing.T, c *sdktest.Client) map[string]subscription.Plan {
	t.Helper()
	out := map[string]subscription.Plan{}
	for _, p := range sdktest.Call[subscription.PlansOut](t, c, "subscription.plans", unbound, nil).Plans {
		out[p.ID] = p
	}
	return out
}

// TestPlanDocumentsPaging walks the demo catalogue in pages of every size:
// each plan comes once, in id order, and more is false on the last page.
func TestPlanDocumentsPaging(t *testing.T) {
	c := start(t, demo)
	var want []string
	for id := range demoPlans(t, c) {
		want = append(want, id)
	}
	slices.Sort(want)
	ctx := context.Background()
	for _, limit := range []int{0, 1, 2, 3, 5, len(want), len(want) + 1, 1000} {
		t.Run("limit "+strconv.Itoa(limit), func(t *testing.T) {
			var got []string
			after := ""
			for pages := 1; ; pages++ {
				if pages > len(want)+1 {
					t.Fatalf("paging does not end: %v", got)
				}
				page, more, err := c.Documents(ctx, subscription.EntityPlan, after, limit)
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
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages gave %v; want each plan once in id order: %v", got, want)
			}
		})
	}
	for _, after := range []string{want[len(want)-1], "zzz"} {
		page, more, err := c.Documents(ctx, subscription.EntityPlan, after, 0)
		if err != nil || len(page) != 0 || more {
			t.Errorf("after %q: %v, more %v, %v; want an empty last page", after, page, more, err)
		}
	}
	// An after that is not an id starts at the next id.
	page, _, err := c.Documents(ctx, subscription.EntityPlan, "plus", 1)
	if err != nil || len(page) != 1 || page[0].ID != "plus-monthly" {
		t.Errorf("after plus: %v, %v; want plus-monthly", page, err)
	}
	page, more, err := start(t, nil).Documents(ctx, subscription.EntityPlan, "", 0)
	if err != nil || len(page) != 0 || more {
		t.Errorf("unseeded documents: %v, more %v, %v", page, more, err)
	}
}

// TestPlanDocuments: a document is what search needs of a plan — name as
// title, description as body, billing period and price as fields.
func TestPlanDocuments(t *testing.T) {
	c := start(t, demo)
	byID := demoPlans(t, c)
	docs, _, err := c.Documents(context.Background(), subscription.EntityPlan, "", 0)
	if err != nil || len(docs) != len(byID) {
		t.Fatalf("documents = %v, %v; want %d", docs, err, len(byID))
	}
	for _, d := range docs {
		p := byID[d.ID]
		billing := map[string]string{"month": "monthly", "year": "yearly"}[p.Period]
		if d.Title != p.Name || d.Body != p.Description || d.Fields["billing"] != billing ||
			!strings.HasSuffix(d.Fields["price"], " EUR per "+p.Period) {
			t.Errorf("document %v; want the text of %+v", d, p)
		}
	}
	if d, err := c.DocumentsByID(context.Background(), subscription.EntityPlan, "plus-yearly"); err != nil || len(d) != 1 || d[0].Fields["price"] != "99.90 EUR per year" {
		t.Errorf("plus-yearly documents = %v, %v; want its price field 99.90 EUR per year", d, err)
	}
}

func TestPlanDocumentsByID(t *testing.T) {
	c := start(t, demo)
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"all exist", []string{"pro-yearly", "basic-monthly"}, []string{"basic-monthly", "pro-yearly"}},
		{"unknown ids are left out", []string{"student-monthly", "gold", "", "plus-monthly"}, []string{"plus-monthly", "student-monthly"}},
		{"none exist", []string{"gold"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := c.DocumentsByID(context.Background(), subscription.EntityPlan, tc.ids...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("documents %v; want %v", got, tc.want)
			}
		})
	}
}

// TestPlanRecord: the record of every plan is exactly what
// subscription.plans shows for it; anything else is NotFound.
func TestPlanRecord(t *testing.T) {
	c := start(t, demo)
	ctx := context.Background()
	for id, p := range demoPlans(t, c) {
		raw, err := c.Record(ctx, subscription.EntityPlan, id)
		if err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		want, _ := json.Marshal(p)
		if string(raw) != string(want) {
			t.Errorf("record %s = %s; want %s", id, raw, want)
		}
	}
	for _, id := range []string{"gold", "", strings.Repeat("x", 500)} {
		raw, err := c.Record(ctx, subscription.EntityPlan, id)
		if !sdk.IsNotFound(err) || !strings.Contains(err.Error(), subscription.EntityPlan) || len(err.Error()) > 200 {
			t.Errorf("record %.20q = %s, %v; want a short NotFound naming the entity type", id, raw, err)
		}
	}
}
