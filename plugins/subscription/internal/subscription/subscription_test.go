package subscription_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/subscription/internal/subscription"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/pgtest"
	"github.com/capgate/capgate/sdk/sdktest"
)

// now is the instant every test runs at: Monday 2030-01-07, 09:30 UTC. The
// demo seed starts its subscriptions ten days earlier, 2029-12-28, so their
// first period ends 2030-01-28.
var now = time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)

const (
	notFound = sdk.CodeNotFound
	invalid  = sdk.CodeInvalidInput
	conflict = sdk.CodeConflict

	seededStart = "2029-12-28T09:30:00Z"
	seededEnd   = "2030-01-28T09:30:00Z"
)

var (
	alice   = sdk.Principal{Role: "customer", Scope: "action", UserID: "alice"}
	bob     = sdk.Principal{Role: "customer", Scope: "action", UserID: "bob"}
	carol   = sdk.Principal{Role: "customer", Scope: "action", UserID: "carol"}
	unbound = sdk.Principal{Role: "customer", Scope: "read"}
	demo    = map[string]any{"seed": "demo"}
	yes, no = true, false
)

// operator's admin scope acts on any user's subscriptions.
var operator = sdk.Principal{Role: "admin", Scope: "admin", UserID: "ops"}

var idPattern = regexp.MustCompile(`^sub_[a-z2-7]{12}$`)

func newPlugin(at time.Time) *sdk.Plugin {
	p := sdk.New("subscription", "test")
	subscription.Register(p, subscription.WithClock(func() time.Time { return at }))
	return p
}

func start(t *testing.T, config any) *sdktest.Client {
	t.Helper()
	return sdktest.Start(t, newPlugin(now), config)
}

func startIn(t *testing.T, dir string, at time.Time, config any) *sdktest.Client {
	t.Helper()
	c, err := sdktest.StartIn(t, newPlugin(at), config, dir)
	if err != nil {
		t.Fatalf("start in %s: %v", dir, err)
	}
	return c
}

// fail calls a capability that must fail with an error the agent can act
// on (an *sdk.Error, the gate's argument check included) of code, whose
// message contains every one of want.
func fail(t *testing.T, c *sdktest.Client, capability string, pr sdk.Principal, args any, code sdk.ErrorCode, want ...string) {
	t.Helper()
	raw, err := c.Invoke(context.Background(), capability, pr, args)
	var e *sdk.Error
	switch {
	case err == nil:
		t.Fatalf("%s(%v) succeeded with %s; want a %s error", capability, args, raw, code)
	case !errors.As(err, &e):
		t.Fatalf("%s(%v) failed with %v; want a %s error for the agent, not a refusal or an internal failure", capability, args, err, code)
	case e.Code != code:
		t.Fatalf("%s(%v) failed with %v (%s); want code %s", capability, args, e, e.Code, code)
	}
	for _, w := range want {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("%s(%v) message %q; want it to contain %q", capability, args, e.Message, w)
		}
	}
}

// refused calls a capability that the gate must refuse at step, before the
// plugin runs it.
func refused(t *testing.T, c *sdktest.Client, capability string, pr sdk.Principal, args any, step sdk.Step) {
	t.Helper()
	raw, err := c.Invoke(context.Background(), capability, pr, args)
	if got := sdk.RefusedAt(err); got != step {
		t.Fatalf("%s(%v) as %+v = %s, %v (refused at %q); want a refusal at %s", capability, args, pr, raw, err, got, step)
	}
}

func list(t *testing.T, c *sdktest.Client, pr sdk.Principal, args any) []subscription.Subscription {
	t.Helper()
	return sdktest.Call[subscription.ListOut](t, c, "subscription.list", pr, args).Subscriptions
}

func subscribe(t *testing.T, c *sdktest.Client, pr sdk.Principal, plan string) subscription.Subscription {
	t.Helper()
	return sdktest.Call[subscription.Subscription](t, c, "subscription.subscribe", pr, subscription.SubscribeIn{PlanID: plan})
}

func cancel(t *testing.T, c *sdktest.Client, pr sdk.Principal, in subscription.CancelIn) subscription.CancelOut {
	t.Helper()
	return sdktest.Call[subscription.CancelOut](t, c, "subscription.cancel", pr, in)
}

