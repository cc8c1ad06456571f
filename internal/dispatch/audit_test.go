package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
)

// trail is an Auditor keeping decisions in memory, with a switch for its
// health.
type trail struct {
	mu      sync.Mutex
	records []dispatch.Decision
	n       atomic.Int64
	down    atomic.Bool
	// admitted are the records kept before their actions ran.
	admitted   []dispatch.Decision
	admitFails atomic.Bool
}

func (a *trail) NewID(time.Time) string { return fmt.Sprintf("rec-%d", a.n.Add(1)) }

func (a *trail) Record(d dispatch.Decision) {
	a.mu.Lock()
	a.records = append(a.records, d)
	a.mu.Unlock()
}

func (a *trail) Healthy() bool { return !a.down.Load() }

// Admit keeps an action's record before it runs, in memory; it fails
// while the trail is down or admitFails says so.
func (a *trail) Admit(_ context.Context, d dispatch.Decision) error {
	if a.down.Load() || a.admitFails.Load() {
		return errors.New("the trail refuses the record")
	}
	a.mu.Lock()
	a.admitted = append(a.admitted, d)
	a.mu.Unlock()
	return nil
}

func (a *trail) take() []dispatch.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.records
	a.records = nil
	return out
}

// TestEveryDecisionIsRecordedOnce: each kind of outcome leaves exactly one
// record, with the caller, the capability, the plugin, the origin, the
// arguments as sent, and the decision.
func TestEveryDecisionIsRecordedOnce(t *testing.T) {
	d, _ := newGate(t, deskPolicy())
	a := &trail{}
	d.UseAuditor(a, true)
	origin := dispatch.Origin{Protocol: "mcp", ProtocolVersion: "2025-11-25", RequestID: "7"}
	ctx := dispatch.WithOrigin(context.Background(), origin)
	bob := dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "bob", Token: "bob-phone"}
	for _, tc := range []struct {
		name       string
		p          dispatch.Principal
		capability string
		args       string
		step       dispatch.Step // refusals
		code       dispatch.ToolErrorCode
		internal   bool
	}{
		{"admitted", aliceRead, capGet, `{"id":"b-1"}`, "", 0, false},
		{"permission", dispatch.Principal{Role: "viewer", Scope: dispatch.ScopeAction, UserID: alice}, capBook, `{"slot":"x"}`, dispatch.StepPermission, 0, false},
		{"ownership", bob, capCancel, `{"id":"b-1"}`, dispatch.StepOwnership, 0, false},
		{"invalid arguments", aliceRead, capList, `{"limit":"x"}`, "", dispatch.InvalidInput, false},
		{"not found", aliceRead, capGet, `{"id":"b-404"}`, "", dispatch.NotFound, false},
		{"unknown capability", aliceRead, "booking.nope", `{}`, dispatch.StepUnknown, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Invoke(ctx, tc.p, tc.capability, json.RawMessage(tc.args))
			recs := a.take()
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1: %+v", len(recs), recs)
			}
			r := recs[0]
			if r.ID == "" || r.Origin != origin || r.Principal != tc.p || r.Capability != tc.capability || string(r.Args) != tc.args ||
				r.Time.IsZero() || r.Latency < 0 || time.Since(r.Time) > time.Minute {
				t.Errorf("record %+v", r)
			}
			if want := "desk"; tc.step != dispatch.StepUnknown && r.Plugin != want {
				t.Errorf("plugin %q, want %q", r.Plugin, want)
			}
			switch {
			case tc.step != "":
				if r.Refusal == nil || r.Refusal.Step != tc.step || r.Err != nil {
					t.Errorf("refusal %+v, err %v; want refused at %s", r.Refusal, r.Err, tc.step)
				}
			case tc.code != 0:
				var te *dispatch.ToolError
				if r.Refusal != nil || !errors.As(r.Err, &te) || te.Code != tc.code {
					t.Errorf("refusal %+v, err %v; want tool error %d", r.Refusal, r.Err, tc.code)
				}
			default:
				if r.Refusal != nil || r.Err != nil || err != nil {
					t.Errorf("refusal %+v, err %v (returned %v); want admitted and ok", r.Refusal, r.Err, err)
				}
			}
			if tc.step == dispatch.StepUnknown && !errors.Is(err, dispatch.ErrUnknownCapability) {
				t.Errorf("the caller got %v, want ErrUnknownCapability", err)
			}
		})
	}
}

// TestInternalErrorNamesItsRecord: an internal failure reaches the caller
// as an *InternalError whose reference is the record's ID, and the record
// holds the cause.
func TestInternalErrorNamesItsRecord(t *testing.T) {
	boom := errors.New("dial tcp 10.0.0.1:5432: connection refused")
	broken := providerFunc(func(context.Context, dispatch.Request) (json.RawMessage, error) { return nil, boom })
	d, err := dispatch.New(deskRegistry(t), deskPolicy(), map[string]dispatch.Provider{"desk": broken})
	if err != nil {
		t.Fatal(err)
	}
	a := &trail{}
	d.UseAuditor(a, true)
	_, err = d.Invoke(context.Background(), aliceRead, capList, nil)
	var ie *dispatch.InternalError
	if !errors.As(err, &ie) || !errors.Is(err, boom) {
		t.Fatalf("err = %v, want an InternalError wrapping the cause", err)
	}
	recs := a.take()
	if len(recs) != 1 || recs[0].ID != ie.Ref || !errors.Is(recs[0].Err, boom) {
		t.Fatalf("records %+v, reference %q", recs, ie.Ref)
	}
}

