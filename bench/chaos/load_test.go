//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// op is what one load call did.
type op string

const (
	opAvail   op = "booking.availability"
	opList    op = "booking.list"
	opCreate  op = "booking.create"
	opCancel  op = "booking.cancel" // held for approval: risk review_required
	opApprove op = "approve"        // POST /api/v1/admin/approvals/ID/approve
)

// record is one call the load made.
type record struct {
	scenario string
	replica  string
	op       op
	outcome
	booking  string // an acknowledged create's booking
	approval string // an acknowledged cancel's approval
}

// load is steady traffic from a few workers over both replicas: each
// worker books slots of a resource of its own (so creates never race one
// another), reads availability and its bookings, and asks to cancel what it
// booked. Every call is recorded with the scenario it ran in.
type load struct {
	c        *client
	replicas []*replica

	mu       sync.Mutex
	scenario string
	records  []record
}

func (l *load) setScenario(s string) {
	l.mu.Lock()
	l.scenario = s
	l.mu.Unlock()
}

func (l *load) add(r record) {
	l.mu.Lock()
	r.scenario = l.scenario
	l.records = append(l.records, r)
	l.mu.Unlock()
}

func (l *load) snapshot() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]record(nil), l.records...)
}

// run starts one worker per resource until ctx ends; wait returns once
// they have.
func (l *load) run(ctx context.Context, resources []string, pause time.Duration) (wait func()) {
	var wg sync.WaitGroup
	for i, res := range resources {
		token := []string{tokenAlice, tokenBob}[i%2]
		wg.Go(func() { l.worker(ctx, i, token, res, pause) })
	}
	return wg.Wait
}

func (l *load) worker(ctx context.Context, w int, token, resource string, pause time.Duration) {
	day := 1
	var free []string
	var booked, pending []string
	for n := 0; ctx.Err() == nil; n++ {
		r := l.replicas[(n+w)%len(l.replicas)]
		switch {
		case n%6 == 5:
			o := l.c.call(r, token, string(opList), map[string]any{})
			l.add(record{replica: r.name, op: opList, outcome: o})
		case n%6 == 4 && len(pending) > 0:
			// Approved, so that held calls never pile up to the
			// per-user bound on waiting calls.
			id := pending[0]
			o := l.c.approve(r, id)
			if o.ok() {
				pending = pending[1:]
			}
			l.add(record{replica: r.name, op: opApprove, outcome: o})
		case n%6 == 3 && len(booked) > 0 && len(pending) < 10:
			id := booked[0]
			booked = booked[1:]
			o := l.c.call(r, token, string(opCancel), map[string]any{"id": id})
			rec := record{replica: r.name, op: opCancel, outcome: o}
			if o.ok() {
				var held struct {
					Status     string `json:"status"`
					ApprovalID string `json:"approval_id"`
				}
				if json.Unmarshal(o.structured, &held) != nil || held.Status != "pending_approval" || held.ApprovalID == "" {
					rec.err = "cancel answered without a pending approval: " + string(o.structured)
				}
				rec.approval = held.ApprovalID
				if held.ApprovalID != "" {
					pending = append(pending, held.ApprovalID)
				}
			}
			l.add(rec)
		case len(free) == 0:
			date := time.Now().UTC().Add(time.Duration(day) * 24 * time.Hour).Format(time.DateOnly)
			o := l.c.call(r, token, string(opAvail), map[string]any{"resource_id": resource, "date": date})
			l.add(record{replica: r.name, op: opAvail, outcome: o})
			if o.ok() {
				var av struct {
					FreeSlots []struct {
						Start string `json:"start"`
					} `json:"free_slots"`
				}
				_ = json.Unmarshal(o.structured, &av)
				for _, s := range av.FreeSlots {
					free = append(free, s.Start)
				}
				day++
			}
		default:
			slot := free[0]
			o := l.c.call(r, token, string(opCreate), map[string]any{"resource_id": resource, "start": slot})
			rec := record{replica: r.name, op: opCreate, outcome: o}
			if o.ok() {
				var b struct {
					ID string `json:"id"`
				}
				if json.Unmarshal(o.structured, &b) != nil || b.ID == "" {
					rec.err = "create answered without a booking id: " + string(o.structured)
				}
				rec.booking = b.ID
				booked = append(booked, b.ID)
			}
			// A slot is tried once: a create that failed may still have
			// booked it, and the next availability tells.
			free = free[1:]
			l.add(rec)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}