func TestDescribe(t *testing.T) {
	d, err := start(t, nil).Describe(context.Background())
	if err != nil {
		t.Fatalf("Describe: %v", err)
	}
	if es := d.GetEntities(); len(es) != 1 || es[0].GetName() != subscription.EntityPlan ||
		es[0].GetVersion() != subscription.PlanDocVersion || !strings.Contains(es[0].GetDescription(), "plan") {
		t.Errorf("entities = %v; want only subscription.plan at version %q (never subscriptions, which are personal)", es, subscription.PlanDocVersion)
	}
	tests := []struct {
		name        string
		kind        capgatev1.Kind
		permission  string
		owner       bool
		destructive bool
		required    []string
	}{
		{"subscription.plans", capgatev1.Kind_KIND_READ, "catalogue.read", false, false, nil},
		{"subscription.list", capgatev1.Kind_KIND_READ, "subscription.read", false, false, nil},
		{"subscription.get", capgatev1.Kind_KIND_READ, "subscription.read", true, false, []string{"id"}},
		{"subscription.subscribe", capgatev1.Kind_KIND_ACTION, "subscription.write", false, false, []string{"plan_id"}},
		{"subscription.cancel", capgatev1.Kind_KIND_ACTION, "subscription.write", true, true, []string{"id"}},
	}
	if len(d.GetCapabilities()) != len(tests) {
		t.Fatalf("plugin describes %d capabilities; want %d", len(d.GetCapabilities()), len(tests))
	}
	byName := map[string]*capgatev1.Capability{}
	for _, cp := range d.GetCapabilities() {
		byName[cp.GetName()] = cp
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cp := byName[tc.name]
			if cp == nil {
				t.Fatalf("%s is not described", tc.name)
			}
			if cp.GetPack() != "subscription" || cp.GetKind() != tc.kind || cp.GetPermission() != tc.permission ||
				cp.GetOwnerGuarded() != tc.owner || cp.GetDestructive() != tc.destructive || cp.GetDescription() == "" {
				t.Fatalf("%s described as %v", tc.name, cp)
			}
			var schema struct {
				Type     string   `json:"type"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(cp.GetInputSchema(), &schema); err != nil {
				t.Fatalf("input schema: %v", err)
			}
			if schema.Type != "object" || fmt.Sprint(schema.Required) != fmt.Sprint(tc.required) {
				t.Fatalf("input schema type %q requires %v; want object requiring %v", schema.Type, schema.Required, tc.required)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	fileDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(fileDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbageDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbageDir, subscription.DBFile), []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		config  any
		dir     string
		wantErr string
	}{
		{"no config block", nil, "", ""},
		{"empty seed", map[string]any{"seed": ""}, "", ""},
		{"demo seed", demo, "", ""},
		{"unknown seed", map[string]any{"seed": "prod"}, "", `seed "prod" is unknown`},
		{"unknown key", map[string]any{"seed": "demo", "dns": "postgres://x"}, "", `"dns"`},
		{"dsn of another engine", map[string]any{"dsn": "mysql://u:s3cret@db/subscription"}, "", "dsn must be a postgres:// or postgresql:// URL"},
		{"dsn in key=value form", map[string]any{"dsn": "host=db password=s3cret"}, "", "left out for SQLite"},
		// sdk.Configure decodes the block, naming the option.
		{"dsn of the wrong type", map[string]any{"dsn": 5}, "", "subscription config: json: cannot unmarshal number into Go struct field Config.dsn"},
		{"postgres unreachable", map[string]any{"dsn": "postgres://u:s3cret@127.0.0.1:1/subscription?connect_timeout=2"}, "",
			"subscription config: dsn postgres://u:xxxxx@127.0.0.1:1/subscription"},
		{"postgresql URL unparsable", map[string]any{"dsn": "postgresql://u:s3cret@127.0.0.1:port/subscription"}, "",
			"subscription config: dsn postgresql://(unparsable URL)"},
		{"seed of the wrong type", map[string]any{"seed": 5}, "", "subscription config: json: cannot unmarshal number into Go struct field Config.seed"},
		{"data dir is a file", nil, fileDir, "not a directory"},
		{"data dir missing", nil, filepath.Join(t.TempDir(), "gone"), "data directory"},
		{"database file is not a database", nil, garbageDir, subscription.DBFile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = t.TempDir()
			}
			_, err := sdktest.StartIn(t, newPlugin(now), tc.config, dir)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("configure: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("configure error = %v; want it to contain %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("configure error = %v; it shows the password", err)
			}
		})
	}
}

// TestPostgresDSN: a postgres:// and a postgresql:// dsn both select
// PostgreSQL, whatever the data directory holds: a garbage SQLite file
// there is never opened.
func TestPostgresDSN(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	garbageDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbageDir, subscription.DBFile), []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startIn(t, garbageDir, now, map[string]any{"seed": "demo", "dsn": dsn})
	sub := subscribe(t, first, carol, "pro-yearly")
	alt := "postgresql://" + strings.TrimPrefix(dsn, "postgres://")
	second := startIn(t, t.TempDir(), now, map[string]any{"seed": "demo", "dsn": alt})
	if got := list(t, second, carol, nil); len(got) != 1 || got[0] != sub {
		t.Fatalf("through %s carol has %+v; want %+v, written through postgres://", "postgresql://", got, sub)
	}
}

// TestPostgresReplicas runs the plugin on PostgreSQL (dsn) as two replicas
// starting together on one database: both migrate and seed it, the demo
// data lands once, and each replica sees and is refused by what the other
// writes.
func TestPostgresReplicas(t *testing.T) {
	config := map[string]any{"seed": "demo", "dsn": pgtest.SchemaDSN(t)}
	var replicas [2]*sdktest.Client
	var errs [2]error
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replicas[i], errs[i] = sdktest.StartIn(t, newPlugin(now), config, t.TempDir())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: configure: %v", i, err)
		}
	}
	onSQLite := start(t, demo)
	wantPlans := sdktest.Call[subscription.PlansOut](t, onSQLite, "subscription.plans", alice, nil).Plans
	for i, c := range replicas {
		plans := sdktest.Call[subscription.PlansOut](t, c, "subscription.plans", alice, nil).Plans
		if fmt.Sprint(plans) != fmt.Sprint(wantPlans) {
			t.Fatalf("replica %d lists %d plans; want the %d of the demo seed, once, as on SQLite", i, len(plans), len(wantPlans))
		}
		got, other := list(t, c, alice, nil), list(t, replicas[1-i], alice, nil)
		if len(got) != 1 || fmt.Sprint(got) != fmt.Sprint(other) {
			t.Fatalf("replica %d: alice's subscriptions %+v; the other replica lists %+v; want her one seeded subscription", i, got, other)
		}
		want := list(t, onSQLite, alice, nil)
		got[0].ID, want[0].ID = "", ""
		if got[0] != want[0] {
			t.Fatalf("replica %d: alice's subscription %+v; want %+v as on SQLite", i, got[0], want[0])
		}
	}
	sub := subscribe(t, replicas[0], carol, "pro-yearly")
	fail(t, replicas[1], "subscription.subscribe", carol, subscription.SubscribeIn{PlanID: "pro-yearly"}, conflict, sub.ID)
	out := cancel(t, replicas[1], carol, subscription.CancelIn{ID: sub.ID, AtPeriodEnd: &no})
	if got := sdktest.Call[subscription.Subscription](t, replicas[0], "subscription.get", carol, subscription.IDIn{ID: sub.ID}); got.Status != "cancelled" {
		t.Fatalf("replica 0 shows %+v after replica 1 cancelled it (%+v); want cancelled", got, out)
	}
}

func TestDemoSeed(t *testing.T) {
	c := start(t, demo)
	plans := sdktest.Call[subscription.PlansOut](t, c, "subscription.plans", unbound, nil).Plans
	if len(plans) < 4 || len(plans) > 6 {
		t.Fatalf("the demo has %d plans; want 4 to 6", len(plans))
	}
	periods := map[string]bool{}
	var text strings.Builder
	for i, p := range plans {
		if p.ID == "" || p.Name == "" || p.Description == "" || p.PriceCents <= 0 || p.Currency != "EUR" {
			t.Errorf("plan %+v is not fully described", p)
		}
		if i > 0 && plans[i-1].ID >= p.ID {
			t.Errorf("plans not in id order: %s before %s", plans[i-1].ID, p.ID)
		}
		periods[p.Period] = true
		text.WriteString(strings.ToLower(p.Name + " " + p.Description + " "))
	}
	if !periods["month"] || !periods["year"] || len(periods) != 2 {
		t.Errorf("periods %v; want month and year plans", periods)
	}
	for _, q := range []string{"student", "family", "offline", "4k", "storage", "ad-free"} {
		if !strings.Contains(text.String(), q) {
			t.Errorf("no demo plan mentions %q", q)
		}
	}
	tests := []struct {
		user  sdk.Principal
		plans []string
	}{
		{alice, []string{"plus-monthly"}},
		{bob, []string{"basic-monthly"}},
		{carol, nil},
	}
	for _, tc := range tests {
		t.Run(tc.user.UserID, func(t *testing.T) {
			var got []string
			for _, s := range list(t, c, tc.user, nil) {
				got = append(got, s.PlanID)
				if !idPattern.MatchString(s.ID) || s.Status != "active" || s.StartedAt != seededStart || s.CurrentPeriodEnd != seededEnd || s.CancelAt != "" {
					t.Errorf("seeded subscription %+v", s)
				}
				// Its owner is the user it was seeded for: she may read
				// it, and anyone else is refused at the ownership step.
				if got := sdktest.Call[subscription.Subscription](t, c, "subscription.get", tc.user, subscription.IDIn{ID: s.ID}); got != s {
					t.Errorf("%s gets %+v; want her listed %+v", tc.user.UserID, got, s)
				}
				refused(t, c, "subscription.get", carol, subscription.IDIn{ID: s.ID}, sdk.StepOwnership)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.plans) {
				t.Fatalf("subscriptions to %v; want %v", got, tc.plans)
			}
		})
	}
}

// TestSeedOnlyOnFirstStart restarts the plugin on the same data: the seed
// does not come back, what happened since is kept.
func TestSeedOnlyOnFirstStart(t *testing.T) {
	dir := t.TempDir()
	first := startIn(t, dir, now, demo)
	seeded := list(t, first, alice, nil)
	cancel(t, first, alice, subscription.CancelIn{ID: seeded[0].ID, AtPeriodEnd: &no})

	second := startIn(t, dir, now.Add(time.Hour), demo)
	again := list(t, second, alice, nil)
	if len(again) != 1 || again[0].ID != seeded[0].ID || again[0].Status != "cancelled" {
		t.Fatalf("after restart alice has %+v; want her one seeded subscription, cancelled", again)
	}
	if plans := sdktest.Call[subscription.PlansOut](t, second, "subscription.plans", alice, nil).Plans; len(plans) != 6 {
		t.Fatalf("after restart %d plans; want the 6 seeded once", len(plans))
	}
	if len(second.Published()) != 0 {
		t.Errorf("second start published %+v; want nothing", second.Published())
	}
}

func TestPlansUnseeded(t *testing.T) {
	raw, err := start(t, nil).Invoke(context.Background(), "subscription.plans", unbound, nil)
	if err != nil || string(raw) != `{"plans":[]}` {
		t.Fatalf("unseeded plans = %s, %v; want an empty array, not null", raw, err)
	}
}

func TestSubscribe(t *testing.T) {
	c := start(t, demo)
	got := subscribe(t, c, carol, "pro-yearly")
	want := subscription.Subscription{ID: got.ID, PlanID: "pro-yearly", Status: "active", StartedAt: "2030-01-07T09:30:00Z", CurrentPeriodEnd: "2031-01-07T09:30:00Z"}
	if !idPattern.MatchString(got.ID) || got != want {
		t.Fatalf("subscribe = %+v; want %+v", got, want)
	}
	if stored := sdktest.Call[subscription.Subscription](t, c, "subscription.get", carol, subscription.IDIn{ID: got.ID}); stored != want {
		t.Fatalf("get = %+v; want %+v", stored, want)
	}
	// The subscription is carol's: anyone else is refused its cancel.
	refused(t, c, "subscription.cancel", bob, subscription.CancelIn{ID: got.ID}, sdk.StepOwnership)
	// Another plan is fine; the same plan for another user too.
	subscribe(t, c, carol, "plus-monthly")
	subscribe(t, c, bob, "pro-yearly")
	if n := len(list(t, c, carol, nil)); n != 2 {
		t.Fatalf("carol has %d subscriptions; want 2", n)
	}
}

func TestSubscribeErrors(t *testing.T) {
	c := start(t, demo)
	existing := list(t, c, alice, nil)[0] // plus-monthly
	tests := []struct {
		name string
		pr   sdk.Principal
		in   any
		code sdk.ErrorCode
		want []string
	}{
		{"no plan", alice, subscription.SubscribeIn{}, invalid, []string{"plan_id is required", "subscription.plans"}},
		{"unknown plan", alice, subscription.SubscribeIn{PlanID: "gold"}, notFound, []string{`no plan with id "gold"`}},
		// The gate refuses a plan id longer than the schema allows,
		// naming the field, before the plugin runs.
		{"long unknown plan", alice, subscription.SubscribeIn{PlanID: strings.Repeat("x", 500)}, invalid, []string{"plan_id", "more than 63"}},
		{"held already", alice, subscription.SubscribeIn{PlanID: "plus-monthly"}, conflict, []string{"already have an active subscription to plus-monthly", existing.ID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail(t, c, "subscription.subscribe", tc.pr, tc.in, tc.code, tc.want...)
		})
	}
	// An unbound token acts for nobody: the gate refuses it an action.
	refused(t, c, "subscription.subscribe", unbound, subscription.SubscribeIn{PlanID: "plus-monthly"}, sdk.StepUserBinding)
	if n := len(list(t, c, alice, nil)); n != 1 {
		t.Fatalf("refused subscribes left alice with %d subscriptions; want 1", n)
	}
}

// TestResubscribe: the plan is held while a subscription runs, also one
// set to end, and free once it has ended.
func TestResubscribe(t *testing.T) {
	dir := t.TempDir()
	c := startIn(t, dir, now, demo)
	first := list(t, c, alice, nil)[0]
	cancel(t, c, alice, subscription.CancelIn{ID: first.ID})
	fail(t, c, "subscription.subscribe", alice, subscription.SubscribeIn{PlanID: "plus-monthly"}, conflict, first.ID)

	later := startIn(t, dir, time.Date(2030, 1, 28, 9, 30, 0, 0, time.UTC), nil)
	second := subscribe(t, later, alice, "plus-monthly")
	got := list(t, later, alice, nil)
	if len(got) != 2 || got[0].ID != first.ID || got[0].Status != "cancelled" || got[1].ID != second.ID || got[1].Status != "active" {
		t.Fatalf("after the period end alice has %+v; want the ended one kept and the new one active", got)
	}
}

func TestConcurrentSubscribes(t *testing.T) {
	c := start(t, demo)
	const n = 20
	type result struct {
		raw json.RawMessage
		err error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			raw, err := c.Invoke(context.Background(), "subscription.subscribe", carol, subscription.SubscribeIn{PlanID: "pro-monthly"})
			results[i] = result{raw, err}
		}()
	}
	close(ready)
	wg.Wait()
	var winner subscription.Subscription
	var won, lost int
	for i, r := range results {
		switch {
		case r.err == nil:
			won++
			if err := json.Unmarshal(r.raw, &winner); err != nil {
				t.Fatal(err)
			}
		case sdk.CodeOf(r.err) == conflict:
			lost++
		default:
			t.Fatalf("racer %d: %v", i, r.err)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d concurrent subscribes: %d won, %d conflicts; want 1 and %d", n, won, lost, n-1)
	}
	for i, r := range results {
		if r.err != nil && !strings.Contains(r.err.Error(), winner.ID) {
			t.Errorf("racer %d conflict %q does not name the winner %s", i, r.err, winner.ID)
		}
	}
	if got := list(t, c, carol, subscription.ListIn{Status: "active"}); len(got) != 1 || got[0].ID != winner.ID {
		t.Fatalf("carol's active subscriptions = %+v; want only %s", got, winner.ID)
	}
}

func TestGetAndOwnerErrors(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name string
		id   string
		code sdk.ErrorCode
		want string
	}{
		{"unknown id", "sub_aaaaaaaaaaaa", notFound, `no subscription with id "sub_aaaaaaaaaaaa"`},
		{"malformed id", "42", notFound, "subscription ids look like sub_"},
		{"upper-case id", "SUB_AAAAAAAAAAAA", notFound, "no subscription with id"},
		{"empty id", "", invalid, "id is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The ownership step (Owner, CancelOwner) answers first, in
			// the same call: its error is the caller's, and an admin, whom
			// no owner is asked about, gets the same answer from the
			// handler.
			for _, pr := range []sdk.Principal{alice, operator} {
				fail(t, c, "subscription.get", pr, subscription.IDIn{ID: tc.id}, tc.code, tc.want)
				fail(t, c, "subscription.cancel", pr, subscription.CancelIn{ID: tc.id}, tc.code, tc.want)
			}
		})
	}
}

func TestList(t *testing.T) {
	c := start(t, demo)
	seeded := list(t, c, alice, nil)[0]
	student := subscribe(t, c, alice, "student-monthly")
	cancel(t, c, alice, subscription.CancelIn{ID: student.ID, AtPeriodEnd: &no})
	tests := []struct {
		name string
		pr   sdk.Principal
		in   subscription.ListIn
		want []string
	}{
		{"all, by start", alice, subscription.ListIn{}, []string{seeded.ID, student.ID}},
		{"active", alice, subscription.ListIn{Status: "active"}, []string{seeded.ID}},
		{"cancelled", alice, subscription.ListIn{Status: "cancelled"}, []string{student.ID}},
		{"a read-only token of alice", sdk.Principal{Role: "customer", Scope: "read", UserID: "alice"}, subscription.ListIn{}, []string{seeded.ID, student.ID}},
		{"someone with none", carol, subscription.ListIn{}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{}
			for _, s := range list(t, c, tc.pr, tc.in) {
				got = append(got, s.ID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("list = %v; want %v", got, tc.want)
			}
		})
	}
	raw, err := c.Invoke(context.Background(), "subscription.list", carol, nil)
	if err != nil || string(raw) != `{"subscriptions":[]}` {
		t.Fatalf("empty list = %s, %v; want an empty array, not null", raw, err)
	}
	// A running subscription carries no cancel_at at all, not an empty one.
	raw, _ = c.Invoke(context.Background(), "subscription.get", alice, subscription.IDIn{ID: seeded.ID})
	if strings.Contains(string(raw), "cancel_at") {
		t.Fatalf("running subscription = %s; want no cancel_at", raw)
	}
}

func TestListErrors(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		name string
		pr   sdk.Principal
		in   subscription.ListIn
		want string
	}{
		{"unbound token", unbound, subscription.ListIn{}, "this token is not bound to a user"},
		{"unknown status", alice, subscription.ListIn{Status: "paused"}, `status must be "active" or "cancelled", got "paused"`},
		{"status in capitals", alice, subscription.ListIn{Status: "ACTIVE"}, `got "ACTIVE"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fail(t, c, "subscription.list", tc.pr, tc.in, invalid, tc.want)
		})
	}
}

