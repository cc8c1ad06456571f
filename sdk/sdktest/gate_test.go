package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type noteID struct {
	ID string `json:"id" capgate:"maxLength=8"`
}

type note struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// vault is a plugin with an owner-guarded read and action, counting how
// often its handlers ran: a refused call must not have run.
type vault struct {
	ran   atomic.Int64
	owner map[string]string
}

func newVault() (*sdk.Plugin, *vault) {
	v := &vault{owner: map[string]string{"n1": "alice", "n2": "bob", "orphan": ""}}
	p := sdk.New("vault", "1")
	owner := func(_ context.Context, _ sdk.Call, in noteID) (string, error) {
		o, ok := v.owner[in.ID]
		if !ok {
			return "", sdk.NotFound("no note %q", in.ID)
		}
		return o, nil
	}
	run := func(_ context.Context, call sdk.Call, in noteID) (note, error) {
		v.ran.Add(1)
		return note{ID: in.ID, Text: "for " + call.Principal.UserID}, nil
	}
	sdk.Add(p, sdk.Tool[noteID, note]{Name: "vault.read", Kind: sdk.Read, Permission: "vault.read", Owner: owner, Handler: run})
	sdk.Add(p, sdk.Tool[noteID, note]{Name: "vault.burn", Kind: sdk.Action, Permission: "vault.write", Owner: owner, Handler: run, Destructive: true})
	sdk.Add(p, sdk.Tool[noteID, note]{Name: "vault.peek", Kind: sdk.Read, Pack: "extra", Handler: run})
	return p, v
}

// TestGateRefusals: every step of the gate refuses through sdktest exactly
// as the host's does, naming the step, before the handler runs.
func TestGateRefusals(t *testing.T) {
	p, v := newVault()
	h := sdktest.NewHost(t)
	h.Roles = map[string][]string{"customer": {"vault.*"}, "reader": {"vault.read"}}
	h.DisabledPacks = []string{"extra"}
	c, err := h.Add(p, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	alice := sdk.Principal{Role: "customer", Scope: sdk.ScopeAction, UserID: "alice"}
	for _, tc := range []struct {
		name       string
		capability string
		who        sdk.Principal
		args       any
		step       sdk.Step      // the refusing step, or
		code       sdk.ErrorCode // the failure for the agent, or neither: success
		reason     string
	}{
		{"action without a user", "vault.burn", sdk.Principal{Role: "customer", Scope: sdk.ScopeAction}, noteID{"n1"}, sdk.StepUserBinding, 0, "bound to a user"},
		{"read scope calling an action", "vault.burn", sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "alice"}, noteID{"n1"}, sdk.StepScope, 0, `scope is "read"`},
		{"unknown scope", "vault.read", sdk.Principal{Role: "customer", Scope: "root", UserID: "alice"}, noteID{"n1"}, sdk.StepScope, 0, `"root"`},
		{"role without the permission", "vault.burn", sdk.Principal{Role: "reader", Scope: sdk.ScopeAction, UserID: "alice"}, noteID{"n1"}, sdk.StepPermission, 0, `does not hold permission "vault.write"`},
		{"undeclared role", "vault.read", sdk.Principal{Role: "stranger", Scope: sdk.ScopeRead, UserID: "alice"}, noteID{"n1"}, sdk.StepPermission, 0, `role "stranger"`},
		{"arguments over a bound", "vault.read", alice, noteID{"much-too-long"}, "", sdk.CodeInvalidInput, "invalid arguments for vault.read"},
		{"an unknown argument", "vault.read", alice, map[string]string{"id": "n1", "x": "y"}, "", sdk.CodeInvalidInput, "invalid arguments for vault.read"},
		{"someone else's target", "vault.read", alice, noteID{"n2"}, sdk.StepOwnership, 0, "does not belong"},
		{"someone else's target, destroyed", "vault.burn", alice, noteID{"n2"}, sdk.StepOwnership, 0, "does not belong"},
		{"a target owned by no one", "vault.read", alice, noteID{"orphan"}, sdk.StepOwnership, 0, "does not belong"},
		{"a missing target", "vault.read", alice, noteID{"n9"}, "", sdk.CodeNotFound, `no note "n9"`},
		{"one's own target", "vault.burn", alice, noteID{"n1"}, "", 0, ""},
		{"admin scope passes ownership", "vault.read", sdk.Principal{Role: "customer", Scope: sdk.ScopeAdmin, UserID: "ops"}, noteID{"n2"}, "", 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := v.ran.Load()
			out, err := c.Invoke(context.Background(), tc.capability, tc.who, tc.args)
			ran := v.ran.Load() - before
			switch {
			case tc.step != "":
				var r *sdk.RefusedError
				if !errors.As(err, &r) || r.Step != tc.step || r.Capability != tc.capability || !strings.Contains(r.Reason, tc.reason) {
					t.Fatalf("err = %v; want a refusal at %s saying %q", err, tc.step, tc.reason)
				}
			case tc.code != 0:
				if sdk.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.reason) || sdk.IsRefused(err) {
					t.Fatalf("err = %v; want %v saying %q", err, tc.code, tc.reason)
				}
			default:
				var n note
				if err != nil || json.Unmarshal(out, &n) != nil || n.Text != "for "+tc.who.UserID {
					t.Fatalf("= %s, %v; want the handler's answer", out, err)
				}
				if ran != 1 {
					t.Fatalf("handler ran %d times", ran)
				}
				return
			}
			if ran != 0 {
				t.Errorf("the handler ran %d times for a call that failed", ran)
			}
		})
	}
	// A capability whose pack is off is invisible and un-callable: it
	// answers as one no plugin provides.
	if _, err := c.Invoke(context.Background(), "vault.peek", alice, noteID{"n1"}); !errors.Is(err, sdk.ErrUnknownCapability) || sdk.IsRefused(err) {
		t.Errorf("pack off: %v, want the answer to an unknown capability", err)
	}
	if _, err := c.Invoke(context.Background(), "vault.nope", alice, nil); !errors.Is(err, sdk.ErrUnknownCapability) {
		t.Errorf("unknown capability: %v", err)
	}
}

