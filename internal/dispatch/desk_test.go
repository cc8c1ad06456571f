package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Users of the booking desk used throughout the tests.
const (
	alice = "u-alice"
	bob   = "u-bob"
)

// Capabilities of the booking desk. One of each shape the gate treats
// differently: read or action, owner-guarded or not, plus a capability that
// declares no permission and one whose permission only looks like a booking
// permission.
const (
	capList   = "booking.list"   // read, not guarded
	capGet    = "booking.get"    // read, owner-guarded
	capBook   = "booking.book"   // action, not guarded
	capCancel = "booking.cancel" // action, owner-guarded
	capPing   = "status.ping"    // read, no permission at all
	capLookup = "partner.lookup" // read, permission "bookingx.read"
)

// deskCapabilities is the registry declaration of the booking desk plugin.
func deskCapabilities() []registry.Capability {
	byID := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)
	return []registry.Capability{
		{Name: capList, Description: "List the caller's bookings.", Kind: registry.Read, Pack: "booking", Permission: "booking.read", Plugin: "desk",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","minimum":1}},"additionalProperties":false}`)},
		{Name: capGet, Description: "Read one booking.", Kind: registry.Read, Pack: "booking", Permission: "booking.read", OwnerGuarded: true, Plugin: "desk",
			InputSchema: byID},
		{Name: capBook, Description: "Book a slot.", Kind: registry.Action, Pack: "booking", Permission: "booking.write", Plugin: "desk",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"slot":{"type":"string","minLength":1}},"required":["slot"],"additionalProperties":false}`)},
		{Name: capCancel, Description: "Cancel a booking.", Kind: registry.Action, Pack: "booking", Permission: "booking.cancel", OwnerGuarded: true, Destructive: true, Plugin: "desk",
			InputSchema: byID},
		{Name: capPing, Description: "Say the desk is up.", Kind: registry.Read, Pack: "status", Plugin: "desk",
			InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: capLookup, Description: "Look up a partner.", Kind: registry.Read, Pack: "partner", Permission: "bookingx.read", Plugin: "desk",
			InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
}

// deskRegistry returns a registry holding the booking desk's capabilities.
func deskRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	reg := registry.New([]string{"booking", "status", "partner"})
	for _, c := range deskCapabilities() {
		if err := reg.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

type booking struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Slot      string `json:"slot"`
	Cancelled bool   `json:"cancelled"`
}

// desk is a real in-process dispatch.Provider: a small booking service that
// keeps its bookings in a map, each owned by a user, and records every call
// the gate lets through to it.
type desk struct {
	mu       sync.Mutex
	bookings map[string]*booking
	next     int

	resolved []string           // capabilities ResolveOwner was asked about
	invoked  []string           // capabilities Invoke ran
	lastP    dispatch.Principal // principal of the last Invoke
	lastArgs json.RawMessage    // arguments of the last Invoke
}

// newDesk returns a desk holding b-1 (Alice's), b-2 (Bob's) and b-0, a
// booking recorded without an owner.
func newDesk() *desk {
	return &desk{bookings: map[string]*booking{
		"b-0": {ID: "b-0", Owner: "", Slot: "sun-00"},
		"b-1": {ID: "b-1", Owner: alice, Slot: "mon-09"},
		"b-2": {ID: "b-2", Owner: bob, Slot: "tue-10"},
	}, next: 3}
}

func (d *desk) target(args json.RawMessage) (*booking, error) {
	var a struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: err.Error()}
	}
	b, ok := d.bookings[a.ID]
	if !ok {
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: fmt.Sprintf("booking %q does not exist", a.ID)}
	}
	return b, nil
}

// Invoke implements dispatch.Provider.
func (d *desk) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	p, capability, args := r.Principal, r.Capability, r.Args
	d.mu.Lock()
	defer d.mu.Unlock()
	if r.CheckOwner {
		// The ownership step, as a plugin runs it: resolve, then refuse
		// before anything runs.
		d.resolved = append(d.resolved, capability)
		b, err := d.target(args)
		if err != nil {
			return nil, err
		}
		if err := r.Owned(b.Owner); err != nil {
			return nil, err
		}
	}
	d.invoked = append(d.invoked, capability)
	d.lastP, d.lastArgs = p, args
	switch capability {
	case capList:
		var mine []*booking
		for _, id := range slices.Sorted(maps.Keys(d.bookings)) {
			if b := d.bookings[id]; b.Owner == p.UserID {
				mine = append(mine, b)
			}
		}
		return json.Marshal(map[string]any{"bookings": mine})
	case capGet:
		b, err := d.target(args)
		if err != nil {
			return nil, err
		}
		return json.Marshal(b)
	case capBook:
		var a struct {
			Slot string `json:"slot"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: err.Error()}
		}
		for _, b := range d.bookings {
			if b.Slot == a.Slot && !b.Cancelled {
				return nil, &dispatch.ToolError{Code: dispatch.Conflict, Message: fmt.Sprintf("slot %q is taken", a.Slot)}
			}
		}
		b := &booking{ID: fmt.Sprintf("b-%d", d.next), Owner: p.UserID, Slot: a.Slot}
		d.next++
		d.bookings[b.ID] = b
		return json.Marshal(b)
	case capCancel:
		b, err := d.target(args)
		if err != nil {
			return nil, err
		}
		if b.Cancelled {
			return nil, &dispatch.ToolError{Code: dispatch.Conflict, Message: fmt.Sprintf("booking %q is already cancelled", b.ID)}
		}
		b.Cancelled = true
		return json.Marshal(b)
	case capPing, capLookup:
		return json.RawMessage(`{"ok":true}`), nil
	}
	return nil, fmt.Errorf("desk does not provide %q", capability)
}

// calls returns how often each provider method ran.
func (d *desk) calls() (resolve, invoke int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.resolved), len(d.invoked)
}

// cancelled reports whether booking id has been cancelled.
func (d *desk) cancelled(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bookings[id].Cancelled
}

// deskPolicy enables the booking, status and partner packs and defines the
// roles the tests use.
func deskPolicy() dispatch.Policy {
	return dispatch.Policy{
		Packs: map[string]bool{"booking": true, "status": true, "partner": true},
		Roles: map[string][]string{
			"customer": {"booking.read", "booking.write", "booking.cancel"},
			"operator": {"*"},
			"agent":    {"booking.*"},
			"viewer":   {"booking.read"},
			"partner":  {"bookingx.read"},
		},
	}
}

// newGate returns a dispatcher over a fresh desk with the given policy.
func newGate(t testing.TB, policy dispatch.Policy) (*dispatch.Dispatcher, *desk) {
	t.Helper()
	dk := newDesk()
	d, err := dispatch.New(deskRegistry(t), policy, map[string]dispatch.Provider{"desk": dk})
	if err != nil {
		t.Fatal(err)
	}
	return d, dk
}

// Principals used throughout the tests.
var (
	aliceAction = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: alice}
	aliceRead   = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: alice}
	operator    = dispatch.Principal{Role: "operator", Scope: dispatch.ScopeAdmin, UserID: "u-op"}
)
