package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/registry"
)

// Refusals that tell nothing: a capability whose pack is off, or that the
// operator switched off, is invisible and un-callable, so a call to it by
// name answers exactly as a call to a name no plugin provides. The audit
// trail still records the real step. docs/security.md has the whole
// matrix.

// hiddenRefusal is a refusal the caller must not be able to tell from an
// unknown name. It unwraps to ErrUnknownCapability only, so an adapter that
// looks for a *Refusal does not find one and answers "unknown"; the audit
// step (classify) records the refusal inside.
type hiddenRefusal struct {
	name    string
	refusal *Refusal
}

func (h *hiddenRefusal) Error() string { return fmt.Sprintf("%v %q", ErrUnknownCapability, h.name) }

func (h *hiddenRefusal) Unwrap() error { return ErrUnknownCapability }

// hides reports whether r is a refusal an unknown name must stand for:
// the capability's pack is off, or the operator disabled it by name.
// Scope, permission, user binding, blocked risk and the global kill switch
// keep their step: the design tells a caller why it may not.
func hides(pol *compiledPolicy, r *Refusal) bool {
	return r.Step == StepPack || (r.Step == StepKillSwitch && pol.disabled[r.Capability])
}

// unseenBucket names each token's bucket for calls to names it cannot see
// (unknown or hidden). No capability can be named so (registry.ValidName),
// and one bucket for all such names keeps a caller inventing names from
// making buckets.
const unseenBucket = "?"

// unseen answers a call to a name the caller cannot see: r is the real
// refusal of a hidden capability, nil for an unknown name. The call is
// counted against the token's limits first, as an unknown name would be,
// so a flood of such calls is throttled at the caller's own limit.
func (d *Dispatcher) unseen(ctx context.Context, pol *compiledPolicy, p Principal, name string, r *Refusal) error {
	if lr, err := d.chargeUnseen(ctx, pol, p, name); err != nil {
		return err
	} else if lr != nil && !counterDown(lr) {
		return lr
	}
	if r == nil {
		return fmt.Errorf("%w %q", ErrUnknownCapability, name)
	}
	return &hiddenRefusal{name: name, refusal: r}
}

// refusedAt answers a call an argument-independent step refused: the call
// still costs the token its share of the limits, so refusals cannot be
// sent for free; once the limit is reached the caller learns that instead.
func (d *Dispatcher) refusedAt(ctx context.Context, pol *compiledPolicy, p Principal, e *registry.Entry, r *Refusal) error {
	if hides(pol, r) {
		return d.unseen(ctx, pol, p, e.Name, r)
	}
	if lr, err := d.limit(ctx, pol, p, e.Name); err != nil {
		return err
	} else if lr != nil && !counterDown(lr) {
		return lr
	}
	return r
}

// counterDown reports whether r is the rate-limit step's refusal for a
// count it could not keep. A call refused anyway keeps its own answer:
// the kill switch must say kill_switch while the counter is away.
func counterDown(r *Refusal) bool { return r.Step == StepRateLimit && r.RetryAfter == 0 }

// chargeUnseen counts a call to a name p cannot see: in p's one bucket
// for all such names, then in its overall one.
func (d *Dispatcher) chargeUnseen(ctx context.Context, pol *compiledPolicy, p Principal, name string) (*Refusal, error) {
	return d.charge(ctx, pol, p, name, LimitKey{Token: p.Token, Capability: unseenBucket}, pol.limits.forUnseen(p))
}

// charge takes one call from the per-capability bucket key under rate
// (when set), then from the token's overall bucket, as limit does for a
// capability the caller can see.
func (d *Dispatcher) charge(ctx context.Context, pol *compiledPolicy, p Principal, name string, key LimitKey, rate Rate) (*Refusal, error) {
	if d.limiter == nil || pol.limits.IsZero() {
		return nil, nil
	}
	if !rate.IsZero() {
		if r, err := d.take(ctx, key, rate, name, perUnseen); r != nil || err != nil {
			return r, err
		}
	}
	if !pol.limits.PerToken.IsZero() {
		return d.take(ctx, LimitKey{Token: p.Token}, pol.limits.PerToken, name, perToken)
	}
	return nil, nil
}

// forUnseen is the rate for p's calls to names it cannot see: its role's,
// or the default. A capability's own rate is not used: it would tell a
// hidden capability from an unknown name.
func (l Limits) forUnseen(p Principal) Rate {
	if r, ok := l.Roles[p.Role]; ok {
		return r
	}
	return l.Default
}

// maskedOwnership is an ownership refusal answered as a missing target
// (Policy.OwnershipAsMissing): the caller gets the tool error it unwraps
// to, the audit step records the refusal.
type maskedOwnership struct {
	refusal *Refusal
	missing *ToolError
}

func (m *maskedOwnership) Error() string { return m.missing.Message }

func (m *maskedOwnership) Unwrap() error { return m.missing }

// asMissing answers the outcomes of an owner-guarded call that tell
// whether its target exists, another user's and none at all, with one
// tool error, the same for both.
func asMissing(name string, err error) error {
	var (
		r  *Refusal
		te *ToolError
	)
	missing := &ToolError{Code: NotFound, Message: name + ": no such target for this token's user"}
	switch {
	case errors.As(err, &r) && r.Step == StepOwnership:
		return &maskedOwnership{refusal: r, missing: missing}
	case errors.As(err, &te) && te.Code == NotFound:
		return missing
	}
	return err
}