// TestDefaultPolicy: with no Roles declared every role holds every
// permission and every pack is on; scope, user binding and ownership
// still apply.
func TestDefaultPolicy(t *testing.T) {
	p, _ := newVault()
	c := sdktest.Start(t, p, nil)
	ctx := context.Background()
	if _, err := c.Invoke(ctx, "vault.peek", sdk.Principal{Role: "anyone", Scope: sdk.ScopeRead}, noteID{"n1"}); err != nil {
		t.Errorf("an unbound read token, any role: %v", err)
	}
	if _, err := c.Invoke(ctx, "vault.read", sdk.Principal{Role: "anyone", Scope: sdk.ScopeRead, UserID: "bob"}, noteID{"n1"}); sdk.RefusedAt(err) != sdk.StepOwnership {
		t.Errorf("bob reading alice's note: %v", err)
	}
}

type bad struct {
	Count int `json:"count"`
}

// TestResultSchemaChecked: a result that breaks the capability's output
// schema is the plugin's bug: an internal failure naming the plugin, never
// a result.
func TestResultSchemaChecked(t *testing.T) {
	p := sdk.New("liar", "1")
	// The declared output is bad{Count int}; the handler returns a string
	// where the count should be, through a json.Marshaler.
	sdk.Add(p, sdk.Tool[noteID, lying]{Name: "liar.count", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, noteID) (lying, error) { return lying{}, nil }})
	c := sdktest.Start(t, p, nil)
	out, err := c.Invoke(context.Background(), "liar.count", sdk.Principal{Role: "r", Scope: sdk.ScopeRead}, noteID{"x"})
	if err == nil || sdk.CodeOf(err) != 0 || !strings.Contains(err.Error(), `plugin "liar"`) || !strings.Contains(err.Error(), "output schema") {
		t.Fatalf("= %s, %v; want an internal failure naming the plugin and the output schema", out, err)
	}
}

// lying declares a count and encodes a string.
type lying bad

func (lying) MarshalJSON() ([]byte, error) { return []byte(`{"count":"many"}`), nil }

// TestNestedCallsGatedAsTheCaller: a handler's Call.Invoke passes the gate
// as its caller, depth bounded.
func TestNestedCallsGatedAsTheCaller(t *testing.T) {
	vp, _ := newVault()
	relay := sdk.New("relay", "1")
	sdk.Add(relay, sdk.Tool[noteID, note]{Name: "relay.read", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, in noteID) (note, error) {
			raw, err := call.Invoke(ctx, "vault.read", in)
			if err != nil {
				return note{}, err
			}
			var n note
			return n, json.Unmarshal(raw, &n)
		}})
	var loops atomic.Int64
	var deepest atomic.Value
	sdk.Add(relay, sdk.Tool[noteID, note]{Name: "relay.loop", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, in noteID) (note, error) {
			loops.Add(1)
			_, err := call.Invoke(ctx, "relay.loop", in)
			if err != nil && strings.Contains(err.Error(), "nest deeper than") {
				deepest.Store(err.Error())
			}
			return note{}, err
		}})
	h := sdktest.NewHost(t)
	rc, _ := h.Add(relay, nil, "")
	if _, err := h.Add(vp, nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice := sdk.Principal{Role: "r", Scope: sdk.ScopeRead, UserID: "alice"}
	if n := sdktest.Call[note](t, rc, "relay.read", alice, noteID{"n1"}); n.Text != "for alice" {
		t.Errorf("relayed read = %+v", n)
	}
	// The nested call refuses alice bob's note: the relay passes the
	// refusal on as it got it.
	if _, err := rc.Invoke(ctx, "relay.read", alice, noteID{"n2"}); !strings.Contains(err.Error(), "refused at ownership") {
		t.Errorf("relayed read of bob's note: %v", err)
	}
	if _, err := rc.Invoke(ctx, "relay.loop", alice, noteID{"x"}); err == nil {
		t.Error("a loop of nested calls succeeded")
	}
	if n := loops.Load(); n != sdktest.MaxNestedDepth+1 {
		t.Errorf("the loop ran %d times; want the direct call and %d nested ones", n, sdktest.MaxNestedDepth)
	}
	if deepest.Load() == nil {
		t.Error("the deepest call was not told that calls nest too deep")
	}
}
