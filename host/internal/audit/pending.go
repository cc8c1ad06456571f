package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Pending records: an action's record is made durable before the action
// runs, so that no action runs without one, even if the host stops while
// it runs. The writer keeps it in audit_pending (Writer.Admit, a group
// commit); the record of the outcome replaces it in one transaction
// (Writer.Settle); one left behind by a host that stopped is appended,
// with OutcomeInterrupted, once it is older than the writer's
// PendingGrace.

// OutcomeInterrupted: the call was admitted and its record kept before it
// ran, and no outcome followed within the writer's PendingGrace: the host
// stopped while it ran, or it ran longer than that (its own record, with
// the same ID, then follows).
const OutcomeInterrupted Outcome = "interrupted"

// interruptedReason is what a pending record says once it is appended.
const interruptedReason = "no outcome was recorded: the host stopped while the call ran, or it ran longer than the pending grace"

// pendingStore is a Store that keeps pending records.
type pendingStore interface {
	// keepPending stores rs, bounded, in one transaction.
	keepPending(ctx context.Context, rs []Record) error
	// appendSettled stores blocks as appendBlocks does and deletes the
	// pending records named by settled in the same transaction.
	appendSettled(ctx context.Context, bs []*builder, settled []string) error
	// recoverPending appends, as interrupted, up to limit pending records
	// older than before and deletes them, in one transaction; it returns
	// how many.
	recoverPending(ctx context.Context, before time.Time, limit int) (int, error)
}

var _ pendingStore = (*sqlStore)(nil)

func (s *sqlStore) keepPending(ctx context.Context, rs []Record) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO audit_pending (id, at, body) VALUES ($1, $2, $3)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for i := range rs {
			body, err := json.Marshal(&rs[i])
			if err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, rs[i].ID, s.d.time(rs[i].Time), body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("keep %d pending audit records: %w", len(rs), err)
	}
	return nil
}

func (s *sqlStore) appendSettled(ctx context.Context, bs []*builder, settled []string) error {
	if len(settled) == 0 {
		return s.appendBlocks(ctx, bs)
	}
	return s.appendBlocksThen(ctx, bs, func(tx *sql.Tx) error { return deletePending(ctx, tx, settled) })
}

func deletePending(ctx context.Context, tx *sql.Tx, ids []string) error {
	stmt, err := tx.PrepareContext(ctx, `DELETE FROM audit_pending WHERE id = $1`)
	if err != nil {
		return fmt.Errorf("settle pending audit records: %w", err)
	}
	defer stmt.Close()
	for _, id := range ids {
		if _, err := stmt.ExecContext(ctx, id); err != nil {
			return fmt.Errorf("settle pending audit records: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) recoverPending(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, body FROM audit_pending WHERE at < $1 ORDER BY at LIMIT $2`+s.d.skipLocked,
			s.d.time(before), limit)
		if err != nil {
			return err
		}
		var (
			ids []string
			rs  []Record
		)
		for rows.Next() {
			var (
				id   string
				body []byte
				r    Record
			)
			if err := rows.Scan(&id, &body); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			if json.Unmarshal(body, &r) != nil || r.Capability == "" {
				// Unreadable: keep what is known, that an action of unknown
				// name was admitted under this ID.
				r = Record{ID: id, Time: before, Capability: "capgate.unreadable_pending"}
			}
			r.Decision, r.Step, r.Outcome, r.Reason = Admitted, "", OutcomeInterrupted, interruptedReason
			r.ErrorCode, r.ErrorRef = "", ""
			rs = append(rs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(rs) == 0 {
			return nil
		}
		prepared, err := prepare(rs, s.now)
		if err != nil {
			return err
		}
		n = len(prepared)
		return s.appendInTx(ctx, tx, blocksOf(prepared), func(tx *sql.Tx) error { return deletePending(ctx, tx, ids) })
	})
	if err != nil {
		return 0, fmt.Errorf("recover pending audit records: %w", err)
	}
	return n, nil
}
