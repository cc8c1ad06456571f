package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/registry"
)

// DefaultMaxPending is Request.MaxPending when it is 0.
const DefaultMaxPending = 20

// Request is a call the gate held.
type Request struct {
	// TokenLabel, Role, Scope and UserID are the principal who called.
	TokenLabel, Role, Scope, UserID string
	Capability                      string
	// Args are the arguments exactly as the caller sent them.
	Args []byte
	// Sensitive are the argument paths the capability marks sensitive
	// (registry.Entry.Sensitive): their values are redacted in the copy
	// every view shows.
	Sensitive [][]string
	Risk      registry.Risk
	// TTL is how long the request waits for a decision.
	TTL time.Duration
	// MaxPending is the most requests UserID may have pending at once
	// (DefaultMaxPending when 0); Create refuses one more with
	// ErrTooManyPending.
	MaxPending int
}

func (r Request) validate() error {
	for _, f := range []struct{ name, v string }{{"token label", r.TokenLabel}, {"role", r.Role}, {"scope", r.Scope}, {"user id", r.UserID}, {"capability", r.Capability}} {
		if len(f.v) > MaxField || !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is over %d bytes or not UTF-8", ErrInvalid, f.name, MaxField)
		}
	}
	switch {
	case r.Capability == "":
		return fmt.Errorf("%w: no capability", ErrInvalid)
	case r.UserID == "":
		return fmt.Errorf("%w: %s: no user: only an action bound to a user is held", ErrInvalid, r.Capability)
	case r.Risk != registry.RiskReviewRequired && r.Risk != registry.RiskDangerous:
		return fmt.Errorf("%w: %s: risk %q is not one that waits for a human", ErrInvalid, r.Capability, r.Risk)
	case len(r.Args) > MaxArgs:
		return fmt.Errorf("%w: %s: arguments of %d bytes, over %d", ErrInvalid, r.Capability, len(r.Args), MaxArgs)
	case r.TTL < time.Second:
		return fmt.Errorf("%w: %s: a request must wait at least a second, not %v", ErrInvalid, r.Capability, r.TTL)
	case r.MaxPending < 0:
		return fmt.Errorf("%w: %s: at most %d pending requests", ErrInvalid, r.Capability, r.MaxPending)
	}
	return nil
}

// createAttempts bounds Create's tries: each lost race means another
// request was stored meanwhile, so a few are plenty.
const createAttempts = 8

// Create stores r as a pending request, or returns the pending request of
// the same token, user and capability with the same canonical arguments
// (Joined set), so that a call sent again waits as one request. A user
// already at r.MaxPending pending requests gets ErrTooManyPending. Both
// hold across replicas: each pending request takes a slot below the cap
// and a call key, both unique among pending requests, so of two racing
// inserts the database refuses one, which then tries again.
func (s *Store) Create(ctx context.Context, r Request) (Approval, error) {
	if err := r.validate(); err != nil {
		return Approval{}, fmt.Errorf("create approval request: %w", err)
	}
	limit := r.MaxPending
	if limit == 0 {
		limit = DefaultMaxPending
	}
	key := canonicalKey(r.Args)
	now := s.clock()
	// A lapsed request still pending holds its slot and its key until a
	// sweep: settle the asker's now.
	if _, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'expired', args = NULL
		WHERE user_id = $1 AND status = 'pending' AND expires_at <= $2`, r.UserID, s.time(now)); err != nil {
		return Approval{}, fmt.Errorf("create approval request for %s: %w", r.Capability, err)
	}
	a := Approval{
		TokenLabel: r.TokenLabel, Role: r.Role, Scope: r.Scope, UserID: r.UserID,
		Capability: r.Capability, Args: append([]byte(nil), r.Args...), ArgsSHA256: sha256.Sum256(r.Args),
		Shown: audit.Redact(r.Args, r.Sensitive, MaxArgs),
		Risk:  r.Risk, Status: Pending, CreatedAt: now, ExpiresAt: now.Add(r.TTL.Truncate(time.Second)),
	}
	if a.Shown == nil {
		a.Shown = []byte{}
	}
	for range createAttempts {
		if same, err := s.pendingCall(ctx, r, key); err == nil {
			same.Joined = true
			return same, nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return Approval{}, fmt.Errorf("create approval request for %s: %w", r.Capability, err)
		}
		slot, n, err := s.freeSlot(ctx, r.UserID, limit)
		if err != nil {
			return Approval{}, fmt.Errorf("create approval request for %s: %w", r.Capability, err)
		}
		if slot < 0 {
			return Approval{}, fmt.Errorf("%w: user %q already has %d calls waiting for a human's decision, the most allowed at once is %d",
				ErrTooManyPending, clip(r.UserID), n, limit)
		}
		a.ID = newID()
		res, err := s.db.ExecContext(ctx, `INSERT INTO approvals
			(id, token_label, role, scope, user_id, capability, args, args_sha256, args_shown, args_key, pending_slot,
			 risk, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', $13, $14)
			ON CONFLICT DO NOTHING`,
			a.ID, a.TokenLabel, a.Role, a.Scope, a.UserID, a.Capability, a.Args, a.ArgsSHA256[:], a.Shown, key[:], slot,
			string(a.Risk), s.time(a.CreatedAt), s.time(a.ExpiresAt))
		if err != nil {
			return Approval{}, fmt.Errorf("create approval request for %s: %w", a.Capability, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return Approval{}, fmt.Errorf("create approval request for %s: %w", a.Capability, err)
		} else if n == 1 {
			return a, nil
		}
		// Another request took the slot, or the same call was stored
		// meanwhile: look again.
	}
	return Approval{}, fmt.Errorf("create approval request for %s: too many requests of user %q stored at once; try again", r.Capability, clip(r.UserID))
}

// pendingCall returns the unexpired pending request of r's token, user and
// capability with the canonical arguments key.
func (s *Store) pendingCall(ctx context.Context, r Request, key [32]byte) (Approval, error) {
	return s.scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM approvals
		WHERE token_label = $1 AND user_id = $2 AND capability = $3 AND args_key = $4 AND status = 'pending' AND expires_at > $5`,
		r.TokenLabel, r.UserID, r.Capability, key[:], s.time(s.clock())))
}

// freeSlot returns the lowest slot below limit no pending request of user
// holds, or -1 when all are taken, and how many are.
func (s *Store) freeSlot(ctx context.Context, user string, limit int) (slot, taken int, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT pending_slot FROM approvals
		WHERE user_id = $1 AND status = 'pending' AND pending_slot IS NOT NULL`, user)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	used := make(map[int]bool)
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return 0, 0, err
		}
		used[n] = true
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	for i := range limit {
		if !used[i] {
			return i, len(used), nil
		}
	}
	return -1, len(used), nil
}

// canonicalKey is the SHA-256 of args re-encoded canonically (members
// sorted, no space, numbers as written), so that one call sent twice
// with its members in another order or spacing is one request. Arguments
// that do not decode (the gate holds none such) key as their bytes.
func canonicalKey(args []byte) [32]byte {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return sha256.Sum256(args)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return sha256.Sum256(args)
	}
	return sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}
