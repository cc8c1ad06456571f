package booking_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/capgate/capgate/plugins/booking/internal/booking"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// roles is the gate's policy in TestGate: customers book, guests only see
// the catalogue, admins may do everything (booking.admin included).
var roles = map[string][]string{
	"customer": {"booking.read", "booking.write", "catalogue.read"},
	"guest":    {"catalogue.read"},
	"admin":    {"*"},
}

// freeSlot is a slot of room-aurora the demo seed leaves free.
const freeSlot = "2030-01-08T11:00:00Z"

// holdings is what the plugin holds, read back after a call: every demo
// user's bookings and room-aurora's free slots on the seeded day.
type holdings struct {
	Bookings map[string][]booking.Booking
	Free     []string
}

func holdingsOf(t *testing.T, c *sdktest.Client) holdings {
	t.Helper()
	h := holdings{Bookings: map[string][]booking.Booking{}}
	for _, user := range []string{"alice", "bob", "carol"} {
		h.Bookings[user] = list(t, c, sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: user}, nil)
	}
	h.Free = freeStarts(t, c, booking.AvailabilityIn{ResourceID: "room-aurora", Date: "2030-01-08"})
	return h
}

// TestGate asserts every refusal of the booking capabilities through the
// real gate, as an agent's call meets it: pack, user binding, scope,
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
	// hers is alice's seeded booking of room-aurora at 10:00 tomorrow.
	type target struct{ hers booking.Booking }
	create := func(target) any { return booking.CreateIn{ResourceID: "room-aurora", Start: freeSlot} }
	hers := func(tg target) any { return booking.IDIn{ID: tg.hers.ID} }
	missing := func(target) any { return booking.IDIn{ID: "bk_aaaaaaaaaaaa"} }
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
		{name: "pack off refuses an action", disabled: []string{"booking"}, pr: alice, capability: "booking.create", args: create, unknown: true},
		{name: "pack off refuses a read", disabled: []string{"booking"}, pr: alice, capability: "booking.get", args: hers, unknown: true},
		{name: "pack off refuses the catalogue", disabled: []string{"booking"}, pr: alice, capability: "booking.resources", args: func(target) any { return nil }, unknown: true},

		{name: "an action without a user", pr: nobody, capability: "booking.create", args: create, step: sdk.StepUserBinding},
		{name: "a cancel without a user", pr: nobody, capability: "booking.cancel", args: hers, step: sdk.StepUserBinding},
		{name: "an unbound read-scope token's action", pr: unbound, capability: "booking.create", args: create, step: sdk.StepUserBinding},

		{name: "read scope calls an action", pr: aliceRead, capability: "booking.create", args: create, step: sdk.StepScope},
		{name: "read scope cancels her own booking", pr: aliceRead, capability: "booking.cancel", args: hers, step: sdk.StepScope},
		{name: "a token without a known scope", pr: sdk.Principal{Role: "customer", UserID: "alice"}, capability: "booking.list", args: func(target) any { return nil }, step: sdk.StepScope},

		{name: "role without booking.write", pr: aliceGuest, capability: "booking.create", args: create, step: sdk.StepPermission},
		{name: "role without booking.read", pr: aliceGuest, capability: "booking.get", args: hers, step: sdk.StepPermission},
		{name: "role without booking.admin", pr: alice, capability: "booking.add_resource", step: sdk.StepPermission,
			args: func(target) any { return zenith() }},
		{name: "a role the policy does not name", pr: unknownRole, capability: "booking.cancel", args: hers, step: sdk.StepPermission},

		{name: "start over its maxLength", pr: alice, capability: "booking.create", code: invalid,
			args: func(target) any {
				return booking.CreateIn{ResourceID: "room-aurora", Start: "2030-01-08T11:00:00.000000000000000000000Z"}
			},
			want: []string{"invalid arguments for booking.create", "/properties/start: maxLength", "more than 40"}},
		{name: "resource_id of the wrong type", pr: alice, capability: "booking.create", code: invalid,
			args: func(target) any { return map[string]any{"resource_id": 7, "start": freeSlot} },
			want: []string{"invalid arguments for booking.create", `/properties/resource_id: type: 7 has type "integer", want "string"`}},
		{name: "a property the schema does not have", pr: alice, capability: "booking.create", code: invalid,
			args: func(target) any {
				return map[string]any{"resource_id": "room-aurora", "start": freeSlot, "user_id": "bob"}
			},
			want: []string{"invalid arguments for booking.create", `additional properties ["user_id"]`}},
		{name: "id missing", pr: alice, capability: "booking.cancel", code: invalid,
			args: func(target) any { return map[string]any{} },
			want: []string{"invalid arguments for booking.cancel", `missing properties: ["id"]`}},
		{name: "days over its maximum", pr: alice, capability: "booking.availability", code: invalid,
			args: func(target) any { return booking.AvailabilityIn{ResourceID: "room-aurora", Days: 15} },
			want: []string{"invalid arguments for booking.availability", "/properties/days: maximum", "greater than 14"}},

		{name: "bob cannot get alice's booking", pr: bob, capability: "booking.get", args: hers, step: sdk.StepOwnership},
		{name: "bob cannot cancel alice's booking", pr: bob, capability: "booking.cancel", args: hers, step: sdk.StepOwnership},

		{name: "admin scope gets alice's booking", pr: operator, capability: "booking.get", args: hers},
		{name: "admin scope cancels alice's booking", pr: operator, capability: "booking.cancel", args: hers,
			changed: func(t *testing.T, tg target, before, after holdings) {
				got := after.Bookings["alice"]
				if len(got) != 2 || got[0].ID != tg.hers.ID || got[0].Status != "cancelled" || got[1] != before.Bookings["alice"][1] {
					t.Errorf("alice's bookings after the admin's cancel: %+v; want %s cancelled, the other unchanged", got, tg.hers.ID)
				}
				if !contains(after.Free, tg.hers.Start) {
					t.Errorf("the slot %s is not free again: %v", tg.hers.Start, after.Free)
				}
				if fmt.Sprint(after.Bookings["bob"]) != fmt.Sprint(before.Bookings["bob"]) {
					t.Errorf("bob's bookings changed: %+v", after.Bookings["bob"])
				}
			}},

		{name: "get of a missing booking", pr: bob, capability: "booking.get", args: missing, code: notFound,
			want: []string{`no booking with id "bk_aaaaaaaaaaaa"`}},
		{name: "cancel of a missing booking", pr: bob, capability: "booking.cancel", args: missing, code: notFound,
			want: []string{`no booking with id "bk_aaaaaaaaaaaa"`}},
		{name: "an admin's cancel of a missing booking", pr: operator, capability: "booking.cancel", args: missing, code: notFound,
			want: []string{`no booking with id "bk_aaaaaaaaaaaa"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each case has data and a host of its own
			dir := t.TempDir()
			// The reader sees the data with every pack on and every role
			// holding every permission, whatever the case's policy.
			reader := startIn(t, dir, now, demo)
			tg := target{hers: list(t, reader, alice, nil)[0]}
			if tg.hers.ResourceID != "room-aurora" || tg.hers.Status != "active" || tg.hers.Start == freeSlot {
				t.Fatalf("alice's first seeded booking is %+v; want an active one of room-aurora", tg.hers)
			}
			before := holdingsOf(t, reader)
			if !contains(before.Free, freeSlot) {
				t.Fatalf("slot %s is not free in the demo: %v", freeSlot, before.Free)
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
			case tc.capability == "booking.get" && !strings.Contains(string(raw), `"id":"`+tg.hers.ID+`"`):
				t.Fatalf("%s = %s; want alice's booking %s", tc.capability, raw, tg.hers.ID)
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
