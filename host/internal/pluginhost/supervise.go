package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/capgate/capgate/internal/pluginwire"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// State is where a plugin is in its life, as Health reports it.
type State string

const (
	// StateRunning: a process serves the plugin's calls.
	StateRunning State = "running"
	// StateRestarting: the process died and the supervisor is bringing up
	// another; calls fail at once as unavailable meanwhile.
	StateRestarting State = "restarting"
	// StateFailed: the plugin is down until capgate restarts, because it
	// kept dying (more restarts than its policy allows), came back with
	// other capabilities than it registered, or its policy says never
	// restart. Calls fail at once as unavailable.
	StateFailed State = "failed"
	// StateStopped: the host stopped it.
	StateStopped State = "stopped"
)

// Health is what the host knows of one plugin.
type Health struct {
	// Name is the operator's name for the plugin.
	Name  string
	State State
	// Since is when the plugin entered State.
	Since time.Time
	// PID is the current process's id; the dead one's while restarting.
	PID int
	// Restarts is how many times the plugin was restarted.
	Restarts int
	// DiedAt and Reason describe the last death; zero before any.
	DiedAt time.Time
	// Reason says how it died, e.g. "process exited: signal: killed".
	Reason string
	// NextAttempt is when the next restart is tried, while restarting.
	NextAttempt time.Time
	// Detail says why a failed plugin stays down.
	Detail string
}

// Alive reports whether a process serves the plugin's calls.
func (h Health) Alive() bool { return h.State == StateRunning }

// Health reports every plugin in start order. It is cheap: it reads state
// kept by the supervisors and calls no plugin.
func (h *Host) Health() []Health {
	out := make([]Health, len(h.plugins))
	for i, p := range h.plugins {
		out[i] = p.Health()
	}
	return out
}

// Health reports the plugin's state.
func (p *Plugin) Health() Health { return *p.state.Load() }

// setState changes a copy of the state and publishes it, so readers never
// see a half-made change.
func (p *Plugin) setState(change func(*Health)) {
	h := *p.state.Load()
	change(&h)
	p.state.Store(&h)
}

// How often the supervisor asks go-plugin whether the process has exited,
// in case the call stream outlives it; and how long it waits, once the
// stream has ended, for the process's exit status.
const (
	exitPoll     = time.Second
	exitStatusIn = 2 * time.Second
)

// supervise watches the plugin's process and restarts it when it dies,
// until the host stops the plugin or the restart policy gives up.
func (p *Plugin) supervise() {
	defer close(p.done)
	budget := newRestarts(p.spec.Restart)
	for {
		inst := p.cur.Load()
		reason, died := p.watch(inst)
		if !died {
			return
		}
		now := time.Now()
		delay, ok := budget.next(now)
		attrs := []any{"pid", inst.pid, "reason", reason}
		if !ok {
			detail := fmt.Sprintf("it died %d times within %s; %s", budget.inWindow()+1, p.spec.Restart.Window, p.spec.Restart)
			if p.spec.Restart.MaxRestarts <= 0 {
				detail = "its restart policy is never to restart it"
			}
			p.setState(func(s *Health) {
				s.State, s.Since, s.DiedAt, s.Reason, s.Detail = StateFailed, now, now, reason, detail
			})
			p.log.Error("plugin died and stays down until capgate restarts: "+detail, attrs...)
			return
		}
		p.setState(func(s *Health) {
			s.State, s.Since, s.DiedAt, s.Reason, s.NextAttempt = StateRestarting, now, now, reason, now.Add(delay)
		})
		p.log.Error("plugin died; restarting it", append(attrs, "in", delay.Round(time.Millisecond).String(),
			"restarts_in_window", budget.inWindow())...)
		if !p.restart(budget, delay) {
			return
		}
	}
}

// restart brings up a new process after delay, trying again with backoff
// while starting fails. It returns false when the plugin stays down: the
// host stopped it, the policy gave up, or the new process describes
// itself differently.
func (p *Plugin) restart(budget *restarts, delay time.Duration) bool {
	downSince := time.Now()
	for {
		select {
		case <-p.stop:
			return false
		case <-time.After(delay):
		}
		inst, err := p.relaunch()
		if err == nil {
			p.cur.Store(inst)
			now := time.Now()
			p.setState(func(s *Health) {
				s.State, s.Since, s.PID, s.NextAttempt = StateRunning, now, inst.pid, time.Time{}
				s.Restarts++
			})
			p.log.Info("plugin restarted", "pid", inst.pid, "down_for", now.Sub(downSince).Round(time.Millisecond).String(),
				"restarts", p.Health().Restarts)
			return true
		}
		if p.stopping.Load() {
			return false
		}
		var changed *describeChange
		if errors.As(err, &changed) {
			detail := "it came back with capabilities other than those it registered: " + changed.Error()
			p.setState(func(s *Health) { s.State, s.Since, s.Detail = StateFailed, time.Now(), detail })
			p.log.Error("plugin restarted with changed capabilities and stays down until capgate restarts", "changes", changed.Error())
			return false
		}
		var ok bool
		if delay, ok = budget.next(time.Now()); !ok {
			detail := fmt.Sprintf("it could not be restarted (%v); %s", err, p.spec.Restart)
			p.setState(func(s *Health) { s.State, s.Since, s.Detail = StateFailed, time.Now(), detail })
			p.log.Error("plugin could not be restarted and stays down until capgate restarts", "err", err)
			return false
		}
		p.setState(func(s *Health) { s.NextAttempt = time.Now().Add(delay) })
		p.log.Warn("plugin restart failed; trying again", "err", err, "in", delay.Round(time.Millisecond).String())
	}
}