// TestAuditStep: while the trail cannot be written, actions are refused at
// audit (before they are counted against a rate limit) and reads carry
// on; with the operator's leave to run without it, actions carry on too.
func TestAuditStep(t *testing.T) {
	for _, refuse := range []bool{true, false} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			d, dk := newGate(t, deskPolicy())
			a := &trail{}
			a.down.Store(true)
			d.UseAuditor(a, refuse)
			_, err := d.Invoke(context.Background(), aliceAction, capBook, json.RawMessage(`{"slot":"x"}`))
			if refuse {
				refusalAt(t, err, dispatch.StepAudit, capBook)
				untouched(t, dk)
			} else if err != nil {
				t.Fatalf("an action with the trail down, allowed: %v", err)
			}
			if _, err := d.Invoke(context.Background(), aliceRead, capGet, json.RawMessage(`{"id":"b-1"}`)); err != nil {
				t.Errorf("a read with the trail down: %v", err)
			}
			// Refused or not, both calls were handed to the trail.
			if n := len(a.take()); n != 2 {
				t.Errorf("%d records, want 2", n)
			}
			// The step does not hide anything from tools/list.
			if !slices.ContainsFunc(d.Visible(aliceAction), func(e dispatch.Listed) bool { return e.Name == capBook }) {
				t.Error("tools/list hides the action while the trail is down")
			}
		})
	}
}

// TestNestedCallsNameTheirParent: a provider calling back through the gate
// with the origin the plugin host carries leaves a record naming its
// parent, written before the parent's.
func TestNestedCallsNameTheirParent(t *testing.T) {
	var d *dispatch.Dispatcher
	nesting := providerFunc(func(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
		if r.Capability != capList {
			return json.RawMessage(`{"ok":true}`), nil
		}
		o := dispatch.OriginOf(ctx)
		o.ParentID = r.CallID
		if _, err := d.Invoke(dispatch.WithOrigin(ctx, o), r.Principal, capPing, nil); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"bookings":[]}`), nil
	})
	var err error
	if d, err = dispatch.New(deskRegistry(t), deskPolicy(), map[string]dispatch.Provider{"desk": nesting}); err != nil {
		t.Fatal(err)
	}
	a := &trail{}
	d.UseAuditor(a, true)
	ctx := dispatch.WithOrigin(context.Background(), dispatch.Origin{Protocol: "mcp", RequestID: "1"})
	if _, err := d.Invoke(ctx, aliceRead, capList, nil); err != nil {
		t.Fatal(err)
	}
	recs := a.take()
	if len(recs) != 2 || recs[0].Capability != capPing || recs[1].Capability != capList ||
		recs[0].Origin.ParentID != recs[1].ID || recs[1].Origin.ParentID != "" || recs[0].Origin.RequestID != "1" {
		t.Fatalf("records %+v", recs)
	}
}

// TestActionRecordKeptBeforeItRuns: an action's record is kept (Admit)
// before its provider runs it, and its outcome's record says it replaces
// that one; a read is not kept ahead. When the record cannot be kept the
// action is refused at the audit step and nothing runs, unless the
// operator chose to let calls carry on unrecorded.
func TestActionRecordKeptBeforeItRuns(t *testing.T) {
	ctx := context.Background()
	for _, refuse := range []bool{true, false} {
		d, dk := newGate(t, deskPolicy())
		a := &trail{}
		d.UseAuditor(a, refuse)
		if _, err := d.Invoke(ctx, aliceAction, capBook, json.RawMessage(`{"slot":"fri-17"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Invoke(ctx, aliceRead, capList, nil); err != nil {
			t.Fatal(err)
		}
		recs := a.take()
		if len(a.admitted) != 1 || a.admitted[0].Capability != capBook || a.admitted[0].ID != recs[0].ID || !recs[0].Pending || recs[1].Pending {
			t.Fatalf("kept ahead %+v, records %+v; want the action's alone, its outcome replacing it", a.admitted, recs)
		}
		a.admitFails.Store(true)
		_, invokedBefore := dk.calls()
		_, err := d.Invoke(ctx, aliceAction, capBook, json.RawMessage(`{"slot":"fri-18"}`))
		_, invoked := dk.calls()
		if refuse {
			refusalAt(t, err, dispatch.StepAudit, capBook)
			if invoked != invokedBefore {
				t.Error("the action ran without its record kept")
			}
			if recs := a.take(); len(recs) != 1 || recs[0].Refusal == nil || !recs[0].Pending {
				t.Errorf("records %+v; want the refusal, replacing whatever was kept", recs)
			}
		} else if err != nil || invoked != invokedBefore+1 {
			t.Errorf("on_unavailable allow: %v, ran %d; want the action run", err, invoked-invokedBefore)
		}
	}
}
