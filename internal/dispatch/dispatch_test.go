package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// refusalAt fails the test unless err is a *Refusal at step for capability.
func refusalAt(t *testing.T, err error, step dispatch.Step, capability string) {
	t.Helper()
	var r *dispatch.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v (%T), want a *Refusal at %s", err, err, step)
	}
	if r.Step != step || r.Capability != capability {
		t.Fatalf("refused %s at %s (%s), want %s at %s", r.Capability, r.Step, r.Reason, capability, step)
	}
	if r.Reason == "" {
		t.Fatal("refusal has no reason")
	}
}

// answeredUnknown fails the test unless err answers exactly as a call to
// a name no plugin provides: ErrUnknownCapability, no *Refusal to find.
func answeredUnknown(t *testing.T, err error, capability string) {
	t.Helper()
	var r *dispatch.Refusal
	if !errors.Is(err, dispatch.ErrUnknownCapability) || errors.As(err, &r) {
		t.Fatalf("err = %v (%T), want the answer to an unknown name", err, err)
	}
	if want := fmt.Sprintf("%v %q", dispatch.ErrUnknownCapability, capability); err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}

// toolError fails the test unless err is a *ToolError with code.
func toolError(t *testing.T, err error, code dispatch.ToolErrorCode) *dispatch.ToolError {
	t.Helper()
	var te *dispatch.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v (%T), want a *ToolError", err, err)
	}
	if te.Code != code {
		t.Fatalf("tool error code = %d (%s), want %d", te.Code, te.Message, code)
	}
	return te
}

// untouched fails the test if the provider was asked anything at all.
func untouched(t *testing.T, dk *desk) {
	t.Helper()
	if r, i := dk.calls(); r != 0 || i != 0 {
		t.Fatalf("provider was called (ResolveOwner %d, Invoke %d times) after the gate said no", r, i)
	}
}

func TestPackStep(t *testing.T) {
	tests := []struct {
		name  string
		packs map[string]bool
		want  bool // admitted
	}{
		{"enabled", map[string]bool{"booking": true}, true},
		{"disabled", map[string]bool{"booking": false}, false},
		{"absent means disabled", map[string]bool{"status": true}, false},
		{"no packs at all", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := deskPolicy()
			policy.Packs = tt.packs
			d, dk := newGate(t, policy)
			// Alice on her own booking passes every other step, and an
			// operator bypasses ownership: neither gets past a closed pack.
			for _, c := range []struct {
				p  dispatch.Principal
				id string
			}{{aliceAction, "b-1"}, {operator, "b-2"}} {
				_, err := d.Invoke(context.Background(), c.p, capCancel, json.RawMessage(fmt.Sprintf(`{"id":%q}`, c.id)))
				if tt.want {
					if err != nil {
						t.Fatalf("%s: %v", c.p.Role, err)
					}
					continue
				}
				// Invisible and un-callable: answered as an unknown name.
				answeredUnknown(t, err, capCancel)
				untouched(t, dk)
			}
		})
	}
}

