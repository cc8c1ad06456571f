package mcp

import (
	"context"
	"log/slog"
	"sync"
)

// The server is stateless, so a client's notifications/cancelled arrives in
// a request of its own, possibly long after the request it cancels. The
// requests that may run long (those that reach plugins) are registered
// under their caller and JSON-RPC id while they run, so such a
// notification finds and cancels the one it names, inside the plugin too.
// Only the caller that sent a request (the same Authorization) can cancel
// it, and only on the replica serving it: another replica has nothing to
// cancel and accepts the notification as every server does.

// callKey names one request in flight: the caller's credentials and the
// request's id, as the client wrote them.
type callKey struct {
	auth string
	id   string
}

// running is the set of cancellable requests in flight.
type running struct {
	mu    sync.Mutex
	seq   uint64
	calls map[callKey]runningCall
}

type runningCall struct {
	seq    uint64 // tells a registration from a later one under the same key
	cancel context.CancelFunc
}

// registration is one request in running, until end.
type registration struct {
	r      *running
	k      callKey
	seq    uint64
	cancel context.CancelFunc
}

// start registers a request that cancel cancels and returns its
// registration. Of two requests with the same key (a client reusing an id
// while the first still runs), a cancellation reaches the newer one.
func (r *running) start(cancel context.CancelFunc, k callKey) registration {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[callKey]runningCall{}
	}
	r.seq++
	g := registration{r: r, k: k, seq: r.seq, cancel: cancel}
	r.calls[k] = runningCall{seq: g.seq, cancel: cancel}
	r.mu.Unlock()
	return g
}

// end removes the registration, unless a newer one took its key, and
// releases the request's context.
func (g registration) end() {
	if g.r == nil {
		return
	}
	g.r.mu.Lock()
	if g.r.calls[g.k].seq == g.seq {
		delete(g.r.calls, g.k)
	}
	g.r.mu.Unlock()
	g.cancel()
}

// cancel cancels the request k names, if it runs here; it reports whether
// one did.
func (r *running) cancel(k callKey) bool {
	r.mu.Lock()
	rc, ok := r.calls[k]
	r.mu.Unlock()
	if ok {
		rc.cancel()
	}
	return ok
}

// count is how many cancellable requests run now.
func (r *running) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// idKey is the canonical form of a JSON-RPC id token: a string's decoded
// value, a number as written.
func idKey(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		s, ok := decodeString(raw)
		return "s" + s, ok
	}
	if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
		return "n" + string(raw), true
	}
	return "", false
}

// cancellable makes c's context cancellable by a notifications/cancelled
// naming id from the same caller, until the registration ends.
func (c *call) cancellable(id []byte) registration {
	k, ok := idKey(id)
	if !ok {
		return registration{}
	}
	cancel := c.cancel
	if c.inBatch {
		// One message of several: its own context, so cancelling it
		// leaves the others of the batch alone.
		c.ctx, cancel = context.WithCancel(c.ctx)
	}
	return c.h.running.start(cancel, callKey{auth: c.auth, id: k})
}

// notification handles a notification; none is answered.
// notifications/cancelled cancels the request it names when this caller
// sent it and it still runs here.
func (c *call) notification(m *message) {
	if !stringIs(m.method, "notifications/cancelled") {
		return
	}
	var ps params
	if !parseParams(m.params, &ps) {
		return
	}
	k, ok := idKey(ps.requestID)
	if !ok {
		return
	}
	if c.h.running.cancel(callKey{auth: c.auth, id: k}) {
		c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: request cancelled by the client")
	}
}
