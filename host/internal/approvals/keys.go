package approvals

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// Use records the in-band confirmation id as answered until expires
// (confirm.Used): true for the first call to record it, in any process
// sharing the database, false for every later one.
func (s *Store) Use(ctx context.Context, id string, expires time.Time) (bool, error) {
	if id == "" || len(id) > 64 || !utf8.ValidString(id) {
		return false, fmt.Errorf("%w: confirmation id %q", ErrInvalid, id)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO confirmations_answered (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
		id, s.time(sqlstore.PGTime(expires)))
	if err != nil {
		return false, fmt.Errorf("record confirmation %s as answered: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record confirmation %s as answered: %w", id, err)
	}
	return n == 1, nil
}

// ConfirmKey returns the key that seals in-band confirmations when the
// configuration names none: made at random by the first store to ask,
// then the same for every store sharing the database, so a state one
// replica seals another opens.
func (s *Store) ConfirmKey(ctx context.Context) ([]byte, error) {
	return s.sharedKey(ctx, "confirm", "confirmation key")
}

// SessionKey returns the key that signs the admin console's session
// cookies, made and shared as ConfirmKey's is but a key of its own, so
// that neither signature can ever stand for the other: a session signed
// on one replica is good on every replica sharing the database.
func (s *Store) SessionKey(ctx context.Context) ([]byte, error) {
	return s.sharedKey(ctx, "console-session", "console session key")
}

// sharedKey returns the random key kept under name, made by the first
// store to ask; the insert that loses a race to make it changes nothing.
func (s *Store) sharedKey(ctx context.Context, name, what string) ([]byte, error) {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // crypto/rand.Read never fails
	if _, err := s.db.ExecContext(ctx, `INSERT INTO approval_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, fresh); err != nil {
		return nil, fmt.Errorf("make the %s: %w", what, err)
	}
	var key []byte
	if err := s.db.QueryRowContext(ctx, `SELECT key FROM approval_keys WHERE name = $1`, name).Scan(&key); err != nil {
		return nil, fmt.Errorf("read the %s: %w", what, err)
	}
	return key, nil
}