// TestRenewal: a running subscription moves into its next period when the
// last one ends; the stored record is not rewritten for it.
func TestRenewal(t *testing.T) {
	dir := t.TempDir()
	id := list(t, startIn(t, dir, now, demo), alice, nil)[0].ID
	tests := []struct {
		at   time.Time
		want string
	}{
		{time.Date(2030, 1, 28, 9, 29, 59, 0, time.UTC), "2030-01-28T09:30:00Z"},
		{time.Date(2030, 1, 28, 9, 30, 0, 0, time.UTC), "2030-02-28T09:30:00Z"},
		{time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC), "2030-03-28T09:30:00Z"},
		{time.Date(2031, 6, 1, 0, 0, 0, 0, time.UTC), "2031-06-28T09:30:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.at.Format(time.RFC3339), func(t *testing.T) {
			got := sdktest.Call[subscription.Subscription](t, startIn(t, dir, tc.at, nil), "subscription.get", alice, subscription.IDIn{ID: id})
			if got.Status != "active" || got.CurrentPeriodEnd != tc.want || got.StartedAt != seededStart {
				t.Fatalf("at %s: %+v; want active, period ending %s", tc.at, got, tc.want)
			}
		})
	}
}

func TestCancelAtPeriodEnd(t *testing.T) {
	dir := t.TempDir()
	c := startIn(t, dir, now, demo)
	target := list(t, c, alice, nil)[0]
	for name, in := range map[string]subscription.CancelIn{
		"default":            {ID: target.ID},
		"at_period_end true": {ID: target.ID, AtPeriodEnd: &yes},
	} {
		t.Run(name, func(t *testing.T) {
			c := startIn(t, t.TempDir(), now, demo)
			target := list(t, c, alice, nil)[0]
			in.ID = target.ID
			first := cancel(t, c, alice, in)
			want := subscription.CancelOut{
				ID: target.ID, PlanID: "plus-monthly", Status: "active", StartedAt: seededStart,
				CurrentPeriodEnd: seededEnd, CancelAt: seededEnd, Message: first.Message,
			}
			if first != want || !strings.Contains(first.Message, "stays active until then") {
				t.Fatalf("first cancel = %+v; want %+v", first, want)
			}
			second := cancel(t, c, alice, in)
			want.AlreadyCancelled, want.Message = true, second.Message
			if second != want || !strings.Contains(second.Message, "already cancelled") || !strings.Contains(second.Message, seededEnd) {
				t.Fatalf("second cancel = %+v; want already_cancelled, unchanged", second)
			}
		})
	}

	cancel(t, c, alice, subscription.CancelIn{ID: target.ID})
	tests := []struct {
		at     time.Time
		status string
	}{
		{time.Date(2030, 1, 28, 9, 29, 59, 0, time.UTC), "active"},
		{time.Date(2030, 1, 28, 9, 30, 0, 0, time.UTC), "cancelled"},
		{time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC), "cancelled"},
	}
	for _, tc := range tests {
		t.Run(tc.at.Format(time.RFC3339), func(t *testing.T) {
			later := startIn(t, dir, tc.at, nil)
			got := sdktest.Call[subscription.Subscription](t, later, "subscription.get", alice, subscription.IDIn{ID: target.ID})
			if got.Status != tc.status || got.CancelAt != seededEnd || got.CurrentPeriodEnd != seededEnd {
				t.Fatalf("at %s: %+v; want %s, ending %s", tc.at, got, tc.status, seededEnd)
			}
		})
	}
	// Once it has ended, even an immediate cancel changes nothing.
	ended := startIn(t, dir, time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC), nil)
	if out := cancel(t, ended, alice, subscription.CancelIn{ID: target.ID, AtPeriodEnd: &no}); !out.AlreadyCancelled || out.CancelAt != seededEnd || out.Status != "cancelled" {
		t.Fatalf("immediate cancel after the end = %+v; want already_cancelled, ended at %s", out, seededEnd)
	}
}

