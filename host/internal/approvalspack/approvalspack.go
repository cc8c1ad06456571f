// Package approvalspack is the approvals pack: the host's capabilities
// approvals.get and approvals.list, with which an agent follows the calls
// the gate held for a human — their state and, once run, their outcome.
//
// A caller sees its own user's requests; an admin-scope caller sees every
// request. A request of someone else reads as one that does not exist, so
// ids cannot be probed. Calls reach the pack through the same gate as a
// plugin's: pack "approvals", read scope, no permission beyond it.
package approvalspack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

const (
	// ProviderName is the provider the pack is registered under; no
	// plugin can take it, as plugin names have no dot.
	ProviderName = "capgate.approvals"
	// Pack is the operator toggle of the approvals capabilities.
	Pack = "approvals"
	// Get and List are the capabilities' names.
	Get  = "approvals.get"
	List = "approvals.list"
)

// GetIn is approvals.get's input.
type GetIn struct {
	ApprovalID string `json:"approval_id" jsonschema:"the approval_id a held call answered"`
}

// ListIn is approvals.list's input.
type ListIn struct {
	Status string `json:"status,omitempty" jsonschema:"only requests in this state: pending, approved, rejected, expired, running or done; all when left out"`
	Limit  int    `json:"limit,omitempty" jsonschema:"most requests to return, newest first (default 50)"`
}

// Outcome is what came of an approved call.
type Outcome struct {
	Kind    string `json:"kind" jsonschema:"result (it ran; result holds its result), tool_error, refused (the gate refused it when it was to run) or failed"`
	Result  any    `json:"result,omitempty" jsonschema:"the call's result, when kind is result"`
	Message string `json:"message,omitempty" jsonschema:"what went wrong, for the other kinds"`
}

// Approval is a held call as its asker sees it.
type Approval struct {
	ApprovalID string   `json:"approval_id"`
	Status     string   `json:"status" jsonschema:"pending (waiting for a human), approved (about to run), running, done (Outcome says what came of it), rejected or expired"`
	Capability string   `json:"capability"`
	Risk       string   `json:"risk" jsonschema:"review_required or dangerous"`
	Arguments  any      `json:"arguments" jsonschema:"the arguments as sent, each value the capability marks sensitive replaced by [redacted]"`
	UserID     string   `json:"user_id" jsonschema:"the user who asked"`
	CreatedAt  string   `json:"created_at" jsonschema:"RFC 3339"`
	ExpiresAt  string   `json:"expires_at" jsonschema:"RFC 3339: a pending request lapses then"`
	DecidedBy  string   `json:"decided_by,omitempty" jsonschema:"who approved or rejected it"`
	DecidedAt  string   `json:"decided_at,omitempty"`
	Reason     string   `json:"reason,omitempty" jsonschema:"the decider's reason"`
	Outcome    *Outcome `json:"outcome,omitempty"`
}

// ListOut is approvals.list's result.
type ListOut struct {
	Approvals []Approval `json:"approvals"`
}

// Provider serves the pack from the approvals store.
type Provider struct{ store *approvals.Store }

// New returns the pack over store.
func New(store *approvals.Store) (*Provider, error) {
	if store == nil {
		return nil, errors.New("approvalspack: no store")
	}
	return &Provider{store: store}, nil
}

// Capabilities are the pack's registry records.
func Capabilities() ([]registry.Capability, error) {
	plugin := ProviderName
	get, err := capability[GetIn, Approval](Get, plugin,
		"Read the state of a call that is waiting for a human's approval, and once it has run, its outcome. Pass the approval_id the call answered.")
	if err != nil {
		return nil, err
	}
	list, err := capability[ListIn, ListOut](List, plugin,
		"List your calls that wait, or waited, for a human's approval, newest first, with their state and outcome.")
	if err != nil {
		return nil, err
	}
	return []registry.Capability{get, list}, nil
}

