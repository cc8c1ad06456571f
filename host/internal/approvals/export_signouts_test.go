package approvals

import (
	"context"
	"fmt"
)

// SignoutsLeft counts the sign-outs kept, for the tests of their purge.
func (s *Store) SignoutsLeft(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM console_signouts`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the console sign-outs: %w", err)
	}
	return n, nil
}