func TestCancelImmediately(t *testing.T) {
	c := start(t, demo)
	target := list(t, c, bob, nil)[0]
	first := cancel(t, c, bob, subscription.CancelIn{ID: target.ID, AtPeriodEnd: &no})
	want := subscription.CancelOut{
		ID: target.ID, PlanID: "basic-monthly", Status: "cancelled", StartedAt: seededStart,
		CurrentPeriodEnd: seededEnd, CancelAt: "2030-01-07T09:30:00Z", Message: first.Message,
	}
	if first != want || !strings.Contains(first.Message, "is cancelled as of 2030-01-07T09:30:00Z") {
		t.Fatalf("immediate cancel = %+v; want %+v", first, want)
	}
	for _, in := range []subscription.CancelIn{{ID: target.ID, AtPeriodEnd: &no}, {ID: target.ID}} {
		again := cancel(t, c, bob, in)
		want.AlreadyCancelled, want.Message = true, again.Message
		if again != want || !strings.Contains(again.Message, "nothing changed") {
			t.Fatalf("cancel %+v again = %+v; want already_cancelled with the first cancel's time", in, again)
		}
	}
	if got := sdktest.Call[subscription.Subscription](t, c, "subscription.get", bob, subscription.IDIn{ID: target.ID}); got.Status != "cancelled" || got.CancelAt != want.CancelAt {
		t.Fatalf("get after cancel = %+v; want it kept, cancelled", got)
	}
	// The plan is free again at once.
	subscribe(t, c, bob, "basic-monthly")
}

