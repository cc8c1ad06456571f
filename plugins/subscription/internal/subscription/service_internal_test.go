package subscription

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/plugins/subscription/internal/store/sqlite"
	"github.com/capgate/capgate/sdk"
)

// TestOwnChecksBehindTheGate calls the handlers directly with what the gate
// refuses before they run (arguments over the schema's bounds, an action of
// an unbound token): the plugin's own checks still answer with a short
// error the agent can act on, and subscribe no one.
func TestOwnChecksBehindTheGate(t *testing.T) {
	s, st := seededService(t)
	ctx := context.Background()
	carol := sdk.Call{Principal: sdk.Principal{Role: "customer", Scope: sdk.ScopeAction, UserID: "carol"}}
	unbound := sdk.Call{Principal: sdk.Principal{Role: "customer", Scope: sdk.ScopeRead}}
	long := strings.Repeat("x", 10_000)
	tests := []struct {
		name string
		call func() error
		code sdk.ErrorCode
		want []string
	}{
		{"long unknown plan", func() error { _, err := s.Subscribe(ctx, carol, SubscribeIn{PlanID: long}); return err },
			sdk.CodeNotFound, []string{"no plan with id", "…"}},
		{"unbound subscribe", func() error { _, err := s.Subscribe(ctx, unbound, SubscribeIn{PlanID: "plus-monthly"}); return err },
			sdk.CodeInvalidInput, []string{"not bound to a user"}},
		{"long status", func() error { _, err := s.List(ctx, carol, ListIn{Status: long}); return err },
			sdk.CodeInvalidInput, []string{"status must be", "…"}},
		{"long id", func() error { _, err := s.Get(ctx, carol, IDIn{ID: long}); return err },
			sdk.CodeNotFound, []string{"subscription ids look like sub_", "…"}},
		{"long id to cancel", func() error { _, err := s.Cancel(ctx, carol, CancelIn{ID: long}); return err },
			sdk.CodeNotFound, []string{"subscription ids look like sub_", "…"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if sdk.CodeOf(err) != tc.code {
				t.Fatalf("error = %v; want a %s error", err, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q; want it to contain %q", err, w)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error of %d bytes echoes the argument", len(err.Error()))
			}
		})
	}
	if subs, err := st.ListSubscriptions(ctx, "carol", store.ListFilter{Now: demoNow}); err != nil || len(subs) != 0 {
		t.Fatalf("carol has %+v, %v after refused subscribes; want nothing", subs, err)
	}
}

// demoNow is the demo seed's "now".
var demoNow = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

// seededService is the demo-seeded service on a real SQLite file, its
// clock at demoNow.
func seededService(t *testing.T) (*Service, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), DBFile), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := NewService(st, func() time.Time { return demoNow }, nil)
	if _, err := s.Seed(context.Background(), SeedDemo); err != nil {
		t.Fatal(err)
	}
	return s, st
}
