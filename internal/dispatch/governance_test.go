package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]dispatch.Rate{
		"10/s": {Count: 10, Per: time.Second}, " 5 / m ": {Count: 5, Per: time.Minute}, "100/h": {Count: 100, Per: time.Hour},
	} {
		if got, err := dispatch.ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"10": "want <count>/<s|m|h>", "0/s": "from 1 to 1000000", "-1/s": "from 1 to 1000000", "ten/s": "whole number",
		"10/d": "unit must be s, m or h", "10/": "unit", "2000000/s": "from 1 to 1000000",
	} {
		if _, err := dispatch.ParseRate(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseRate(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

// TestKillSwitch: with actions off every action is refused at kill_switch
// and hidden, for every role and scope (admin too), while reads carry on;
// turning them back on needs no restart.
func TestKillSwitch(t *testing.T) {
	policy := deskPolicy()
	policy.ActionsOff = true
	d, dk := newGate(t, policy)
	for _, p := range []dispatch.Principal{aliceAction, operator} {
		_, err := d.Invoke(context.Background(), p, capBook, json.RawMessage(`{"slot":"x"}`))
		refusalAt(t, err, dispatch.StepKillSwitch, capBook)
		for _, e := range d.Visible(p) {
			if e.Kind == 2 {
				t.Errorf("%s lists the action %s with actions off", p.Role, e.Name)
			}
		}
	}
	untouched(t, dk)
	if _, err := d.Invoke(context.Background(), aliceRead, capGet, json.RawMessage(`{"id":"b-1"}`)); err != nil {
		t.Fatalf("a read with actions off: %v", err)
	}
	policy.ActionsOff = false
	if err := d.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Invoke(context.Background(), aliceAction, capBook, json.RawMessage(`{"slot":"x"}`)); err != nil {
		t.Fatalf("an action after actions were turned back on: %v", err)
	}
}

// TestDisabledCapability: a switched-off capability is refused to everyone
// as if it did not exist (the trail records kill_switch, before the pack),
// and listed to no one; the others stay.
func TestDisabledCapability(t *testing.T) {
	policy := deskPolicy()
	policy.DisabledCapabilities = []string{capGet}
	policy.Packs["booking"] = false // the switch is decided first
	d, dk := newGate(t, policy)
	_, err := d.Invoke(context.Background(), operator, capGet, json.RawMessage(`{"id":"b-1"}`))
	answeredUnknown(t, err, capGet)
	untouched(t, dk)
	for _, e := range d.Visible(operator) {
		if e.Name == capGet {
			t.Errorf("Visible lists the disabled %s", capGet)
		}
	}
	if _, err := d.Invoke(context.Background(), operator, capPing, nil); err != nil {
		t.Errorf("another capability: %v", err)
	}
}

// failingLimiter is a counter whose store is down.
type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, dispatch.LimitKey, dispatch.Rate) (bool, time.Duration, error) {
	return false, 0, errors.New("dial tcp 127.0.0.1:6379: connection refused")
}

// TestRateLimitStep: limits apply per token, to refused calls too (a
// refusal costs the caller its share, so it cannot flood for free), and
// before the arguments are read (a call with bad arguments still counts); a capability's own rate beats
// its role's, which beats the default; the per-token rate spans
// capabilities; a counter that is down refuses without saying why.
func TestRateLimitStep(t *testing.T) {
	ctx := context.Background()
	policy := deskPolicy()
	policy.Limits = dispatch.Limits{
		Default:      dispatch.Rate{Count: 2, Per: time.Hour},
		Roles:        map[string]dispatch.Rate{"viewer": {Count: 1, Per: time.Hour}},
		Capabilities: map[string]dispatch.Rate{capPing: {Count: 3, Per: time.Hour}},
		PerToken:     dispatch.Rate{Count: 5, Per: time.Hour},
	}
	d, _ := newGate(t, policy)
	d.UseLimiter(ratelimit.NewMemory())
	tok := func(p dispatch.Principal, name string) dispatch.Principal { p.Token = name; return p }
	call := func(p dispatch.Principal, capability, args string) error {
		_, err := d.Invoke(ctx, p, capability, json.RawMessage(args))
		return err
	}

	// Permission refusals are counted: the partner role lacks
	// booking.read, and its third call meets the default of two.
	partner := dispatch.Principal{Role: "partner", Scope: dispatch.ScopeRead, Token: "p"}
	for range 2 {
		refusalAt(t, call(partner, capGet, `{"id":"b-1"}`), dispatch.StepPermission, capGet)
	}
	refusalAt(t, call(partner, capGet, `{"id":"b-1"}`), dispatch.StepRateLimit, capGet)
	// Default: two calls to booking.list per token, bad arguments included.
	a := tok(aliceRead, "a")
	if err := call(a, capList, `{"limit":"x"}`); err == nil || errors.As(err, new(*dispatch.Refusal)) {
		t.Fatalf("bad arguments within the limit: %v, want an argument error", err)
	}
	if err := call(a, capList, `{}`); err != nil {
		t.Fatal(err)
	}
	err := call(a, capList, `{}`)
	refusalAt(t, err, dispatch.StepRateLimit, capList)
	var r *dispatch.Refusal
	errors.As(err, &r)
	if r.RetryAfter < 29*time.Minute || r.RetryAfter > 30*time.Minute || !strings.Contains(r.Reason, "2/h") || !strings.Contains(r.Reason, "retry in 30m0s") {
		t.Errorf("refusal %+v: want a retry of about 30 minutes and the rate named", r)
	}
	// Another token of the same user is counted apart.
	if err := call(tok(aliceRead, "a2"), capList, `{}`); err != nil {
		t.Errorf("another token: %v", err)
	}
	// The capability's own rate (3) beats the default (2).
	for i := range 3 {
		if err := call(a, capPing, `{}`); err != nil {
			t.Fatalf("ping %d: %v", i+1, err)
		}
	}
	// The token's overall rate (5) now refuses even a capability it has
	// not called: 3 pings and 2 lists so far.
	refusalAt(t, call(a, capGet, `{"id":"b-1"}`), dispatch.StepRateLimit, capGet)
	// A role's rate (1) beats the default.
	v := dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeRead, UserID: alice, Token: "v"}
	if err := call(v, capGet, `{"id":"b-1"}`); err != nil {
		t.Fatal(err)
	}
	refusalAt(t, call(v, capGet, `{"id":"b-1"}`), dispatch.StepRateLimit, capGet)

	// A counter that is down refuses, without its error reaching the agent.
	d.UseLimiter(failingLimiter{})
	err = call(tok(aliceRead, "fresh"), capList, `{}`)
	refusalAt(t, err, dispatch.StepRateLimit, capList)
	if errors.As(err, &r); strings.Contains(r.Reason, "6379") || r.RetryAfter != 0 {
		t.Errorf("refusal %+v leaks the counter's error or promises a retry time", r)
	}
}

// TestSetPolicyRefusesInvalidLimits: a policy with a broken rate is
// refused whole and the running one stays.
func TestSetPolicyRefusesInvalidLimits(t *testing.T) {
	d, _ := newGate(t, deskPolicy())
	bad := deskPolicy()
	bad.Packs = map[string]bool{}
	bad.Limits.Capabilities = map[string]dispatch.Rate{capList: {Count: 1}}
	if err := d.SetPolicy(bad); err == nil || !strings.Contains(err.Error(), "limits.capabilities."+capList) {
		t.Fatalf("SetPolicy = %v, want an error naming the rate", err)
	}
	if _, err := d.Invoke(context.Background(), aliceRead, capList, nil); err != nil {
		t.Errorf("the old policy was not kept: %v", err)
	}
	if _, err := dispatch.New(deskRegistry(t), bad, map[string]dispatch.Provider{"desk": newDesk()}); err == nil {
		t.Error("New accepted the broken rate")
	}
}

// TestSetPolicyIsAtomic: each call is decided under one policy whole.
// Under policy A the pack is off and the role holds the permission; under
// B the pack is on and the role holds nothing. A call decided under a mix
// of the two would succeed, and none may while the policies flip.
func TestSetPolicyIsAtomic(t *testing.T) {
	a := deskPolicy()
	a.Packs = map[string]bool{"booking": false}
	b := deskPolicy()
	b.Roles = map[string][]string{}
	d, _ := newGate(t, a)
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		mixed atomic.Int64
		calls atomic.Int64
		sawA  atomic.Bool // refused at the pack, as unknown: policy A
		sawB  atomic.Bool // refused at the permission: policy B
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				_, err := d.Invoke(context.Background(), aliceRead, capList, nil)
				calls.Add(1)
				var r *dispatch.Refusal
				switch {
				case errors.Is(err, dispatch.ErrUnknownCapability):
					sawA.Store(true) // the pack is off: an unknown name
				case !errors.As(err, &r):
					mixed.Add(1)
				case r.Step == dispatch.StepPermission:
					sawB.Store(true)
				}
			}
		}()
	}
	// Flip until the callers have seen both policies many times over; on
	// a loaded machine they may start late, so the bound is generous.
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; !(sawA.Load() && sawB.Load() && calls.Load() > 5000) && time.Now().Before(deadline); i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		if err := d.SetPolicy(p); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := mixed.Load(); n != 0 {
		t.Errorf("%d calls were decided under a mix of two policies", n)
	}
	if !sawA.Load() || !sawB.Load() {
		t.Errorf("the callers saw policy A: %v, policy B: %v, in %d calls", sawA.Load(), sawB.Load(), calls.Load())
	}
}

// TestInFlightCallKeepsItsPolicy: a call that passed the gate finishes
// under the policy it started with, even when the kill switch is thrown
// while the plugin runs it.
func TestInFlightCallKeepsItsPolicy(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	slow := providerFunc(func(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`{"id":"b-9","slot":"x"}`), nil
	})
	policy := deskPolicy()
	d, err := dispatch.New(deskRegistry(t), policy, map[string]dispatch.Provider{"desk": slow})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := d.Invoke(context.Background(), aliceAction, capBook, json.RawMessage(`{"slot":"x"}`))
		done <- err
	}()
	<-started
	policy.ActionsOff = true
	if err := d.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("the call in flight when actions were switched off: %v", err)
	}
	_, err = d.Invoke(context.Background(), aliceAction, capBook, json.RawMessage(`{"slot":"x"}`))
	refusalAt(t, err, dispatch.StepKillSwitch, capBook)
}

type providerFunc func(context.Context, dispatch.Request) (json.RawMessage, error)

func (f providerFunc) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	return f(ctx, r)
}
