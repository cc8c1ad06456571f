package catalogue_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/catalogue"
)

func TestAdd(t *testing.T) {
	type add struct{ plugin, entity string }
	for _, tc := range []struct {
		name    string
		blocked []string
		adds    []add
		wantErr error    // of the last add; nil means every add succeeds
		wantMsg []string // substrings of the last add's error
	}{
		{name: "plain", adds: []add{{"booking", "booking.resource"}}},
		{name: "single segment", adds: []add{{"booking", "resource"}}},
		{name: "two plugins, two types", adds: []add{{"booking", "booking.resource"}, {"shop", "shop.product"}}},
		{name: "user refused", adds: []add{{"crm", "user"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`plugin "crm"`, `entity type "user"`, `"user" is always blocked`}},
		{name: "invoice refused", adds: []add{{"shop", "invoice"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`plugin "shop"`, `entity type "invoice"`}},
		{name: "dotted invoice refused", adds: []add{{"leaky", "shop.invoice"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`plugin "leaky"`, `entity type "shop.invoice"`, "personal or financial data", `"invoice" is always blocked`}},
		{name: "deep dotted user refused", adds: []add{{"crm", "crm.account.user"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`plugin "crm"`, `entity type "crm.account.user"`}},
		{name: "always blocked whatever the config", blocked: []string{"customer"}, adds: []add{{"crm", "crm.user"}},
			wantErr: catalogue.ErrBlocked, wantMsg: []string{`"user" is always blocked`}},
		{name: "user only as a last segment", adds: []add{{"crm", "user.profile_public"}, {"crm", "crm.username"}, {"shop", "invoices"}}},
		{name: "configured exact", blocked: []string{"customer"}, adds: []add{{"crm", "customer"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`plugin "crm"`, `entity type "customer"`, `"customer" is blocked by search.blocked_entities`}},
		{name: "configured last segment", blocked: []string{"customer"}, adds: []add{{"crm", "crm.customer"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`entity type "crm.customer"`, "search.blocked_entities"}},
		{name: "configured dotted", blocked: []string{"crm.contact"}, adds: []add{{"crm", "crm.contact"}}, wantErr: catalogue.ErrBlocked,
			wantMsg: []string{`entity type "crm.contact"`, `"crm.contact" is blocked by search.blocked_entities`}},
		{name: "configured dotted leaves its siblings", blocked: []string{"crm.contact"}, adds: []add{{"crm", "contact"}, {"crm", "crm.company"}}},
		{name: "configured does not match a prefix", blocked: []string{"customer"}, adds: []add{{"crm", "customer.segment"}, {"crm", "crm.customers"}}},
		{name: "duplicate names both plugins", adds: []add{{"booking", "booking.resource"}, {"rooms", "booking.resource"}},
			wantErr: catalogue.ErrDuplicate, wantMsg: []string{`plugin "rooms"`, `entity type "booking.resource"`, `already provided by plugin "booking"`}},
		{name: "duplicate within one plugin", adds: []add{{"booking", "booking.resource"}, {"booking", "booking.resource"}},
			wantErr: catalogue.ErrDuplicate},
		{name: "empty name", adds: []add{{"booking", ""}}, wantErr: catalogue.ErrInvalidName, wantMsg: []string{`plugin "booking"`, `entity type ""`}},
		{name: "upper case", adds: []add{{"booking", "Booking.Resource"}}, wantErr: catalogue.ErrInvalidName,
			wantMsg: []string{`entity type "Booking.Resource"`, "must match"}},
		{name: "trailing dot", adds: []add{{"booking", "booking."}}, wantErr: catalogue.ErrInvalidName},
		{name: "leading digit segment", adds: []add{{"booking", "booking.1st"}}, wantErr: catalogue.ErrInvalidName},
		{name: "hyphen", adds: []add{{"booking", "booking-resource"}}, wantErr: catalogue.ErrInvalidName},
		{name: "malformed is not hidden by blocking", adds: []add{{"shop", "Shop.Invoice"}}, wantErr: catalogue.ErrInvalidName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := catalogue.New(tc.blocked)
			var err error
			for i, a := range tc.adds {
				err = c.Add(a.plugin, a.entity)
				if i < len(tc.adds)-1 && err != nil {
					t.Fatalf("Add(%q, %q) = %v", a.plugin, a.entity, err)
				}
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Add = %v", err)
				}
				for _, a := range tc.adds {
					if p, ok := c.Provider(a.entity); !ok || p != a.plugin {
						t.Errorf("Provider(%q) = %q, %v; want %q", a.entity, p, ok, a.plugin)
					}
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Add = %v; want %v", err, tc.wantErr)
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			last := tc.adds[len(tc.adds)-1]
			if p, ok := c.Provider(last.entity); ok && tc.wantErr != catalogue.ErrDuplicate {
				t.Errorf("refused %q is registered to %q", last.entity, p)
			}
			if tc.wantErr == catalogue.ErrDuplicate {
				if p, _ := c.Provider(last.entity); p != tc.adds[0].plugin {
					t.Errorf("duplicate replaced the provider: Provider = %q", p)
				}
			}
		})
	}
}

func TestLookups(t *testing.T) {
	c := catalogue.New(nil)
	if got := c.Entities(); len(got) != 0 {
		t.Errorf("empty Entities() = %v", got)
	}
	if p, ok := c.Provider("booking.resource"); ok {
		t.Errorf("empty Provider = %q, true", p)
	}
	for _, a := range [][2]string{{"shop", "shop.product"}, {"booking", "booking.resource"}, {"booking", "booking.desk"}} {
		if err := c.Add(a[0], a[1]); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.Add("crm", "crm.user") // refused: must not show up
	want := []string{"booking.desk", "booking.resource", "shop.product"}
	if got := c.Entities(); !slices.Equal(got, want) {
		t.Errorf("Entities() = %v; want %v", got, want)
	}
	if p, ok := c.Provider("shop.product"); !ok || p != "shop" {
		t.Errorf("Provider(shop.product) = %q, %v", p, ok)
	}
	if _, ok := c.Provider("crm.user"); ok {
		t.Error("a refused entity type has a provider")
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"booking.resource": true, "a": true, "a_b.c9": true, "x.y.z": true,
		"": false, ".a": false, "a.": false, "a..b": false, "A": false, "9a": false, "a.9": false, "a-b": false, "a b": false,
	} {
		if got := catalogue.ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v; want %v", name, got, want)
		}
	}
}
