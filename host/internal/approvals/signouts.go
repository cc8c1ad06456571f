package approvals

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/sdk/sqlstore"
)

// The admin console's sessions are signed with SessionKey and live in
// cookies; a sign-out is recorded here, beside the key, so that every
// replica sharing the database refuses the signed-out cookie.

// EndSession records the console session id as signed out until
// expires, when the session would have ended anyway; recording it again
// changes nothing. Sign-outs already past their expiry are forgotten
// first, so the table holds only sessions that could still be used.
func (s *Store) EndSession(ctx context.Context, id string, expires time.Time) error {
	if err := checkSessionID(id); err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM console_signouts WHERE expires_at <= $1`, s.time(s.clock())); err != nil {
		return fmt.Errorf("forget lapsed console sign-outs: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `INSERT INTO console_signouts (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
		id, s.time(sqlstore.PGTime(expires))); err != nil {
		return fmt.Errorf("record the console sign-out: %w", err)
	}
	return nil
}

// SessionEnded says whether the console session id was signed out.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	if err := checkSessionID(id); err != nil {
		return false, err
	}
	var one int
	err := s.db.QueryRowContext(ctx, `SELECT 1 FROM console_signouts WHERE id = $1`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the console sign-outs: %w", err)
	}
	return true, nil
}

func checkSessionID(id string) error {
	if id == "" || len(id) > 64 || !utf8.ValidString(id) {
		return fmt.Errorf("%w: console session id of %d bytes", ErrInvalid, len(id))
	}
	return nil
}