func TestUserBindingStep(t *testing.T) {
	tests := []struct {
		name       string
		p          dispatch.Principal
		capability string
		args       string
		refused    bool
	}{
		{"unbound action token, action", dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction}, capBook, `{"slot":"wed-11"}`, true},
		{"unbound admin token, action", dispatch.Principal{Role: "operator", Scope: dispatch.ScopeAdmin}, capCancel, `{"id":"b-1"}`, true},
		{"unbound read token, action: binding is checked before scope", dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead}, capBook, `{"slot":"wed-11"}`, true},
		{"unbound token, read", dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction}, capList, `{}`, false},
		{"bound token, action", aliceAction, capBook, `{"slot":"wed-11"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			_, err := d.Invoke(context.Background(), tt.p, tt.capability, json.RawMessage(tt.args))
			if tt.refused {
				refusalAt(t, err, dispatch.StepUserBinding, tt.capability)
				untouched(t, dk)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestScopeStep(t *testing.T) {
	tests := []struct {
		name       string
		scope      dispatch.Scope
		capability string
		args       string
		refused    bool
	}{
		{"read token, read", dispatch.ScopeRead, capList, `{}`, false},
		{"read token, action", dispatch.ScopeRead, capBook, `{"slot":"wed-11"}`, true},
		{"read token, owner-guarded action on own booking", dispatch.ScopeRead, capCancel, `{"id":"b-1"}`, true},
		{"action token, read", dispatch.ScopeAction, capList, `{}`, false},
		{"action token, action", dispatch.ScopeAction, capBook, `{"slot":"wed-11"}`, false},
		{"admin token, action", dispatch.ScopeAdmin, capBook, `{"slot":"wed-11"}`, false},
		{"admin token, read", dispatch.ScopeAdmin, capList, `{}`, false},
		{"no scope, read", "", capList, `{}`, true},
		{"unknown scope, read", "write", capList, `{}`, true},
		{"unknown scope, action", "superuser", capBook, `{"slot":"wed-11"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			p := dispatch.Principal{Role: "customer", Scope: tt.scope, UserID: alice}
			_, err := d.Invoke(context.Background(), p, tt.capability, json.RawMessage(tt.args))
			if tt.refused {
				refusalAt(t, err, dispatch.StepScope, tt.capability)
				untouched(t, dk)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, invoked := dk.calls(); invoked != 1 {
				t.Fatalf("Invoke ran %d times, want 1", invoked)
			}
		})
	}
}

