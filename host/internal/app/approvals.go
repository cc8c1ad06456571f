package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/confirm"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/internal/dispatch"
)

// How often the desk works.
const (
	// approvalPoll is how often a replica looks for approved calls to
	// run: decisions may come from another replica or the CLI.
	approvalPoll = time.Second
	// approvalSweep is how often expired requests and lost runs are
	// settled.
	approvalSweep = 30 * time.Second
	// approvalRunTimeout bounds one approved call's run, well inside
	// approvals.Lease.
	approvalRunTimeout = 2 * time.Minute
)

// approvalDesk is the gate's Approver over the approvals store, and the
// runner of what approvers approve: each approved call runs once, in
// whichever replica takes it first, as its asker's token now stands.
type approvalDesk struct {
	store *approvals.Store
	gate  *dispatch.Dispatcher
	// principal returns a token's principal as the tokens stand now.
	principal func(label string) (dispatch.Principal, bool)
	// oauth is set while OAuth is on: an OAuth principal's held call then
	// runs as the principal that asked (see run).
	oauth bool
	log   *slog.Logger
	// aud records each decision made here; nil records none.
	aud *auditor
	// bus carries approval.requested and approval.decided, for the asker
	// and for admins (events.poll); nil publishes nothing.
	bus events.Bus
	// ttl is approvals.ttl; fourEyes approvals.four_eyes; maxPending
	// approvals.max_pending.
	ttl        time.Duration
	fourEyes   bool
	maxPending int

	wake chan struct{} // a decision was made here: run it now
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

var (
	_ dispatch.Approver = (*approvalDesk)(nil)
	_ server.Approvals  = (*approvalDesk)(nil)
)

// List, Get and Decide serve the admin API; a decision here runs at once
// rather than at the next poll.
func (a *approvalDesk) List(ctx context.Context, f approvals.Filter) ([]approvals.Approval, error) {
	return a.store.List(ctx, f)
}

func (a *approvalDesk) Get(ctx context.Context, id string) (approvals.Approval, error) {
	return a.store.Get(ctx, id)
}

func (a *approvalDesk) Decide(ctx context.Context, id string, d approvals.Decision) (approvals.Approval, error) {
	d.AllowSelf = !a.fourEyes
	ap, err := a.store.Decide(ctx, id, d)
	if a.aud != nil && (err == nil || !errors.Is(err, approvals.ErrNotFound)) {
		a.aud.decided("admin", d, id, ap.Capability, err)
	}
	if err == nil {
		a.log.Info("held call decided", "approval_id", ap.ID, "status", string(ap.Status), "by", ap.DecidedBy)
		// The loop announces the decision (as it does one made through the
		// CLI, which has no bus) and runs an approved call: now, not at the
		// next poll.
		a.kick()
	}
	return ap, err
}

func (a *approvalDesk) Hold(ctx context.Context, h dispatch.Held) (dispatch.Holding, error) {
	ap, err := a.store.Create(ctx, approvals.Request{
		TokenLabel: h.Principal.Token, Role: h.Principal.Role, Scope: string(h.Principal.Scope), UserID: h.Principal.UserID,
		Capability: h.Capability, Args: h.Args, Sensitive: h.Sensitive, Risk: h.Risk, TTL: a.ttl, MaxPending: a.maxPending,
	})
	if errors.Is(err, approvals.ErrTooManyPending) {
		return dispatch.Holding{}, &dispatch.Refusal{Reason: err.Error() +
			" (approvals.max_pending); nothing was held: wait for a decision on those, or for them to expire"}
	}
	if err != nil {
		return dispatch.Holding{}, err
	}
	if ap.Joined {
		// The same call is already waiting: its request stands for both.
		a.log.Info("call joined its pending request", "approval_id", ap.ID, "capability", ap.Capability, "token", ap.TokenLabel, "user", ap.UserID)
	} else {
		a.publish(ctx, "approval.requested", ap)
		a.log.Info("call held for approval", "approval_id", ap.ID, "capability", ap.Capability, "risk", string(ap.Risk),
			"token", ap.TokenLabel, "user", ap.UserID, "expires_at", ap.ExpiresAt)
	}
	res, err := json.Marshal(dispatch.Pending{
		Status: dispatch.PendingStatus, ApprovalID: ap.ID, ExpiresAt: ap.ExpiresAt.Format(time.RFC3339),
		Message: fmt.Sprintf("%s is %s: it has not run. It runs once, as you, if a human approver approves it before %s; until then nothing happens.",
			ap.Capability, ap.Risk, ap.ExpiresAt.Format(time.RFC3339)),
	})
	return dispatch.Holding{ApprovalID: ap.ID, Result: res}, err
}

// openConfirmer is the gate's in-band confirmation: questions sealed with
// approvals.confirm_key, or with the key the approvals database keeps,
// and answered once across every replica sharing it.
func openConfirmer(ctx context.Context, cfg *config.Config, store *approvals.Store) (*confirm.Sealer, error) {
	key := []byte(cfg.Approvals.ConfirmKey)
	if len(key) == 0 {
		var err error
		if key, err = store.ConfirmKey(ctx); err != nil {
			return nil, fmt.Errorf("database.dsn: approvals: %w", err)
		}
	}
	ttl := cfg.Approvals.ConfirmTTL
	if ttl == 0 {
		ttl = confirm.DefaultTTL
	}
	s, err := confirm.New(key, ttl, store)
	if err != nil {
		return nil, fmt.Errorf("approvals.confirm_key: %w", err)
	}
	return s, nil
}

// publish puts an approval event on the bus, owned by the asker. A bus
// that fails loses the event, not the request: approvals.get still has it.
func (a *approvalDesk) publish(ctx context.Context, typ string, ap approvals.Approval) {
	if a.bus == nil {
		return
	}
	data, _ := json.Marshal(map[string]string{"capability": ap.Capability, "risk": string(ap.Risk), "status": string(ap.Status)})
	if _, err := a.bus.Publish(context.WithoutCancel(ctx), events.Event{Type: typ, Entity: "approval", ID: ap.ID, UserID: ap.UserID, Data: data}); err != nil {
		a.log.Warn("approvals: an event could not be published", "event", typ, "approval_id", ap.ID, "err", err)
	}
}

// start runs the desk's loop until close: approved calls, then sweeps.
func (a *approvalDesk) start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stop, a.done = cancel, make(chan struct{})
	go func() {
		defer close(a.done)
		poll, sweep := time.NewTicker(approvalPoll), time.NewTicker(approvalSweep)
		defer poll.Stop()
		defer sweep.Stop()
		a.sweep(ctx)
		for {
			a.announce(ctx)
			a.runApproved(ctx)
			select {
			case <-ctx.Done():
				return
			case <-a.wake:
			case <-poll.C:
			case <-sweep.C:
				a.sweep(ctx)
			}
		}
	}()
}

