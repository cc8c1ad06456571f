package booking_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// TestPlanVisitPrompt: the prompt renders a caller's own booking, its
// argument completes from that caller's bookings alone, and a booking of
// someone else is as missing as one that does not exist.
func TestPlanVisitPrompt(t *testing.T) {
	ctx := context.Background()
	h := sdktest.NewHost(t)
	h.Roles = roles
	c, err := h.Add(newPlugin(now), demo, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	hers := list(t, c, alice, nil)
	his := list(t, c, bob, nil)
	if len(hers) == 0 || len(his) == 0 {
		t.Fatal("the demo seed books nothing for alice or bob")
	}
	var herIDs []string
	for _, b := range hers {
		if b.Status == "active" {
			herIDs = append(herIDs, b.ID)
		}
	}

	got, err := c.Complete(ctx, "booking.plan_visit", "booking", "bk_", nil, alice)
	if err != nil || !slices.Equal(got.Values, herIDs) {
		t.Fatalf("alice's suggestions %v, want her active bookings %v: %v", got.Values, herIDs, err)
	}
	if got, err := c.Complete(ctx, "booking.plan_visit", "booking", "zz", nil, alice); err != nil || len(got.Values) != 0 {
		t.Fatalf("no booking starts with zz: %v %v", got.Values, err)
	}
	if got, err := c.Complete(ctx, "booking.plan_visit", "booking", "", nil, unbound); err != nil || len(got.Values) != 0 {
		t.Fatalf("an unbound token has no bookings: %v %v", got.Values, err)
	}
	for _, id := range got.Values {
		for _, b := range his {
			if b.ID == id {
				t.Fatalf("alice was offered bob's booking %s", id)
			}
		}
	}

	msgs, err := c.GetPrompt(ctx, "booking.plan_visit", alice, map[string]string{"booking": hers[0].ID, "note": "bring a laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Type != "resource_link" || !strings.HasPrefix(msgs[0].URI, "capgate://booking.resource/") ||
		msgs[1].Type != "text" || !strings.Contains(msgs[1].Text, hers[0].ID) || !strings.Contains(msgs[1].Text, "bring a laptop") {
		t.Fatalf("messages %+v", msgs)
	}
	// Bob's booking is not alice's to plan; an admin may.
	if _, err := c.GetPrompt(ctx, "booking.plan_visit", alice, map[string]string{"booking": his[0].ID}); !sdk.IsNotFound(err) {
		t.Fatalf("bob's booking for alice: %v", err)
	}
	admin := sdk.Principal{Role: "admin", Scope: sdk.ScopeAdmin, UserID: "root"}
	if _, err := c.GetPrompt(ctx, "booking.plan_visit", admin, map[string]string{"booking": his[0].ID}); err != nil {
		t.Fatalf("admin: %v", err)
	}
	// A guest (no booking.read) cannot get, complete or see the prompt.
	guest := sdk.Principal{Role: "guest", Scope: sdk.ScopeAction, UserID: "alice"}
	if _, err := c.GetPrompt(ctx, "booking.plan_visit", guest, map[string]string{"booking": hers[0].ID}); !errors.Is(err, sdktest.ErrUnknownPrompt) {
		t.Fatalf("guest get: %v", err)
	}
	if _, err := c.Complete(ctx, "booking.plan_visit", "booking", "", nil, guest); !errors.Is(err, sdktest.ErrUnknownPrompt) {
		t.Fatalf("guest complete: %v", err)
	}
}
