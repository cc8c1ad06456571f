package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/capgate/capgate/internal/idempotency"
	"github.com/capgate/capgate/internal/registry"
)

// MetaIdempotencyKey is the _meta field (MCP) an action's idempotency key
// travels in.
const MetaIdempotencyKey = "io.capgate/idempotency-key"

type idempotencyKey struct{}

// WithIdempotencyKey returns ctx carrying the caller's idempotency key for
// the call Invoke makes with it. An empty key is none.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, idempotencyKey{}, key)
}

func idempotencyKeyOf(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// Idempotency makes repeated actions run once: an action called with a
// key, repeated by the same user with the same key and arguments within
// Retention, answers the first call's outcome and runs nothing.
type Idempotency struct {
	Store *idempotency.Store
	// Lease is how long a call's claim of its key holds while its outcome
	// is unknown: longer than the longest call, so a repeat while the
	// first still runs is told to wait rather than run it again.
	Lease time.Duration
	// Retention is how long an outcome is replayed.
	Retention time.Duration
	// Logger receives takeovers of lapsed claims and store failures.
	Logger *slog.Logger
}

// UseIdempotency makes d honour idempotency keys on actions. Set it before
// d serves.
func (d *Dispatcher) UseIdempotency(i Idempotency) {
	if i.Logger == nil {
		i.Logger = slog.Default()
	}
	d.idem = &i
}

// settleTimeout bounds recording an outcome, which must happen even when
// the caller has gone away.
const settleTimeout = 5 * time.Second

// idempotent runs e once per (user, key): the step after the checks that
// do not depend on the target, and before ownership, so a replay still
// needs every permission the first call needed, yet an outcome that
// changed the target (a cancelled booking) is replayed rather than
// re-checked against the changed state.
func (d *Dispatcher) idempotent(ctx context.Context, e *registry.Entry, r Request, key string) (json.RawMessage, error) {
	p, args := r.Principal, r.Args
	if err := idempotency.ValidateKey(key); err != nil {
		return nil, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("_meta %q: %s; nothing ran", MetaIdempotencyKey, unwrapInvalid(err))}
	}
	fp, err := idempotency.FingerprintOf(e.Name, args)
	if err != nil {
		return nil, fmt.Errorf("fingerprint of %s: %w", e.Name, err)
	}
	req := idempotency.Request{UserID: p.UserID, Key: key, Capability: e.Name, Fingerprint: fp}
	claim, err := d.idem.Store.Claim(ctx, req, d.idem.Lease, d.idem.Retention)
	if err != nil {
		if errors.Is(err, idempotency.ErrInvalid) {
			return nil, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("%s; nothing ran", unwrapInvalid(err))}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d.idem.Logger.Warn("idempotency store failed; refusing the action", "capability", e.Name, "err", err)
		return nil, &ToolError{Code: Unavailable, Message: fmt.Sprintf(
			"%s did not run: the store of idempotency keys is not reachable right now; retry with the same key", e.Name)}
	}
	switch claim.Status {
	case idempotency.Replay:
		return replay(claim.Outcome)
	case idempotency.InProgress:
		return nil, &ToolError{Code: Unavailable, Message: fmt.Sprintf(
			"a call of %s with this idempotency key is still running or its outcome is not known yet; nothing ran now: retry with the same key after %s",
			e.Name, claim.LeaseUntil.UTC().Format(time.RFC3339))}
	case idempotency.Mismatch:
		what := "other arguments"
		if claim.Differs == idempotency.DiffersCapability {
			what = "another capability (" + claim.Capability + ")"
		}
		return nil, &ToolError{Code: InvalidInput, Message: fmt.Sprintf(
			"this idempotency key was already used for %s; nothing ran: use a new key for a new call", what)}
	case idempotency.Claimed:
	default:
		return nil, fmt.Errorf("idempotency claim of %s: unknown status %v", e.Name, claim.Status)
	}
	if claim.Attempt > 1 {
		d.idem.Logger.Warn("an idempotency key's earlier attempt never recorded an outcome; running the action again",
			"capability", e.Name, "user", p.UserID, "attempt", claim.Attempt)
	}
	res, err := d.run(ctx, e, r)
	d.settle(ctx, claim.Ticket, e.Name, res, err)
	return res, err
}

// settle records what the claimed call did. A result and a tool error are
// its outcome, replayed from now on. A refusal or an Unavailable tool
// error ran nothing, so the key is freed for the retry. Anything else (a
// plugin that failed or died mid-call, a deadline, a caller that left)
// leaves the outcome unknown: the claim stays until its lease lapses, and
// a repeat meanwhile is told to wait rather than risk running twice.
func (d *Dispatcher) settle(ctx context.Context, t idempotency.Ticket, capability string, res json.RawMessage, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var (
		te      *ToolError
		refusal *Refusal
		ir      *InputRequired
		serr    error
	)
	switch {
	case err == nil:
		serr = d.idem.Store.Complete(ctx, t, idempotency.Outcome{Kind: idempotency.OutcomeResult, Result: res})
		if errors.Is(serr, idempotency.ErrOutcomeTooLarge) {
			serr = d.idem.Store.Complete(ctx, t, idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: uint8(InvalidInput),
				Message: fmt.Sprintf("%s ran, but its result was too large to keep for repeats of this idempotency key", capability)})
		}
	case errors.As(err, &te) && te.Code != Unavailable:
		serr = d.idem.Store.Complete(ctx, t, idempotency.Outcome{Kind: idempotency.OutcomeToolError, Code: uint8(te.Code), Message: te.Message})
	case errors.As(err, &te), errors.As(err, &refusal), errors.As(err, &ir):
		// Nothing ran, or it waits for its client's answers and runs
		// again with them under the same key.
		serr = d.idem.Store.Release(ctx, t)
	default:
		return
	}
	if serr != nil {
		d.idem.Logger.Warn("recording an idempotent call's outcome failed; a repeat waits for the claim's lease",
			"capability", capability, "err", serr)
	}
}

// replay is a stored outcome as Invoke returns it.
func replay(o idempotency.Outcome) (json.RawMessage, error) {
	if o.Kind == idempotency.OutcomeToolError {
		return nil, &ToolError{Code: ToolErrorCode(o.Code), Message: o.Message}
	}
	return o.Result, nil
}

// unwrapInvalid is the store's explanation without its sentinel's text.
func unwrapInvalid(err error) string {
	return strings.TrimPrefix(err.Error(), idempotency.ErrInvalid.Error()+": ")
}