// kick makes the loop look for approved calls now.
func (a *approvalDesk) kick() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *approvalDesk) sweep(ctx context.Context) {
	sw, err := a.store.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		a.log.Warn("approvals: sweep failed", "err", err)
	case sw.Lost > 0:
		a.log.Warn("approvals: approved calls whose host stopped while they ran are recorded failed, not run again", "calls", sw.Lost)
	}
}

// announceBatch bounds the decisions one pass of the loop announces.
const announceBatch = 100

// announce puts approval.decided on the bus for every decision not yet
// announced, wherever it was made, each once across replicas. Without a
// bus there is no one to tell, and decisions stay unannounced until a host
// with one comes.
func (a *approvalDesk) announce(ctx context.Context) {
	if a.bus == nil {
		return
	}
	ids, err := a.store.Unannounced(ctx, announceBatch)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("approvals: listing decisions to announce failed", "err", err)
		}
		return
	}
	for _, id := range ids {
		ap, taken, err := a.store.Announce(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("approvals: announcing a decision failed", "approval_id", id, "err", err)
			}
			continue
		}
		if !taken {
			continue // another replica announced it
		}
		// The event says the decision, however far the call has got since.
		decided := ap
		if ap.Status != approvals.Rejected {
			decided.Status = approvals.Approved
		}
		a.publish(ctx, "approval.decided", decided)
	}
}