// relaunch starts a new process and makes it what the first one was:
// configured the same, describing the same capabilities and entity types,
// and started when the host has started its plugins.
func (p *Plugin) relaunch() (*instance, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	inst, d, err := p.launch(ctx)
	if err != nil {
		return nil, err
	}
	if err := compareDescriptions(p.describe, d); err != nil {
		inst.kill()
		return nil, err
	}
	if p.started.Load() {
		sctx, scancel := context.WithTimeout(ctx, p.opts.StartTimeout)
		defer scancel()
		if _, err := inst.rpc.Start(sctx, &capgatev1.StartRequest{}); err != nil {
			inst.kill()
			return nil, fmt.Errorf("start: %s", pluginwire.StatusMessage(err))
		}
	}
	if p.stopping.Load() {
		inst.kill()
		return nil, errors.New("the host is stopping the plugin")
	}
	return inst, nil
}

// watch waits until inst dies or the host stops the plugin, and says how
// it died. A stop is no death: died is false.
func (p *Plugin) watch(inst *instance) (reason string, died bool) {
	tick := time.NewTicker(exitPoll)
	defer tick.Stop()
	for exited := false; !exited; {
		select {
		case <-p.stop:
			return "", false
		case <-inst.calls.Done():
			exited = true
		case <-tick.C:
			exited = inst.client.Exited()
		}
	}
	// The stream usually ends a moment before go-plugin has reaped the
	// process; wait briefly for its exit status.
	deadline := time.Now().Add(exitStatusIn)
	for !inst.client.Exited() && time.Now().Before(deadline) {
		select {
		case <-p.stop:
			return "", false
		case <-time.After(10 * time.Millisecond):
		}
	}
	if p.stopping.Load() {
		return "", false
	}
	if !inst.client.Exited() {
		// The process lives but its call stream broke (it sent a message
		// over the size limit, say): it serves nothing, so it goes.
		reason = inst.calls.Failure().Error()
		inst.kill()
		return reason, true
	}
	// go-plugin's Wait has returned (Exited takes the lock it sets exited
	// under), so ProcessState is set and no longer written.
	reason = "process exited"
	if ps := inst.cmd.ProcessState; ps != nil {
		reason += ": " + ps.String()
	}
	inst.kill() // closes the stream and the host service of the dead process
	return reason, true
}

// describeChange is a restarted plugin describing itself differently from
// what the host registered.
type describeChange struct{ changes []string }

func (c *describeChange) Error() string { return strings.Join(c.changes, "; ") }

// compareDescriptions lists what differs between the registered
// description and a restarted process's, or returns nil when the
// capabilities and entity types are the same. The version string may
// change: a rebuilt binary with the same capabilities serves the same
// calls.
func compareDescriptions(was, now *capgatev1.DescribeResponse) error {
	changes := diffNamed("capability", was.Capabilities, now.Capabilities, (*capgatev1.Capability).GetName)
	changes = append(changes, diffNamed("entity type", was.Entities, now.Entities, (*capgatev1.EntityType).GetName)...)
	changes = append(changes, diffNamed("resource", was.Resources, now.Resources, (*capgatev1.Resource).GetUri)...)
	changes = append(changes, diffNamed("resource template", was.ResourceTemplates, now.ResourceTemplates, (*capgatev1.ResourceTemplate).GetUriTemplate)...)
	changes = append(changes, diffNamed("prompt", was.Prompts, now.Prompts, (*capgatev1.Prompt).GetName)...)
	if len(changes) == 0 {
		return nil
	}
	return &describeChange{changes: changes}
}

// diffNamed lists the declarations of kind gone from now, changed in it,
// and new in it, compared with was, by name.
func diffNamed[T proto.Message](kind string, was, now []T, name func(T) string) []string {
	var changes []string
	byName := make(map[string]T, len(now))
	for _, d := range now {
		byName[name(d)] = d
	}
	for _, d := range was {
		n, ok := byName[name(d)]
		switch {
		case !ok:
			changes = append(changes, kind+" "+name(d)+" is gone")
		case !proto.Equal(d, n):
			changes = append(changes, kind+" "+name(d)+" changed")
		}
		delete(byName, name(d))
	}
	for _, d := range now {
		if _, added := byName[name(d)]; added {
			changes = append(changes, kind+" "+name(d)+" is new")
		}
	}
	return changes
}

// unavailable is the error for a call to a plugin that no process serves
// now, or nil while one does.
func (p *Plugin) unavailable() error {
	h := p.state.Load()
	switch h.State {
	case StateRunning:
		return nil
	case StateRestarting:
		wait := time.Until(h.NextAttempt).Round(100 * time.Millisecond)
		msg := fmt.Sprintf("plugin %q is restarting after it stopped (%s); nothing ran: retry", p.spec.Name, h.Reason)
		if wait > 0 {
			msg += " in about " + wait.String()
		} else {
			msg += " in a moment"
		}
		return unavailableError(msg)
	case StateFailed:
		return unavailableError(fmt.Sprintf("plugin %q is down until capgate restarts (%s); nothing ran", p.spec.Name, h.Detail))
	}
	return unavailableError(fmt.Sprintf("plugin %q is stopped; nothing ran", p.spec.Name))
}
