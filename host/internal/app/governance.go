package app

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/switches"
	"github.com/capgate/capgate/internal/dispatch"
)

// governance composes the gate's policy from its two sources: the
// configuration file and the kill switch shared through the database. A
// change to either hands the gate one new policy at once.
type governance struct {
	gate     *dispatch.Dispatcher
	switches *switches.Store
	log      *slog.Logger
	aud      *auditor

	mu  sync.Mutex
	cfg *config.Config
	// off is the shared kill switch as last read.
	off switches.State
}

// policy is what the gate enforces: the file's, with actions off while
// either the file or the shared switch says so.
func (g *governance) policy() dispatch.Policy {
	p := g.cfg.Policy()
	p.ActionsOff = p.ActionsOff || g.off.ActionsOff
	return p
}

// switched applies a state of the shared switch read from the database.
func (g *governance) switched(st switches.State) {
	g.mu.Lock()
	defer g.mu.Unlock()
	was := g.off.ActionsOff
	g.off = st
	if err := g.gate.SetPolicy(g.policy()); err != nil {
		// The policy's other parts were accepted before; only a bug gets here.
		g.log.Error("kill switch: the gate refused the policy", "err", err)
		return
	}
	if was != st.ActionsOff {
		g.log.Warn("kill switch changed", "actions_off", st.ActionsOff, "by", st.ChangedBy, "at", st.ChangedAt)
	}
}

var _ server.Admin = (*governance)(nil)

// Actions reports whether actions are on, and why not when they are off.
func (g *governance) Actions() server.ActionsState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return server.ActionsState{
		Enabled: g.cfg.ActionsEnabled && !g.off.ActionsOff, Config: g.cfg.ActionsEnabled,
		Switch: !g.off.ActionsOff, ChangedAt: g.off.ChangedAt, ChangedBy: g.off.ChangedBy,
	}
}

// SetActions throws or releases the shared switch for every replica, and
// applies it here at once rather than at the next poll.
func (g *governance) SetActions(ctx context.Context, enabled bool, by string) (server.ActionsState, error) {
	st, err := g.switches.SetActionsOff(ctx, !enabled, by)
	what := "actions on"
	if !enabled {
		what = "actions off"
	}
	g.aud.event("capgate.actions", by, err, what)
	if err != nil {
		return server.ActionsState{}, fmt.Errorf("kill switch: %w", err)
	}
	g.switched(st)
	return g.Actions(), nil
}
