package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// scripted answers every call with what the test set.
type scripted struct {
	res json.RawMessage
	err error
}

func (s scripted) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return s.res, s.err
}

func scriptedGate(t *testing.T, prov scripted, ownerGuarded bool) *dispatch.Dispatcher {
	t.Helper()
	reg := registry.New([]string{"shop"})
	if err := reg.Add(registry.Capability{
		Name: "shop.item", Kind: registry.Read, Pack: "shop", Plugin: "shop", OwnerGuarded: ownerGuarded,
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"count":{"type":"integer"}},"required":["count"]}`),
	}); err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"shop": true}}, map[string]dispatch.Provider{"shop": prov})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestResultChecked: a result that breaks the output schema never reaches
// the caller; the error names the plugin and is no tool error (the
// caller can do nothing about it).
func TestResultChecked(t *testing.T) {
	alice := dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead, UserID: "alice"}
	for _, tc := range []struct {
		name, res string
		ok        bool
	}{
		{"fits", `{"count":3}`, true},
		{"wrong type", `{"count":"three"}`, false},
		{"missing property", `{}`, false},
		{"not an object", `[1]`, false},
		{"not JSON", `{"count":`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := scriptedGate(t, scripted{res: json.RawMessage(tc.res)}, false).Invoke(context.Background(), alice, "shop.item", nil)
			if tc.ok {
				if err != nil || string(res) != tc.res {
					t.Fatalf("= %s, %v", res, err)
				}
				return
			}
			var te *dispatch.ToolError
			if res != nil || !errors.Is(err, dispatch.ErrResultMismatch) || errors.As(err, &te) || !strings.Contains(err.Error(), `plugin "shop"`) {
				t.Fatalf("= %s, %v; want a result mismatch naming the plugin", res, err)
			}
		})
	}
}

// TestPluginRefusalsBounded: a provider may refuse only the ownership
// step, and only when asked to decide it.
func TestPluginRefusalsBounded(t *testing.T) {
	alice := dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead, UserID: "alice"}
	admin := dispatch.Principal{Role: "r", Scope: dispatch.ScopeAdmin, UserID: "ops"}
	own := &dispatch.Refusal{Step: dispatch.StepOwnership, Reason: "x"}
	perm := &dispatch.Refusal{Step: dispatch.StepPermission, Reason: "x"}
	for _, tc := range []struct {
		name    string
		guarded bool
		who     dispatch.Principal
		refusal *dispatch.Refusal
		passed  bool // the refusal reaches the caller as one
	}{
		{"ownership, asked", true, alice, own, true},
		{"ownership, not owner-guarded", false, alice, own, false},
		{"ownership, admin not asked", true, admin, own, false},
		{"another step", true, alice, perm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scriptedGate(t, scripted{err: tc.refusal}, tc.guarded).Invoke(context.Background(), tc.who, "shop.item", nil)
			var r *dispatch.Refusal
			if got := errors.As(err, &r); got != tc.passed {
				t.Fatalf("err = %v; refusal passed on: %v, want %v", err, got, tc.passed)
			}
			if tc.passed && (r.Capability != "shop.item" || r.Step != dispatch.StepOwnership) {
				t.Fatalf("refusal = %+v", r)
			}
		})
	}
}
