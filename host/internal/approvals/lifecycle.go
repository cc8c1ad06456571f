package approvals

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
)

// Decide approves or rejects the pending request id. Of deciders racing
// on one request, in any number of replicas, exactly one succeeds; the
// others get ErrDecided. A request past its expiry cannot be decided, nor
// one from the decider's own user (SameUser) unless d.AllowSelf. A decider
// bound to no user (d.ByUser empty) decides nothing: ErrUnboundDecider. A
// rejection clears the raw arguments in the same statement.
func (s *Store) Decide(ctx context.Context, id string, d Decision) (Approval, error) {
	if len(d.Reason) > MaxReason || !utf8.ValidString(d.Reason) || len(d.By) > MaxField || !utf8.ValidString(d.By) {
		return Approval{}, fmt.Errorf("%w: a reason is at most %d bytes of UTF-8", ErrInvalid, MaxReason)
	}
	if normalUser(d.ByUser) == "" {
		return Approval{}, fmt.Errorf("%w: %s is bound to none, so four eyes cannot tell them from the asker; decide as a token or session bound to a user",
			ErrUnboundDecider, quoteOr(d.By, "the decider"))
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if !d.AllowSelf && SameUser(d.ByUser, a.UserID) {
		return a, fmt.Errorf("%w: %s asked for by user %q", ErrSelfApproval, a.ID, a.UserID)
	}
	to, clear := Rejected, ", args = NULL"
	if d.Approve {
		to, clear = Approved, ""
	}
	now := s.clock()
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = $2, decided_by = $3, decided_at = $4, reason = $5`+clear+`
		WHERE id = $1 AND status = 'pending' AND expires_at > $4`,
		a.ID, string(to), d.By, s.time(now), nullIfEmpty(d.Reason))
	if err != nil {
		return Approval{}, fmt.Errorf("decide approval request %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err != nil {
			return Approval{}, fmt.Errorf("decide approval request %s: %w", a.ID, err)
		}
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return Approval{}, gerr
		}
		return cur, fmt.Errorf("%w: %s is %s", ErrDecided, cur.ID, cur.Status)
	}
	return s.Get(ctx, id)
}

// SameUser reports whether two user ids name one user, as four eyes
// compares them: spaces around them aside, and whatever their case
// (Unicode case folding), so that "Alice" cannot decide alice's call.
func SameUser(a, b string) bool {
	return normalUser(a) != "" && strings.EqualFold(normalUser(a), normalUser(b))
}

func normalUser(u string) string { return strings.TrimSpace(u) }

// quoteOr is s quoted, or or when s is empty.
func quoteOr(s, or string) string {
	if s == "" {
		return or
	}
	return fmt.Sprintf("%q", clip(s))
}

// CountByStatus counts the requests by status, as Get reads them: a
// pending request past its expiry counts as expired.
func (s *Store) CountByStatus(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT CASE WHEN status = 'pending' AND expires_at <= $1 THEN 'expired' ELSE status END, count(*)
		FROM approvals GROUP BY 1`, s.time(s.clock()))
	if err != nil {
		return nil, fmt.Errorf("count approval requests: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count approval requests: %w", err)
		}
		out[status] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count approval requests: %w", err)
	}
	return out, nil
}

// Unannounced lists, oldest decision first, up to limit requests decided
// but not yet announced (Announce).
func (s *Store) Unannounced(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM approvals WHERE announced_at IS NULL AND decided_at IS NOT NULL
		ORDER BY decided_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list unannounced decisions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list unannounced decisions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unannounced decisions: %w", err)
	}
	return ids, nil
}

// Announce takes the decision on request id to announce it, and reports
// whether this caller took it: of any number racing, in any replicas, one
// does, so a decision is announced once wherever it was made. The taker
// announces it; one that stops first leaves it unannounced, never twice.
func (s *Store) Announce(ctx context.Context, id string) (Approval, bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET announced_at = $2
		WHERE id = $1 AND announced_at IS NULL AND decided_at IS NOT NULL`, id, s.time(s.clock()))
	if err != nil {
		return Approval{}, false, fmt.Errorf("announce decision on %s: %w", clip(id), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("announce decision on %s: %w", clip(id), err)
	}
	if n != 1 {
		return Approval{}, false, nil
	}
	a, err := s.Get(ctx, id)
	return a, err == nil, err
}

// Start takes the approved request id to run it, and reports whether this
// caller took it: of any number racing, in any replicas, one does. The
// taker runs the call and records what came of it with Finish.
func (s *Store) Start(ctx context.Context, id string) (Approval, bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'running', started_at = $2
		WHERE id = $1 AND status = 'approved'`, id, s.time(s.clock()))
	if err != nil {
		return Approval{}, false, fmt.Errorf("start approved request %s: %w", clip(id), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("start approved request %s: %w", clip(id), err)
	}
	a, err := s.Get(ctx, id)
	return a, n == 1 && err == nil, err
}