func TestPermissionStep(t *testing.T) {
	policy := deskPolicy()
	policy.Roles["no-wildcard"] = []string{"booking"}
	policy.Roles["mid-wildcard"] = []string{"booking.re*"}
	policy.Roles["longer"] = []string{"booking.read.all"}
	tests := []struct {
		role       string
		capability string
		args       string
		held       bool
	}{
		{"customer", capList, `{}`, true},                              // exact
		{"viewer", capList, `{}`, true},                                // exact
		{"viewer", capBook, `{"slot":"wed-11"}`, false},                // holds read, not write
		{"operator", capBook, `{"slot":"wed-11"}`, true},               // "*"
		{"operator", capLookup, `{}`, true},                            // "*"
		{"agent", capBook, `{"slot":"wed-11"}`, true},                  // "booking.*"
		{"agent", capCancel, `{"id":"b-1"}`, true},                     // "booking.*"
		{"agent", capLookup, `{}`, false},                              // "booking.*" is not "bookingx.*"
		{"partner", capLookup, `{}`, true},                             // exact "bookingx.read"
		{"partner", capList, `{}`, false},                              // "bookingx.read" is not "booking.read"
		{"no-wildcard", capList, `{}`, false},                          // "booking" is a permission, not a prefix
		{"mid-wildcard", capList, `{}`, false},                         // only a trailing ".*" is a wildcard
		{"longer", capList, `{}`, false},                               // "booking.read.all" is not "booking.read"
		{"ghost", capList, `{}`, false},                                // a role the policy does not define holds nothing
		{"ghost", capPing, `{}`, true},                                 // a capability without permission needs none
		{"", capPing, `{}`, true},                                      // not even a role
		{"customer", capCancel, `{"id":"b-1"}`, true},                  // exact, owner-guarded
		{"viewer", capCancel, `{"id":"b-1"}`, false},                   // refused before ownership is asked
		{"customer", "booking.get", `{"id":"b-1"}`, true},              // exact, owner-guarded read
		{"partner", "booking.get", `{"id":"b-does-not-exist"}`, false}, // refused before the target is looked up
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s calls %s", tt.role, tt.capability), func(t *testing.T) {
			d, dk := newGate(t, policy)
			p := dispatch.Principal{Role: tt.role, Scope: dispatch.ScopeAction, UserID: alice}
			_, err := d.Invoke(context.Background(), p, tt.capability, json.RawMessage(tt.args))
			if !tt.held {
				refusalAt(t, err, dispatch.StepPermission, tt.capability)
				untouched(t, dk)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestArgumentsAreValidatedBeforeAnyPluginSeesThem(t *testing.T) {
	tests := []struct {
		name       string
		capability string
		args       string
	}{
		{"wrong type", capGet, `{"id":7}`},
		{"missing required", capGet, `{}`},
		{"absent body lacks the required id", capGet, ``},
		{"property the schema forbids", capGet, `{"id":"b-1","as":"u-bob"}`},
		{"below minimum", capList, `{"limit":0}`},
		{"empty string where minLength is 1", capBook, `{"slot":""}`},
		{"malformed JSON", capCancel, `{"id":"b-1"`},
		{"trailing garbage", capCancel, `{"id":"b-1"} {}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			_, err := d.Invoke(context.Background(), aliceAction, tt.capability, json.RawMessage(tt.args))
			te := toolError(t, err, dispatch.InvalidInput)
			if !strings.Contains(te.Message, tt.capability) {
				t.Errorf("message %q does not name the capability", te.Message)
			}
			// Owner-guarded capabilities included: ResolveOwner is a plugin
			// too, and must never parse arguments the schema rejects.
			untouched(t, dk)
		})
	}
}

func TestNonObjectArgumentsAreRefused(t *testing.T) {
	for _, args := range []string{`[]`, `["b-1"]`, `"b-1"`, `1`, `true`, `false`} {
		t.Run(args, func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			// capPing's schema accepts any object, so only the shape of the
			// body can be at fault.
			_, err := d.Invoke(context.Background(), aliceAction, capPing, json.RawMessage(args))
			te := toolError(t, err, dispatch.InvalidInput)
			if !strings.Contains(te.Message, "object") {
				t.Errorf("message %q does not say an object is needed", te.Message)
			}
			untouched(t, dk)
		})
	}
}

func TestAbsentArgumentsAreTheEmptyObject(t *testing.T) {
	for _, args := range []json.RawMessage{nil, {}, json.RawMessage(`null`), json.RawMessage(" null\n"), json.RawMessage(" "), json.RawMessage(`{}`)} {
		t.Run(fmt.Sprintf("%q", args), func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			if _, err := d.Invoke(context.Background(), aliceAction, capList, args); err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(dk.lastArgs, &got); err != nil || got == nil || len(got) != 0 {
				t.Fatalf("provider received %q, want the empty object", dk.lastArgs)
			}
		})
	}
}

func TestOwnershipStep(t *testing.T) {
	unboundReader := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead}
	tests := []struct {
		name       string
		p          dispatch.Principal
		capability string
		id         string
		want       string // "ok", "ownership" or "not found"
		resolves   bool   // ResolveOwner is asked
	}{
		{"owner cancels", aliceAction, capCancel, "b-1", "ok", true},
		{"stranger cancels", aliceAction, capCancel, "b-2", "ownership", true},
		{"owner reads", aliceRead, capGet, "b-1", "ok", true},
		{"stranger reads", aliceRead, capGet, "b-2", "ownership", true},
		{"unbound token reads someone's booking", unboundReader, capGet, "b-1", "ownership", true},
		{"unbound token reads an ownerless booking", unboundReader, capGet, "b-0", "ownership", true},
		{"bound token reads an ownerless booking", aliceRead, capGet, "b-0", "ownership", true},
		{"missing target is the provider's NotFound", aliceAction, capCancel, "b-404", "not found", true},
		{"admin cancels a stranger's booking without asking", operator, capCancel, "b-2", "ok", false},
		{"admin reads a missing booking: Invoke says NotFound", operator, capGet, "b-404", "not found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			out, err := d.Invoke(context.Background(), tt.p, tt.capability, json.RawMessage(fmt.Sprintf(`{"id":%q}`, tt.id)))
			resolved, invoked := dk.calls()
			if tt.resolves != (resolved == 1) || resolved > 1 {
				t.Fatalf("ResolveOwner ran %d times, want asked=%v", resolved, tt.resolves)
			}
			switch tt.want {
			case "ok":
				if err != nil {
					t.Fatal(err)
				}
				var b booking
				if err := json.Unmarshal(out, &b); err != nil || b.ID != tt.id {
					t.Fatalf("result %s, want booking %s", out, tt.id)
				}
			case "ownership":
				refusalAt(t, err, dispatch.StepOwnership, tt.capability)
				if invoked != 0 {
					t.Fatal("Invoke ran after the ownership refusal")
				}
			case "not found":
				toolError(t, err, dispatch.NotFound)
			}
			if tt.capability == capCancel && dk.bookings[tt.id] != nil && dk.cancelled(tt.id) != (tt.want == "ok") {
				t.Fatalf("booking %s cancelled = %v after outcome %q", tt.id, dk.cancelled(tt.id), tt.want)
			}
		})
	}
}

func TestOwnershipIsNotAskedForUnguardedCapabilities(t *testing.T) {
	d, dk := newGate(t, deskPolicy())
	for _, c := range []struct{ capability, args string }{
		{capList, `{"limit":3}`},
		{capBook, `{"slot":"wed-11"}`},
		{capPing, `{}`},
	} {
		if _, err := d.Invoke(context.Background(), aliceAction, c.capability, json.RawMessage(c.args)); err != nil {
			t.Fatalf("%s: %v", c.capability, err)
		}
	}
	if resolved, invoked := dk.calls(); resolved != 0 || invoked != 3 {
		t.Fatalf("ResolveOwner ran %d times and Invoke %d, want 0 and 3", resolved, invoked)
	}
}

func TestUnknownCapability(t *testing.T) {
	for _, name := range []string{"booking.delete", "", "BOOKING.LIST", "booking"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			_, err := d.Invoke(context.Background(), operator, name, nil)
			if !errors.Is(err, dispatch.ErrUnknownCapability) {
				t.Fatalf("err = %v, want ErrUnknownCapability", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
				t.Errorf("error %q does not name %q", err, name)
			}
			untouched(t, dk)
		})
	}
}

func TestProviderResultsAndErrorsPassThrough(t *testing.T) {
	d, dk := newGate(t, deskPolicy())
	ctx := context.Background()
	out, err := d.Invoke(ctx, aliceAction, capBook, json.RawMessage(`{"slot":"wed-11"}`))
	if err != nil {
		t.Fatal(err)
	}
	var b booking
	if err := json.Unmarshal(out, &b); err != nil || b.Owner != alice || b.Slot != "wed-11" {
		t.Fatalf("booked %s, want wed-11 owned by %s", out, alice)
	}
	if dk.lastP != aliceAction {
		t.Fatalf("provider saw principal %+v, want %+v", dk.lastP, aliceAction)
	}
	_, err = d.Invoke(ctx, aliceAction, capBook, json.RawMessage(`{"slot":"wed-11"}`))
	toolError(t, err, dispatch.Conflict)

	if _, err := d.Invoke(ctx, aliceAction, capCancel, json.RawMessage(fmt.Sprintf(`{"id":%q}`, b.ID))); err != nil {
		t.Fatal(err)
	}
	_, err = d.Invoke(ctx, aliceAction, capCancel, json.RawMessage(fmt.Sprintf(`{"id":%q}`, b.ID)))
	toolError(t, err, dispatch.Conflict)
}

func TestRefusalNamesCapabilityStepAndReason(t *testing.T) {
	d, _ := newGate(t, deskPolicy())
	_, err := d.Invoke(context.Background(), aliceRead, capBook, json.RawMessage(`{"slot":"wed-11"}`))
	var r *dispatch.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	msg := err.Error()
	for _, part := range []string{capBook, string(dispatch.StepScope), r.Reason} {
		if !strings.Contains(msg, part) {
			t.Errorf("%q does not contain %q", msg, part)
		}
	}
}

func TestNewNeedsAProviderForEveryPlugin(t *testing.T) {
	_, err := dispatch.New(deskRegistry(t), deskPolicy(), map[string]dispatch.Provider{"other": newDesk()})
	if err == nil || !strings.Contains(err.Error(), `"desk"`) {
		t.Fatalf("err = %v, want it to name the plugin without a provider", err)
	}
}

func TestDispatcherKeepsItsOwnCopyOfPolicyAndProviders(t *testing.T) {
	policy := deskPolicy()
	dk := newDesk()
	providers := map[string]dispatch.Provider{"desk": dk}
	d, err := dispatch.New(deskRegistry(t), policy, providers)
	if err != nil {
		t.Fatal(err)
	}
	policy.Packs["booking"] = false
	policy.Roles["customer"][0] = "nothing"
	delete(policy.Roles, "customer")
	delete(providers, "desk")

	if _, err := d.Invoke(context.Background(), aliceAction, capList, nil); err != nil {
		t.Fatalf("the caller's later edits reached the gate: %v", err)
	}
	if _, invoked := dk.calls(); invoked != 1 {
		t.Fatalf("Invoke ran %d times, want 1", invoked)
	}
}

func TestVisibleListsExactlyTheAdmittedCapabilitiesInNameOrder(t *testing.T) {
	d, _ := newGate(t, deskPolicy())
	tests := []struct {
		name string
		p    dispatch.Principal
		want []string
	}{
		{"read token", aliceRead, []string{capGet, capList, capPing}},
		{"action token", aliceAction, []string{capBook, capCancel, capGet, capList, capPing}},
		{"unbound action token sees no actions", dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction}, []string{capGet, capList, capPing}},
		{"operator", operator, []string{capBook, capCancel, capGet, capList, capPing, capLookup}},
		{"partner", dispatch.Principal{Role: "partner", Scope: dispatch.ScopeRead}, []string{capLookup, capPing}},
		{"unknown scope sees nothing", dispatch.Principal{Role: "operator", UserID: alice}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range d.Visible(tt.p) {
				got = append(got, e.Name)
				if !d.Allowed(tt.p, &e.Capability) {
					t.Errorf("%s is visible but not allowed", e.Name)
				}
			}
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("Visible = %v, want %v", got, want)
			}
		})
	}
}

func TestConcurrentInvokeAndVisible(t *testing.T) {
	d, dk := newGate(t, deskPolicy())
	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: fmt.Sprintf("u-%d", w)}
			for i := range perWorker {
				if len(d.Visible(p)) != 5 {
					errs <- fmt.Errorf("worker %d sees %d capabilities", w, len(d.Visible(p)))
				}
				if _, err := d.Invoke(context.Background(), p, capBook, json.RawMessage(fmt.Sprintf(`{"slot":"w%d-%d"}`, w, i))); err != nil {
					errs <- err
				}
				if _, err := d.Invoke(context.Background(), p, capCancel, json.RawMessage(`{"id":"b-1"}`)); err == nil {
					errs <- fmt.Errorf("worker %d cancelled Alice's booking", w)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(dk.bookings); got != 3+workers*perWorker {
		t.Fatalf("desk holds %d bookings, want %d", got, 3+workers*perWorker)
	}
	if dk.cancelled("b-1") {
		t.Fatal("Alice's booking was cancelled by strangers")
	}
}

// Compile-time check that the test provider is a real dispatch.Provider.
var _ dispatch.Provider = (*desk)(nil)

// The validator's explanation may quote the offending value; the agent
// reads at most a bounded part of it, whatever the caller sent, and still
// reads the limit that was broken.
func TestInvalidArgumentMessageIsBounded(t *testing.T) {
	d, dk := newGate(t, deskPolicy())
	huge := strings.Repeat("é", 150_000)
	_, err := d.Invoke(context.Background(), aliceAction, capList, json.RawMessage(`{"limit":"`+huge+`"}`))
	te := toolError(t, err, dispatch.InvalidInput)
	if len(te.Message) > 600 || !strings.HasPrefix(te.Message, "invalid arguments for booking.list: ") || !utf8.ValidString(te.Message) {
		t.Errorf("message is %d bytes: %.200q", len(te.Message), te.Message)
	}
	untouched(t, dk)

	reg := registry.New([]string{"booking"})
	if err := reg.Add(registry.Capability{Name: "booking.note", Kind: registry.Read, Pack: "booking", Plugin: "desk",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","maxLength":500}}}`)}); err != nil {
		t.Fatal(err)
	}
	d2, err := dispatch.New(reg, deskPolicy(), map[string]dispatch.Provider{"desk": newDesk()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d2.Invoke(context.Background(), aliceRead, "booking.note", json.RawMessage(`{"text":"`+strings.Repeat("w ", 100_000)+`"}`))
	te = toolError(t, err, dispatch.InvalidInput)
	if len(te.Message) > 600 || !strings.Contains(te.Message, "contains 200000 Unicode code points, more than 500") {
		t.Errorf("over-long string: %q", te.Message)
	}
}
