package subscription_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
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
				resp, err := c.Documents(ctx, subscription.EntityPlan, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				page := resp.GetDocuments()
				if limit > 0 && len(page) > limit {
					t.Fatalf("page of %d documents; limit %d", len(page), limit)
				}
				for _, d := range page {
					got = append(got, d.GetId())
				}
				if !resp.GetMore() {
					break
				}
				after = page[len(page)-1].GetId()
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages gave %v; want each plan once in id order: %v", got, want)
			}
		})
	}
	for _, after := range []string{want[len(want)-1], "zzz"} {
		resp, err := c.Documents(ctx, subscription.EntityPlan, after, 0)
		if err != nil || len(resp.GetDocuments()) != 0 || resp.GetMore() {
			t.Errorf("after %q: %v, %v; want an empty last page", after, resp, err)
		}
	}
	// An after that is not an id starts at the next id.
	resp, err := c.Documents(ctx, subscription.EntityPlan, "plus", 1)
	if err != nil || len(resp.GetDocuments()) != 1 || resp.GetDocuments()[0].GetId() != "plus-monthly" {
		t.Errorf("after plus: %v, %v; want plus-monthly", resp, err)
	}
	resp, err = start(t, nil).Documents(ctx, subscription.EntityPlan, "", 0)
	if err != nil || len(resp.GetDocuments()) != 0 || resp.GetMore() {
		t.Errorf("unseeded documents: %v, %v", resp, err)
	}
}

// TestPlanDocuments: a document is what search needs of a plan — name as
// title, description as body, billing period and price as fields.
func TestPlanDocuments(t *testing.T) {
	c := start(t, demo)
	byID := demoPlans(t, c)
	resp, err := c.Documents(context.Background(), subscription.EntityPlan, "", 0)
	if err != nil || len(resp.GetDocuments()) != len(byID) {
		t.Fatalf("documents = %v, %v; want %d", resp, err, len(byID))
	}
	for _, d := range resp.GetDocuments() {
		p := byID[d.GetId()]
		billing := map[string]string{"month": "monthly", "year": "yearly"}[p.Period]
		if d.GetTitle() != p.Name || d.GetBody() != p.Description || d.GetFields()["billing"] != billing ||
			!strings.HasSuffix(d.GetFields()["price"], " EUR per "+p.Period) {
			t.Errorf("document %v; want the text of %+v", d, p)
		}
	}
	if d, _ := c.DocumentsByID(context.Background(), subscription.EntityPlan, "plus-yearly"); d.GetDocuments()[0].GetFields()["price"] != "99.90 EUR per year" {
		t.Errorf("plus-yearly price field = %q", d.GetDocuments()[0].GetFields()["price"])
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
			resp, err := c.DocumentsByID(context.Background(), subscription.EntityPlan, tc.ids...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range resp.GetDocuments() {
				got = append(got, d.GetId())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) || resp.GetMore() {
				t.Errorf("documents %v, more %v; want %v", got, resp.GetMore(), tc.want)
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
		raw, te, err := c.Record(ctx, subscription.EntityPlan, id)
		if err != nil || te != nil {
			t.Fatalf("record %s: %v, %v", id, te, err)
		}
		want, _ := json.Marshal(p)
		if string(raw) != string(want) {
			t.Errorf("record %s = %s; want %s", id, raw, want)
		}
	}
	for _, id := range []string{"gold", "", strings.Repeat("x", 500)} {
		raw, te, err := c.Record(ctx, subscription.EntityPlan, id)
		if err != nil || te == nil || te.Code != capgatev1.ToolError_CODE_NOT_FOUND || !strings.Contains(te.Message, subscription.EntityPlan) || len(te.Message) > 200 {
			t.Errorf("record %.20q = %s, %v, %v; want a short NotFound naming the entity type", id, raw, te, err)
		}
	}
}