// Finish records the outcome of the run Start took.
func (s *Store) Finish(ctx context.Context, id string, o Outcome) (Approval, error) {
	var payload []byte
	switch o.Kind {
	case OutcomeResult:
		payload = o.Result
	case OutcomeToolError, OutcomeRefused, OutcomeFailed:
		payload = []byte(o.Message)
	default:
		return Approval{}, fmt.Errorf("%w: outcome kind %q", ErrInvalid, o.Kind)
	}
	if payload == nil {
		payload = []byte{}
	}
	// The call has run: its raw arguments go in the same statement.
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'done', finished_at = $2, outcome_kind = $3, outcome = $4, args = NULL
		WHERE id = $1 AND status = 'running'`, id, s.time(s.clock()), string(o.Kind), payload)
	if err != nil {
		return Approval{}, fmt.Errorf("finish approved request %s: %w", clip(id), err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return Approval{}, fmt.Errorf("finish approved request %s: %w: it is not running", clip(id), ErrDecided)
	}
	return s.Get(ctx, id)
}

// Swept is what one Sweep changed.
type Swept struct {
	Expired int64 // pending requests past their expiry, now expired
	// Lost are runs older than Lease that never finished: their host
	// stopped mid-call, so whether the call took effect is unknown. They
	// are done with a failed outcome saying so, never run again.
	Lost int64
	// Confirmations are answered in-band confirmations past their expiry,
	// forgotten.
	Confirmations int64
}

// Sweep settles the requests time has decided. Replicas may sweep at
// once: each change is one statement.
func (s *Store) Sweep(ctx context.Context) (Swept, error) {
	now := s.clock()
	var out Swept
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'expired', args = NULL
		WHERE status = 'pending' AND expires_at <= $1`, s.time(now))
	if err != nil {
		return out, fmt.Errorf("sweep approval requests: %w", err)
	}
	out.Expired, _ = res.RowsAffected()
	res, err = s.db.ExecContext(ctx, `UPDATE approvals SET status = 'done', finished_at = $1, outcome_kind = 'failed', outcome = $2, args = NULL
		WHERE status = 'running' AND started_at <= $3`,
		s.time(now), []byte(LostMessage), s.time(now.Add(-Lease)))
	if err != nil {
		return out, fmt.Errorf("sweep approval requests: %w", err)
	}
	out.Lost, _ = res.RowsAffected()
	// An answered confirmation past its expiry cannot be answered again
	// anyway: its seal says it lapsed.
	res, err = s.db.ExecContext(ctx, `DELETE FROM confirmations_answered WHERE expires_at <= $1`, s.time(now))
	if err != nil {
		return out, fmt.Errorf("sweep answered confirmations: %w", err)
	}
	out.Confirmations, _ = res.RowsAffected()
	return out, nil
}

// DecisionRecord is the audit record of a decision d on the request id,
// linked to the request's other records by its approval id: capability
// capgate.approval, by the decider, through protocol ("admin", "cli"). A
// decision that err refused is a refusal at step failed, saying why.
func DecisionRecord(protocol string, d Decision, id, capability string, err error) audit.Record {
	verb := "rejected"
	if d.Approve {
		verb = "approved"
	}
	what := verb
	if capability != "" {
		what += " " + capability
	}
	if d.Reason != "" {
		what += ": " + d.Reason
	}
	now := time.Now()
	r := audit.Record{ID: audit.NewID(now), Time: now, Capability: "capgate.approval", TokenLabel: d.By, UserID: d.ByUser,
		Protocol: protocol, Decision: audit.Admitted, Outcome: audit.OutcomeOK, Reason: what, ApprovalID: id}
	if err != nil {
		r.Decision, r.Outcome, r.Step, r.Reason = audit.Refused, "", "failed", "not "+verb+": "+err.Error()
	}
	return r
}

// LostMessage is the outcome of a run its host did not live to finish.
const LostMessage = "the host running this approved call stopped before it recorded the outcome; whether the call took effect is unknown, and it was not run again"

// ApprovedIDs lists the requests approved and not yet taken to run: after
// a restart, those whose host stopped between the decision and the run.
func (s *Store) ApprovedIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM approvals WHERE status = 'approved' ORDER BY decided_at, id LIMIT $1`, MaxLimit)
	if err != nil {
		return nil, fmt.Errorf("list approved requests: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list approved requests: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