func capability[In, Out any](name, plugin, desc string) (registry.Capability, error) {
	inRaw, outRaw, err := registry.SchemasOf[In, Out](func(in *jsonschema.Schema) {
		if id := in.Properties["approval_id"]; id != nil {
			n := 64
			id.MaxLength = &n
		}
		if st := in.Properties["status"]; st != nil {
			st.Enum = []any{"pending", "approved", "rejected", "expired", "running", "done"}
		}
		if lim := in.Properties["limit"]; lim != nil {
			lo, hi := 1.0, float64(approvals.MaxLimit)
			lim.Minimum, lim.Maximum = &lo, &hi
		}
	})
	if err != nil {
		return registry.Capability{}, fmt.Errorf("%s %w", name, err)
	}
	return registry.Capability{Name: name, Description: desc, Kind: registry.Read, InputSchema: inRaw, OutputSchema: outRaw,
		Pack: Pack, Plugin: plugin}, nil
}

// Invoke runs approvals.get or approvals.list.
func (p *Provider) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	switch r.Capability {
	case Get:
		var in GetIn
		if err := json.Unmarshal(r.Args, &in); err != nil {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf("arguments do not fit the input schema: %v", err)}
		}
		a, err := p.store.Get(ctx, in.ApprovalID)
		if err == nil && !visible(r.Principal, a) {
			err = approvals.ErrNotFound
		}
		if errors.Is(err, approvals.ErrNotFound) {
			return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: fmt.Sprintf("no approval request %q of yours", in.ApprovalID)}
		}
		if err != nil {
			return nil, err
		}
		return json.Marshal(View(a))
	case List:
		var in ListIn
		if err := json.Unmarshal(r.Args, &in); err != nil {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: fmt.Sprintf("arguments do not fit the input schema: %v", err)}
		}
		f := approvals.Filter{Status: approvals.Status(in.Status), Limit: in.Limit}
		if r.Principal.Scope != dispatch.ScopeAdmin {
			if r.Principal.UserID == "" {
				return json.Marshal(ListOut{Approvals: []Approval{}})
			}
			f.UserID = r.Principal.UserID
		}
		list, err := p.store.List(ctx, f)
		if errors.Is(err, approvals.ErrInvalid) {
			return nil, &dispatch.ToolError{Code: dispatch.InvalidInput, Message: err.Error()}
		}
		if err != nil {
			return nil, err
		}
		out := ListOut{Approvals: make([]Approval, 0, len(list))}
		for _, a := range list {
			out.Approvals = append(out.Approvals, View(a))
		}
		return json.Marshal(out)
	}
	return nil, fmt.Errorf("%w: %q (the approvals pack has %s and %s)", dispatch.ErrUnknownCapability, r.Capability, Get, List)
}

// visible says whether p may see a: its own user's, or any for admin.
func visible(p dispatch.Principal, a approvals.Approval) bool {
	return p.Scope == dispatch.ScopeAdmin || (p.UserID != "" && p.UserID == a.UserID)
}

// View is a as the pack (and the admin API, and so the console) shows
// it: its arguments are the redacted copy, never the ones the run takes.
func View(a approvals.Approval) Approval {
	w := Approval{ApprovalID: a.ID, Status: string(a.Status), Capability: a.Capability, Risk: string(a.Risk),
		Arguments: raw(a.Shown), UserID: a.UserID, CreatedAt: a.CreatedAt.Format(time.RFC3339), ExpiresAt: a.ExpiresAt.Format(time.RFC3339),
		DecidedBy: a.DecidedBy, Reason: a.Reason}
	if !a.DecidedAt.IsZero() {
		w.DecidedAt = a.DecidedAt.Format(time.RFC3339)
	}
	if a.Status == approvals.Done {
		w.Outcome = &Outcome{Kind: string(a.Outcome.Kind), Message: a.Outcome.Message}
		if a.Outcome.Kind == approvals.OutcomeResult {
			w.Outcome.Result = raw(a.Outcome.Result)
		}
	}
	return w
}

// raw is stored JSON as a value to re-encode; bytes that are not JSON
// (none the gate stores) become a string rather than break the answer.
func raw(b []byte) any {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}