// TestCancelScheduledNow: a subscription set to end at its period end can
// still be ended now; that is a change, reported once.
func TestCancelScheduledNow(t *testing.T) {
	c := start(t, demo)
	target := list(t, c, alice, nil)[0]
	cancel(t, c, alice, subscription.CancelIn{ID: target.ID})
	now := cancel(t, c, alice, subscription.CancelIn{ID: target.ID, AtPeriodEnd: &no})
	if now.AlreadyCancelled || now.Status != "cancelled" || now.CancelAt != "2030-01-07T09:30:00Z" || now.CurrentPeriodEnd != seededEnd {
		t.Fatalf("ending a scheduled subscription now = %+v", now)
	}
	if again := cancel(t, c, alice, subscription.CancelIn{ID: target.ID, AtPeriodEnd: &no}); !again.AlreadyCancelled {
		t.Fatalf("again = %+v; want already_cancelled", again)
	}
}

func TestConcurrentCancels(t *testing.T) {
	for _, atPeriodEnd := range []bool{true, false} {
		t.Run(fmt.Sprintf("at_period_end=%v", atPeriodEnd), func(t *testing.T) {
			c := start(t, demo)
			target := list(t, c, bob, nil)[0]
			const n = 20
			outs := make([]subscription.CancelOut, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			ready := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-ready
					raw, err := c.Invoke(context.Background(), "subscription.cancel", bob, subscription.CancelIn{ID: target.ID, AtPeriodEnd: &atPeriodEnd})
					if err == nil {
						err = json.Unmarshal(raw, &outs[i])
					}
					errs[i] = err
				}()
			}
			close(ready)
			wg.Wait()
			wantStatus, wantAt := "cancelled", "2030-01-07T09:30:00Z"
			if atPeriodEnd {
				wantStatus, wantAt = "active", seededEnd
			}
			var changed int
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("cancel %d: %v", i, errs[i])
				}
				if !outs[i].AlreadyCancelled {
					changed++
				}
				if outs[i].Status != wantStatus || outs[i].CancelAt != wantAt {
					t.Fatalf("cancel %d = %+v; want %s with cancel_at %s", i, outs[i], wantStatus, wantAt)
				}
			}
			if changed != 1 {
				t.Fatalf("%d concurrent cancels: %d report the change; want exactly 1, the rest already_cancelled", n, changed)
			}
			var events int
			for _, ev := range c.Published() {
				if ev.Type == "subscription.cancelled" {
					events++
				}
			}
			if events != 1 {
				t.Fatalf("%d subscription.cancelled events; want 1", events)
			}
		})
	}
}

// TestMalformedArguments sends what an agent might send: every answer,
// the gate's or the plugin's, is an invalid-input or not-found error the
// agent can act on, never a crash, a refusal or an internal failure.
func TestMalformedArguments(t *testing.T) {
	c := start(t, demo)
	tests := []struct {
		capability string
		args       string
	}{
		{"subscription.subscribe", `{"plan_id": 7}`},
		{"subscription.subscribe", `{"plan_id": "plus-monthly"`},
		{"subscription.subscribe", `[]`},
		{"subscription.subscribe", `{"plan_id": "\u0000"}`},
		{"subscription.cancel", `{"id": "sub_aaaaaaaaaaaa", "at_period_end": "no"}`},
		{"subscription.cancel", `{"id": null, "at_period_end": null}`},
		{"subscription.list", `{"status": 1}`},
		{"subscription.get", `{"id": ["sub_aaaaaaaaaaaa"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.capability+" "+tc.args, func(t *testing.T) {
			raw, err := c.Invoke(context.Background(), tc.capability, alice, json.RawMessage(tc.args))
			if code := sdk.CodeOf(err); code != invalid && code != notFound {
				t.Fatalf("got %s, %v; want an invalid-input or not-found error", raw, err)
			}
		})
	}
}
