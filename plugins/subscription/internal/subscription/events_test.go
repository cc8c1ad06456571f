package subscription_test

import (
	"encoding/json"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	"github.com/capgate/capgate/sdk/sdktest"
)

func TestEventsPublished(t *testing.T) {
	c := start(t, demo)
	seeded := c.Published()
	plans := map[string]bool{}
	for _, p := range sdktest.Call[subscription.PlansOut](t, c, "subscription.plans", alice, nil).Plans {
		plans[p.ID] = true
	}
	announced := map[string]bool{}
	for _, ev := range seeded {
		if ev.Type != "catalogue.upsert" || ev.Entity != subscription.EntityPlan || !plans[ev.ID] || ev.UserID != "" {
			t.Fatalf("seed event %+v; want a public catalogue.upsert of a seeded plan", ev)
		}
		announced[ev.ID] = true
	}
	if len(seeded) != len(plans) || len(announced) != len(plans) {
		t.Fatalf("seeding published %d events for %d plans; want one catalogue.upsert per plan (%d)", len(seeded), len(announced), len(plans))
	}

	sub := subscribe(t, c, carol, "plus-yearly")
	fail(t, c, "subscription.subscribe", carol, subscription.SubscribeIn{PlanID: "plus-yearly"}, conflict, sub.ID)
	cancel(t, c, carol, subscription.CancelIn{ID: sub.ID})
	cancel(t, c, carol, subscription.CancelIn{ID: sub.ID})                   // already set to end: no event
	cancel(t, c, carol, subscription.CancelIn{ID: sub.ID, AtPeriodEnd: &no}) // ends it now: an event
	cancel(t, c, carol, subscription.CancelIn{ID: sub.ID, AtPeriodEnd: &no}) // already ended: no event

	got := c.Published()[len(seeded):]
	want := []struct {
		typ  string
		data map[string]any
	}{
		{"subscription.started", map[string]any{"plan_id": "plus-yearly", "started_at": "2030-01-07T09:30:00Z", "current_period_end": "2031-01-07T09:30:00Z"}},
		{"subscription.cancelled", map[string]any{"plan_id": "plus-yearly", "cancel_at": "2031-01-07T09:30:00Z", "immediate": false}},
		{"subscription.cancelled", map[string]any{"plan_id": "plus-yearly", "cancel_at": "2030-01-07T09:30:00Z", "immediate": true}},
	}
	if len(got) != len(want) {
		t.Fatalf("published after seeding: %+v; want started, cancelled at period end, cancelled now", got)
	}
	for i, ev := range got {
		if ev.Type != want[i].typ || ev.Entity != "subscription" || ev.ID != sub.ID || ev.UserID != "carol" {
			t.Errorf("event %d = %+v; want %s of %s owned by carol", i, ev, want[i].typ, sub.ID)
		}
		var data map[string]any
		if err := json.Unmarshal(ev.Data, &data); err != nil || len(data) != len(want[i].data) {
			t.Errorf("event %d data = %s, %v; want %v", i, ev.Data, err, want[i].data)
			continue
		}
		for k, v := range want[i].data {
			if data[k] != v {
				t.Errorf("event %d data[%s] = %v; want %v", i, k, data[k], v)
			}
		}
	}
}
