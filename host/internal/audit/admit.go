package audit

import (
	"context"
	"fmt"
	"time"
)

// admission is a pending record waiting for the admitter.
type admission struct {
	r    Record
	done chan error
}

// maxAdmitBatch bounds the pending records one transaction keeps.
const maxAdmitBatch = maxBlockRecords

// Admit keeps r, the record of a call about to run, durably before the
// call runs, and returns once the store has committed it: the records of
// calls admitted at once share one transaction (a group commit). The
// record is kept as OutcomeInterrupted until Settle replaces it with the
// call's outcome, so a host that stops while the call runs leaves it in
// the trail. It returns ErrClosed once Close has begun, ErrQueueFull
// while the trail is unhealthy (the gate then refuses the call), the
// store's error, or ctx's.
func (w *Writer) Admit(ctx context.Context, r Record) error {
	if _, ok := w.store.(pendingStore); !ok {
		return fmt.Errorf("audit admit: %w: the store keeps no pending records", ErrInvalid)
	}
	r.Decision, r.Step, r.Outcome, r.Reason = Admitted, "", OutcomeInterrupted, interruptedReason
	if err := r.validate(); err != nil {
		return fmt.Errorf("audit admit: %w", err)
	}
	if r.Time.IsZero() {
		r.Time = w.cfg.Now()
	}
	if r.ID == "" {
		r.ID = NewID(r.Time)
	}
	r.Seq = 0
	r.normalize()
	a := &admission{r: r, done: make(chan error, 1)}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return ErrClosed
	case !w.Healthy() || len(w.admits) >= w.cfg.QueueSize:
		w.mu.Unlock()
		return ErrQueueFull
	}
	w.admits = append(w.admits, a)
	w.mu.Unlock()
	select {
	case w.admitK <- struct{}{}:
	default:
	}
	select {
	case err := <-a.done:
		return err
	case <-ctx.Done():
		// It may still be kept: Settle, which the caller owes it either
		// way, removes it.
		return context.Cause(ctx)
	}
}

// Settle queues r, the record of a call whose pending record Admit kept
// under r.ID, to replace that one: it is appended and the pending record
// deleted in one transaction. It is written at once, never dropped for a
// full queue (its call has run), and returns ErrClosed once Close has
// begun: the pending record then stays, and becomes an interrupted one.
func (w *Writer) Settle(r Record) error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("audit settle: %w", err)
	}
	if r.ID == "" {
		return fmt.Errorf("audit settle: %w: the record has no ID to settle", ErrInvalid)
	}
	if r.Time.IsZero() {
		r.Time = w.cfg.Now()
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.enqueue(&r, r.ID)
	return nil
}

// admitter keeps pending records as Admit queues them, all those waiting
// in one transaction, until Close begins; those still waiting then get
// ErrClosed.
func (w *Writer) admitter() {
	defer close(w.admDone)
	ps := w.store.(pendingStore)
	for {
		select {
		case <-w.admitK:
		case <-w.closing:
			w.mu.Lock()
			left := w.admits
			w.admits = nil
			w.mu.Unlock()
			for _, a := range left {
				a.done <- ErrClosed
			}
			return
		}
		for {
			w.mu.Lock()
			n := min(len(w.admits), maxAdmitBatch)
			batch := w.admits[:n:n]
			w.admits = w.admits[n:]
			w.mu.Unlock()
			if n == 0 {
				break
			}
			rs := make([]Record, n)
			for i, a := range batch {
				rs[i] = a.r
			}
			ctx, cancel := context.WithTimeout(w.ctx, w.cfg.AppendTimeout)
			err := ps.keepPending(ctx, rs)
			cancel()
			if err != nil {
				w.failures.Add(1)
				w.cfg.Log.Error("audit store refused pending records; their calls are refused", "records", n, "err", err)
			} else {
				w.pending.Add(int64(n))
			}
			for _, a := range batch {
				a.done <- err
			}
		}
	}
}

// recoverLoop appends the pending records older than PendingGrace as
// interrupted, at start and every tenth of the grace, until Close begins.
func (w *Writer) recoverLoop() {
	defer close(w.recDone)
	ps := w.store.(pendingStore)
	tick := time.NewTicker(max(w.cfg.PendingGrace/10, time.Second))
	defer tick.Stop()
	for {
		for {
			n, err := ps.recoverPending(w.retCtx, w.cfg.Now().Add(-w.cfg.PendingGrace), maxBlockRecords)
			w.interrupted.Add(int64(n))
			if n > 0 {
				w.cfg.Log.Warn("audit: calls admitted with no outcome recorded, kept as interrupted", "records", n, "grace", w.cfg.PendingGrace)
			}
			if err != nil && w.retCtx.Err() == nil {
				w.cfg.Log.Error("audit: keeping interrupted calls failed; retrying later", "err", err)
			}
			if err != nil || n < maxBlockRecords {
				break
			}
		}
		select {
		case <-tick.C:
		case <-w.retCtx.Done():
			return
		}
	}
}
