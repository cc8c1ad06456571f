package app_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/sdk/pgtest"
)

// TestVerticalsShareOnePostgresSchema: an operator pointing booking and
// subscription at the same database gets two working verticals, each with
// its own tables and migration history, twice over (a restart migrates and
// seeds nothing again).
func TestVerticalsShareOnePostgresSchema(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	for run := range 2 {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-alice-1, role: customer, scope: action, user_id: alice}]
roles: {customer: [booking.read, catalogue.read, subscription.read]}
packs: {booking: true, subscription: true}
plugins:
  - {name: booking, path: %s, config: {seed: demo, dsn: %q}}
  - {name: subscription, path: %s, config: {seed: demo, dsn: %q}}
`, t.TempDir(), bookingBin, dsn, subscriptionBin, dsn)), "")
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(context.Background(), cfg, quiet())
		if err != nil {
			t.Fatalf("start %d: %v", run+1, err)
		}
		ln := listen(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Serve(ctx, ln) }()
		addr := ln.Addr().String()
		for tool, key := range map[string]string{"booking.resources": "resources", "subscription.plans": "plans", "subscription.list": "subscriptions"} {
			out, msg := mcpTool(t, addr, "test-alice-1", tool, map[string]any{})
			if msg != "" {
				t.Errorf("start %d: %s: %s", run+1, tool, msg)
				continue
			}
			if items, _ := out[key].([]any); len(items) == 0 {
				t.Errorf("start %d: %s = %v, want the demo seed's %s", run+1, tool, out, key)
			}
		}
		if subs, _ := mcpTool(t, addr, "test-alice-1", "subscription.list", map[string]any{}); len(subs["subscriptions"].([]any)) != 1 {
			t.Errorf("start %d: alice has %v, want her one seeded subscription (seeded once)", run+1, subs)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