// runApproved runs every approved call this replica takes.
func (a *approvalDesk) runApproved(ctx context.Context) {
	ids, err := a.store.ApprovedIDs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("approvals: listing approved calls failed", "err", err)
		}
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		ap, taken, err := a.store.Start(ctx, id)
		if err != nil {
			a.log.Warn("approvals: taking an approved call failed", "approval_id", id, "err", err)
			continue
		}
		if !taken {
			continue // another replica took it
		}
		// A run once begun finishes even when the host is stopping (close
		// waits for it), bounded as a request is.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), approvalRunTimeout)
		out := a.run(rctx, ap)
		rcancel()
		// Recorded even when the host is stopping: the call has run.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if _, err := a.store.Finish(fctx, ap.ID, out); err != nil {
			a.log.Error("approvals: the outcome of an approved call could not be recorded", "approval_id", ap.ID, "err", err)
		}
		cancel()
		a.log.Info("approved call ran", "approval_id", ap.ID, "capability", ap.Capability, "outcome", string(out.Kind))
	}
}

// run calls ap's capability through the whole gate, as its asker's token
// stands now, with the grant of exactly this call.
func (a *approvalDesk) run(ctx context.Context, ap approvals.Approval) approvals.Outcome {
	p, ok := a.principal(ap.TokenLabel)
	if !ok && a.oauth && strings.HasPrefix(ap.TokenLabel, auth.OAuthLabelPrefix) {
		// An access token cannot be looked up later as a configured token
		// can: the call runs as the principal the token made when it was
		// held, its role's permissions as they stand now, through every
		// step again.
		p, ok = dispatch.Principal{Role: ap.Role, Scope: dispatch.Scope(ap.Scope), UserID: ap.UserID, Token: ap.TokenLabel}, true
	}
	switch {
	case !ok && strings.HasPrefix(ap.TokenLabel, auth.OAuthLabelPrefix):
		return approvals.Outcome{Kind: approvals.OutcomeRefused, Message: fmt.Sprintf(
			"not run: it was asked with an OAuth access token (%s), and OAuth is no longer configured", ap.TokenLabel)}
	case !ok:
		return approvals.Outcome{Kind: approvals.OutcomeRefused, Message: fmt.Sprintf(
			"not run: the token %q that asked for it is no longer configured", ap.TokenLabel)}
	case p.UserID != ap.UserID:
		return approvals.Outcome{Kind: approvals.OutcomeRefused, Message: fmt.Sprintf(
			"not run: the token %q now acts for another user than the one who asked", ap.TokenLabel)}
	}
	ctx = dispatch.WithOrigin(ctx, dispatch.Origin{Protocol: "approval", RequestID: ap.ID})
	ctx = dispatch.WithGrant(ctx, dispatch.Grant{ApprovalID: ap.ID, Token: p.Token, UserID: p.UserID, Capability: ap.Capability, ArgsSHA256: ap.ArgsSHA256})
	res, err := a.gate.Invoke(ctx, p, ap.Capability, ap.Args)
	var (
		refusal *dispatch.Refusal
		te      *dispatch.ToolError
		ie      *dispatch.InternalError
	)
	switch {
	case err == nil:
		return approvals.Outcome{Kind: approvals.OutcomeResult, Result: res}
	case errors.As(err, &refusal):
		return approvals.Outcome{Kind: approvals.OutcomeRefused, Message: fmt.Sprintf("refused at step %s: %s", refusal.Step, refusal.Reason)}
	case errors.As(err, &te):
		return approvals.Outcome{Kind: approvals.OutcomeToolError, Message: te.Message}
	case errors.As(err, &ie):
		return approvals.Outcome{Kind: approvals.OutcomeFailed, Message: "internal error (reference " + ie.Ref + ")"}
	}
	a.log.Error("approvals: an approved call failed", "approval_id", ap.ID, "capability", ap.Capability, "err", err)
	return approvals.Outcome{Kind: approvals.OutcomeFailed, Message: "internal error: " + ap.Capability + " failed"}
}

// close stops the loop and waits for a run in progress to finish.
func (a *approvalDesk) close() {
	a.once.Do(func() {
		if a.stop != nil {
			a.stop()
			<-a.done
		}
	})
}
