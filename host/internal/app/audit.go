package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

// auditor writes the gate's decisions to the audit trail: dispatch's
// Auditor over an audit.Writer, which batches them to the store behind
// the calls.
type auditor struct {
	w   *audit.Writer
	log *slog.Logger
	// dropped counts records the writer refused since the last line saying
	// so, logged at most every dropLogEvery.
	dropped   atomic.Int64
	dropSince atomic.Int64
}

var _ dispatch.Auditor = (*auditor)(nil)

const dropLogEvery = 10 * time.Second

// openAudit opens the trail's store on the host's database and starts
// its writer.
func openAudit(ctx context.Context, cfg *config.Config, log *slog.Logger) (*auditor, audit.Store, error) {
	store, err := audit.Open(ctx, cfg.Database.DSN, cfg.DataDir, audit.WithLog(log))
	if err != nil {
		return nil, nil, fmt.Errorf("database.dsn: audit trail: %w", err)
	}
	w, err := audit.NewWriter(store, audit.WriterConfig{Retention: cfg.Audit.Retention, TokenShare: audit.DefaultTokenShare, Log: log})
	if err != nil {
		_ = store.Close()
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	return &auditor{w: w, log: log}, store, nil
}

func (a *auditor) NewID(at time.Time) string { return audit.NewID(at) }

func (a *auditor) Healthy() bool { return a.w.Healthy() }

// recordOf is d as the trail keeps it, before its decision and outcome.
func recordOf(d *dispatch.Decision) audit.Record {
	// The writer compacts, checks and caps the arguments it is given;
	// redacting first is needed only where they may hold a field the
	// capability marks.
	args := d.Args
	if len(d.Sensitive) > 0 && !audit.NamesNone(d.Args, d.Sensitive) {
		args = audit.Redact(d.Args, d.Sensitive, 0)
	}
	return audit.Record{
		ID: d.ID, ParentID: d.Origin.ParentID, Time: d.Time, Latency: d.Latency,
		RequestID: d.Origin.RequestID, Protocol: d.Origin.Protocol, ProtocolVersion: d.Origin.ProtocolVersion,
		TokenLabel: d.Principal.Token, Role: d.Principal.Role, Scope: string(d.Principal.Scope), UserID: d.Principal.UserID,
		Capability: d.Capability, Plugin: d.Plugin,
		Args: args, ApprovalID: d.ApprovalID,
	}
}

// Admit implements dispatch.Auditor: the action's record is durable
// before it runs.
func (a *auditor) Admit(ctx context.Context, d dispatch.Decision) error {
	return a.w.Admit(ctx, recordOf(&d))
}

// Record implements dispatch.Auditor.
func (a *auditor) Record(d dispatch.Decision) {
	r := recordOf(&d)
	switch {
	case d.Refusal != nil:
		r.Decision, r.Step, r.Reason = audit.Refused, string(d.Refusal.Step), d.Refusal.Reason
	case d.Err == nil && d.Held:
		r.Decision, r.Outcome = audit.Admitted, audit.OutcomeHeld
	case d.AskedClient:
		r.Decision, r.Outcome, r.Reason = audit.Admitted, audit.OutcomeAsked, "asked the caller's client for input"
	case d.Asked:
		r.Decision, r.Outcome, r.Reason = audit.Admitted, audit.OutcomeAsked, "asked the caller's user to confirm it"
	case d.Err == nil && d.Confirmed:
		r.Decision, r.Outcome, r.Reason = audit.Admitted, audit.OutcomeOK, "confirmed by the caller's user"
	case d.Err == nil:
		r.Decision, r.Outcome = audit.Admitted, audit.OutcomeOK
	default:
		r.Decision = audit.Admitted
		failed(&r, d)
	}
	if d.Pending {
		// Its record was kept before it ran; this one replaces it.
		if err := a.w.Settle(r); err != nil {
			a.log.Warn("audit: an action's outcome was not recorded; its record stays as interrupted", "why", err.Error())
		}
		return
	}
	a.write(r)
}

// failed records how an admitted call failed; apart from Record so that
// calls that succeed do not pay for the targets of errors.As, which
// escape.
func failed(r *audit.Record, d dispatch.Decision) {
	var (
		te *dispatch.ToolError
		ie *dispatch.InternalError
	)
	switch {
	case errors.As(d.Err, &te):
		r.Outcome, r.ErrorCode = audit.OutcomeToolError, te.Code.String()
	case errors.As(d.Err, &ie):
		r.Outcome, r.ErrorRef = audit.OutcomeInternalError, ie.Ref
	default:
		r.Outcome, r.ErrorRef = audit.OutcomeInternalError, d.ID
	}
}

// event records something the operator did to the host itself (a reload,
// the kill switch), as a record of a capgate.* name no plugin can take.
// A change that did not happen is a refusal at step failed, with why.
func (a *auditor) event(name, by string, err error, what string) {
	r := audit.Record{ID: audit.NewID(time.Now()), Time: time.Now(), Capability: name, TokenLabel: by, Reason: what,
		Decision: audit.Admitted, Outcome: audit.OutcomeOK, Protocol: "host"}
	if err != nil {
		r.Decision, r.Outcome, r.Step, r.Reason = audit.Refused, "", "failed", what+": "+err.Error()
	}
	a.write(r)
}

// decided records a decision on a held call (approvals.DecisionRecord).
func (a *auditor) decided(protocol string, d approvals.Decision, id, capability string, err error) {
	a.write(approvals.DecisionRecord(protocol, d, id, capability, err))
}

func (a *auditor) write(r audit.Record) {
	if err := a.w.Write(r); err != nil {
		n := a.dropped.Add(1)
		now := time.Now().UnixNano()
		if last := a.dropSince.Load(); now-last >= int64(dropLogEvery) && a.dropSince.CompareAndSwap(last, now) {
			a.dropped.Add(-n)
			a.log.Warn("audit: records not kept", "records", n, "why", err.Error())
		}
	}
}

// close writes what is queued, for at most the shutdown's time.
func (a *auditor) close(ctx context.Context) error { return a.w.Close(ctx) }
