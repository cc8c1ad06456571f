package subscription_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// roles is the gate's policy in TestGate: customers subscribe, guests only
// see the plans, admins may do everything.
var roles = map[string][]string{
	"customer": {"subscription.read", "subscription.write", "catalogue.read"},
	"guest":    {"catalogue.read"},
	"admin":    {"*"},
}

// holdings is what the plugin holds, read back after a call: every demo
// user's subscriptions.
type holdings map[string][]subscription.Subscription

func holdingsOf(t *testing.T, c *sdktest.Client) holdings {
	t.Helper()
	h := holdings{}
	for _, user := range []string{"alice", "bob", "carol"} {
		h[user] = list(t, c, sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: user}, nil)
	}
	return h
}

// TestGate asserts every refusal of the subscription capabilities through
// the real gate, as an agent's call meets it: pack, user binding, scope,
// permission, arguments and ownership, then what the ownership step lets
// through (an admin) and what is no refusal at all (a missing target).
// Each case runs the plugin on its own copy of the demo data, under its own
// policy, and reads back what the plugin holds: a refused call changed
// nothing and published nothing.
func TestGate(t *testing.T) {
	var (
		aliceRead   = sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "alice"}
		aliceGuest  = sdk.Principal{Role: "guest", Scope: sdk.ScopeAction, UserID: "alice"}
		nobody      = sdk.Principal{Role: "customer", Scope: sdk.ScopeAction}
		unknownRole = sdk.Principal{Role: "intern", Scope: sdk.ScopeAction, UserID: "alice"}
	)
	// hers is alice's seeded plus-monthly subscription.
	type target struct{ hers subscription.Subscription }
	subscribe := func(target) any { return subscription.SubscribeIn{PlanID: "pro-yearly"} }
	get := func(tg target) any { return subscription.IDIn{ID: tg.hers.ID} }
	cancelNow := func(tg target) any { return subscription.CancelIn{ID: tg.hers.ID, AtPeriodEnd: &no} }
	missing := "sub_aaaaaaaaaaaa"
	tests := []struct {
		name       string
		disabled   []string // packs turned off
		pr         sdk.Principal
		capability string
		args       func(target) any
		// The outcome: a refusal at step, an error of code whose message
		// contains every one of want, or (neither) a result.
		step sdk.Step
		code sdk.ErrorCode
		// unknown: answered as a capability no plugin provides (its pack
		// is off: invisible and un-callable).
		unknown bool
		want    []string
		// changed checks what a call that succeeds changed; nil means
		// nothing may change.
		changed func(t *testing.T, tg target, before, after holdings)
	}{
		{name: "pack off refuses an action", disabled: []string{"subscription"}, pr: alice, capability: "subscription.subscribe", args: subscribe, unknown: true},
		{name: "pack off refuses a read", disabled: []string{"subscription"}, pr: alice, capability: "subscription.get", args: get, unknown: true},
		{name: "pack off refuses the catalogue", disabled: []string{"subscription"}, pr: alice, capability: "subscription.plans", args: func(target) any { return nil }, unknown: true},

		{name: "an action without a user", pr: nobody, capability: "subscription.subscribe", args: subscribe, step: sdk.StepUserBinding},
		{name: "a cancel without a user", pr: nobody, capability: "subscription.cancel", args: cancelNow, step: sdk.StepUserBinding},
		{name: "an unbound read-scope token's action", pr: unbound, capability: "subscription.subscribe", args: subscribe, step: sdk.StepUserBinding},

		{name: "read scope calls an action", pr: aliceRead, capability: "subscription.subscribe", args: subscribe, step: sdk.StepScope},
		{name: "read scope cancels her own subscription", pr: aliceRead, capability: "subscription.cancel", args: cancelNow, step: sdk.StepScope},
		{name: "a token without a known scope", pr: sdk.Principal{Role: "customer", UserID: "alice"}, capability: "subscription.list", args: func(target) any { return nil }, step: sdk.StepScope},

		{name: "role without subscription.write", pr: aliceGuest, capability: "subscription.subscribe", args: subscribe, step: sdk.StepPermission},
		{name: "role without subscription.read", pr: aliceGuest, capability: "subscription.get", args: get, step: sdk.StepPermission},
		{name: "a role the policy does not name", pr: unknownRole, capability: "subscription.cancel", args: cancelNow, step: sdk.StepPermission},

		{name: "plan_id over its maxLength", pr: alice, capability: "subscription.subscribe", code: invalid,
			args: func(target) any { return subscription.SubscribeIn{PlanID: strings.Repeat("x", 64)} },
			want: []string{"invalid arguments for subscription.subscribe", "/properties/plan_id: maxLength", "more than 63"}},
		{name: "id over its maxLength", pr: alice, capability: "subscription.cancel", code: invalid,
			args: func(tg target) any {
				return subscription.CancelIn{ID: tg.hers.ID + strings.Repeat("x", 17), AtPeriodEnd: &no}
			},
			want: []string{"invalid arguments for subscription.cancel", "/properties/id: maxLength", "more than 32"}},
		{name: "at_period_end of the wrong type", pr: alice, capability: "subscription.cancel", code: invalid,
			args: func(tg target) any { return map[string]any{"id": tg.hers.ID, "at_period_end": "no"} },
			want: []string{"invalid arguments for subscription.cancel", "/properties/at_period_end: type", "boolean"}},
		{name: "a property the schema does not have", pr: alice, capability: "subscription.subscribe", code: invalid,
			args: func(target) any { return map[string]any{"plan_id": "pro-yearly", "user_id": "bob"} },
			want: []string{"invalid arguments for subscription.subscribe", `additional properties ["user_id"]`}},
		{name: "id missing", pr: alice, capability: "subscription.cancel", code: invalid,
			args: func(target) any { return map[string]any{"at_period_end": false} },
			want: []string{"invalid arguments for subscription.cancel", `missing properties: ["id"]`}},

		{name: "bob cannot get alice's subscription", pr: bob, capability: "subscription.get", args: get, step: sdk.StepOwnership},
		{name: "bob cannot cancel alice's subscription", pr: bob, capability: "subscription.cancel", args: cancelNow, step: sdk.StepOwnership},

		{name: "admin scope gets alice's subscription", pr: operator, capability: "subscription.get", args: get},
		{name: "admin scope cancels alice's subscription", pr: operator, capability: "subscription.cancel", args: cancelNow,
			changed: func(t *testing.T, tg target, before, after holdings) {
				got := after["alice"]
				if len(got) != 1 || got[0].ID != tg.hers.ID || got[0].Status != "cancelled" || got[0].CancelAt != "2030-01-07T09:30:00Z" {
					t.Errorf("alice's subscriptions after the admin's cancel: %+v; want %s cancelled now", got, tg.hers.ID)
				}
				if fmt.Sprint(after["bob"]) != fmt.Sprint(before["bob"]) {
					t.Errorf("bob's subscriptions changed: %+v", after["bob"])
				}
			}},

		{name: "get of a missing subscription", pr: bob, capability: "subscription.get", code: notFound,
			args: func(target) any { return subscription.IDIn{ID: missing} },
			want: []string{`no subscription with id "sub_aaaaaaaaaaaa"`}},
		{name: "cancel of a missing subscription", pr: bob, capability: "subscription.cancel", code: notFound,
			args: func(target) any { return subscription.CancelIn{ID: missing, AtPeriodEnd: &no} },
			want: []string{`no subscription with id "sub_aaaaaaaaaaaa"`}},
		{name: "an admin's cancel of a missing subscription", pr: operator, capability: "subscription.cancel", code: notFound,
			args: func(target) any { return subscription.CancelIn{ID: missing} },
			want: []string{`no subscription with id "sub_aaaaaaaaaaaa"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case has data and a host of its own
			dir := t.TempDir()
			// The reader sees the data with every pack on and every role
			// holding every permission, whatever the case's policy.
			reader := startIn(t, dir, now, demo)
			before := holdingsOf(t, reader)
			tg := target{hers: before["alice"][0]}
			if tg.hers.PlanID != "plus-monthly" || tg.hers.Status != "active" || tg.hers.CancelAt != "" {
				t.Fatalf("alice's seeded subscription is %+v; want a running plus-monthly", tg.hers)
			}

			h := sdktest.NewHost(t)
			h.Roles, h.DisabledPacks = roles, tc.disabled
			c, err := h.Add(newPlugin(now), nil, dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Start(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			args := tc.args(tg)
			raw, err := c.Invoke(context.Background(), tc.capability, tc.pr, args)
			switch {
			case tc.unknown:
				if !errors.Is(err, sdk.ErrUnknownCapability) || sdk.IsRefused(err) {
					t.Fatalf("%s(%v) as %+v = %s, %v; want the answer to an unknown capability", tc.capability, args, tc.pr, raw, err)
				}
			case tc.step != "":
				if got := sdk.RefusedAt(err); got != tc.step || sdk.CodeOf(err) != 0 {
					t.Fatalf("%s(%v) as %+v = %s, %v (refused at %q); want a refusal at %s", tc.capability, args, tc.pr, raw, err, got, tc.step)
				}
			case tc.code != 0:
				if sdk.IsRefused(err) || sdk.CodeOf(err) != tc.code {
					t.Fatalf("%s(%v) as %+v = %s, %v; want a %s error, not a refusal", tc.capability, args, tc.pr, raw, err, tc.code)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("%s(%v): %q; want it to contain %q", tc.capability, args, err, w)
					}
				}
			case err != nil:
				t.Fatalf("%s(%v) as %+v: %v; want a result", tc.capability, args, tc.pr, err)
			case tc.capability == "subscription.get" && !strings.Contains(string(raw), `"id":"`+tg.hers.ID+`"`):
				t.Fatalf("%s = %s; want alice's subscription %s", tc.capability, raw, tg.hers.ID)
			}

			after := holdingsOf(t, reader)
			if tc.changed != nil {
				tc.changed(t, tg, before, after)
				return
			}
			if fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the call changed what the plugin holds:\nbefore %+v\nafter  %+v", before, after)
			}
			for _, ev := range c.Published() {
				t.Errorf("the call published %s of %s %s; want nothing", ev.Type, ev.Entity, ev.ID)
			}
		})
	}
}
