package subscription

import (
	"context"
	"fmt"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/sdk"
)

// SeedDemo is the name of the demo seed, as the config's seed key spells it.
const SeedDemo = "demo"

// demoPlans is a small streaming-and-storage style offer: tiers by month and
// by year and a student plan, described so that searching for "family",
// "offline", "4K", "student" or "yearly" finds something.
var demoPlans = []store.Plan{
	{
		ID: "basic-monthly", Name: "Basic (monthly)", PriceCents: 499, Currency: "EUR", Period: store.Monthly,
		Description: "Entry plan for one person: HD streaming on one screen at a time, 50 GB cloud storage, ad-supported; cancel any month.",
	},
	{
		ID: "plus-monthly", Name: "Plus (monthly)", PriceCents: 999, Currency: "EUR", Period: store.Monthly,
		Description: "Ad-free Full HD streaming on two screens at once, offline downloads on two devices and 500 GB cloud storage.",
	},
	{
		ID: "plus-yearly", Name: "Plus (yearly)", PriceCents: 9990, Currency: "EUR", Period: store.Yearly,
		Description: "Everything in Plus, paid once a year: two months free compared with paying monthly.",
	},
	{
		ID: "pro-monthly", Name: "Pro (monthly)", PriceCents: 1799, Currency: "EUR", Period: store.Monthly,
		Description: "Family plan for up to six profiles: 4K Ultra HD with HDR on four screens, offline downloads on ten devices, 2 TB shared cloud storage and priority support.",
	},
	{
		ID: "pro-yearly", Name: "Pro (yearly)", PriceCents: 17990, Currency: "EUR", Period: store.Yearly,
		Description: "Everything in Pro for the whole family, billed yearly at a discount of about two months.",
	},
	{
		ID: "student-monthly", Name: "Student (monthly)", PriceCents: 399, Currency: "EUR", Period: store.Monthly,
		Description: "Plus at half price for students with a valid university or college email: ad-free Full HD, offline downloads, 500 GB cloud storage.",
	},
}

// demoSubscriptions gives alice a Plus and bob a Basic subscription, started
// ten days before now so that they are mid-period when seeded.
func (s *Service) demoSubscriptions(now time.Time) []store.Subscription {
	started := now.Add(-10 * 24 * time.Hour)
	mk := func(user, planID string, period store.Period) store.Subscription {
		return store.Subscription{
			ID: s.newID(), PlanID: planID, UserID: user, Period: period, Status: store.StatusActive,
			StartedAt: started, CurrentPeriodEnd: period.End(started, 1),
		}
	}
	return []store.Subscription{
		mk("alice", "plus-monthly", store.Monthly),
		mk("bob", "basic-monthly", store.Monthly),
	}
}

// Seed applies the named seed to an empty store, once. It reports whether
// anything was written.
func (s *Service) Seed(ctx context.Context, name string) (bool, error) {
	if name != SeedDemo {
		return false, fmt.Errorf("unknown seed %q", name)
	}
	now := s.clock()
	applied, err := s.store.Seed(ctx, name, now, demoPlans, s.demoSubscriptions(now))
	if err != nil {
		return false, fmt.Errorf("seed %q: %w", name, err)
	}
	if !applied {
		s.log.Debug("seed not applied: it was applied before or the database holds plans", "seed", name)
		return false, nil
	}
	s.log.Info("seeded the subscription database", "seed", name, "plans", len(demoPlans))
	// Plans are announced so search indexes them; the seeded
	// subscriptions are history from before the plugin ran, not news.
	for _, p := range demoPlans {
		s.publish(ctx, sdk.Event{
			Type: "catalogue.upsert", Entity: EntityPlan, ID: p.ID,
			Data: map[string]any{"name": p.Name, "period": string(p.Period)},
		})
	}
	return true, nil
}
