package pluginhost

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// PluginHealth is what the host knows of one plugin's process.
type PluginHealth struct {
	// Name is the operator's name for the plugin.
	Name string
	// Alive is false once the plugin's process has exited or its call
	// stream has ended while the host was not stopping it. go-plugin does
	// not restart a plugin: a dead plugin stays dead until the host
	// restarts, and its capabilities fail meanwhile.
	Alive bool
	// PID is the plugin's process id when it was started.
	PID int
	// DiedAt is when the host noticed the death; zero while alive.
	DiedAt time.Time
	// Reason says how it died, e.g. "process exited: signal: killed";
	// empty while alive.
	Reason string
}

// Health reports every plugin's liveness in start order. It is cheap: it
// reads state kept by each plugin's exit watcher and calls no plugin.
func (h *Host) Health() []PluginHealth {
	out := make([]PluginHealth, len(h.plugins))
	for i, p := range h.plugins {
		out[i] = p.Health()
	}
	return out
}

// Health reports the plugin's liveness.
func (p *Plugin) Health() PluginHealth {
	ph := PluginHealth{Name: p.spec.Name, PID: p.live.pid, Alive: true}
	if d := p.live.dead.Load(); d != nil {
		ph.Alive, ph.DiedAt, ph.Reason = false, d.at, d.reason
	}
	return ph
}

// liveness is a plugin's exit watcher and what it found.
type liveness struct {
	pid      int
	dead     atomic.Pointer[death]
	stopping atomic.Bool   // the host is stopping the plugin: not a death
	stop     chan struct{} // closed to end the watcher
	stopOnce sync.Once
	done     chan struct{} // closed when the watcher has returned
}

type death struct {
	at     time.Time
	reason string
}

// How often the watcher asks go-plugin whether the process has exited, in
// case the call stream outlives it; and how long it waits, once the stream
// has ended, for the process's exit status.
const (
	exitPoll     = time.Second
	exitStatusIn = 2 * time.Second
)

func newLiveness() *liveness {
	return &liveness{stop: make(chan struct{}), done: make(chan struct{})}
}

// watch runs until the plugin dies or the host stops it. A death is
// recorded for Health and logged once, at error level.
func (p *Plugin) watch(log *slog.Logger) {
	defer close(p.live.done)
	tick := time.NewTicker(exitPoll)
	defer tick.Stop()
	for exited := false; !exited; {
		select {
		case <-p.live.stop:
			return
		case <-p.calls.done:
			exited = true
		case <-tick.C:
			exited = p.client.Exited()
		}
	}
	if p.live.stopping.Load() {
		return
	}
	// The stream usually ends a moment before go-plugin has reaped the
	// process; wait briefly for its exit status.
	deadline := time.Now().Add(exitStatusIn)
	for !p.client.Exited() && time.Now().Before(deadline) {
		select {
		case <-p.live.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	d := &death{at: time.Now()}
	attrs := []any{"plugin", p.spec.Name, "pid", p.live.pid}
	if p.client.Exited() {
		// go-plugin's Wait has returned (Exited takes the lock it sets
		// exited under), so ProcessState is set and no longer written.
		d.reason = "process exited"
		if ps := p.cmd.ProcessState; ps != nil {
			d.reason += ": " + ps.String()
			attrs = append(attrs, "exit", ps.String())
		}
	} else {
		d.reason = p.calls.failure().Error()
		attrs = append(attrs, "err", d.reason)
	}
	if p.live.stopping.Load() {
		return
	}
	p.live.dead.Store(d)
	log.Error("plugin died; its capabilities fail until capgate restarts", attrs...)
}

// halt marks the plugin as being stopped by the host, so its exit is not a
// death, and ends the watcher.
func (l *liveness) halt() {
	l.stopping.Store(true)
	l.stopOnce.Do(func() { close(l.stop) })
}

// deadError is the error for a call to a plugin known to be dead, or nil.
func (p *Plugin) deadError() string {
	if d := p.live.dead.Load(); d != nil {
		return "the plugin is not running (" + d.reason + ")"
	}
	return ""
}
