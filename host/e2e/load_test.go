package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
)

// The load the healing test and the soak put on a host while they kill its
// plugins: a mix of booking.create (distinct free slots, each with an
// idempotency key), booking.get of the caller's own bookings,
// platform.search and events.poll, as alice and bob. Every call is logged
// with its start, end and outcome, and judged afterwards against the
// restart windows the health prober saw (classifyCall).

// loadOp is one kind of call of the mix, named by its capability.
type loadOp string

const (
	opCreate loadOp = "booking.create"
	opGet    loadOp = "booking.get"
	opSearch loadOp = "platform.search"
	opPoll   loadOp = "events.poll"
	opSubs   loadOp = "subscription.list"
)

// providerOf is the plugin serving each capability of the mix; events.poll
// is the host's own (the events pack), which no plugin kill touches.
var providerOf = map[loadOp]string{opCreate: "booking", opGet: "booking", opSearch: "search", opPoll: "", opSubs: "subscription"}

// loadPlugins are the plugins of the load's host, which the tests kill.
var loadPlugins = []string{"booking", "search", "subscription"}

// loadMix is the mix, in parts: writes, reads of them, searches, polls.
var loadMix = []struct {
	op    loadOp
	parts int
}{{opCreate, 3}, {opGet, 3}, {opSearch, 3}, {opPoll, 1}, {opSubs, 1}}

// loadQueries are words of the demo catalogue (and a typo and a prefix, as
// agents send them) that platform.search is asked for.
var loadQueries = []string{"room", "quiet desk", "projector", "court", "studio", "auroa", "conf", "standing desk", "booth", "large meeting room"}

// loadUser is a principal the load acts as.
type loadUser struct{ name, token string }

var loadUsers = []loadUser{{"alice", tokenAlice}, {"bob", tokenBob}}

// loadConns is how many connections the load keeps to the host.
const loadConns = 64

// loadSlot is the length of the slots of the load's resources: 5 minutes
// round the clock, 288 a day, so a long soak never runs out of slots.
const loadSlot = 5 * time.Minute

// loadSlotsPerResource bounds the slots booked on one resource: about 350
// days of them, inside the booking horizon (365 days from now).
const loadSlotsPerResource = 350 * 288

// withLoadConfig is the config edit of the load tests: the events pack on,
// with events.read for every role as the demo config has it; the
// subscription plugin beside booking and search (its demo seed gives alice
// and bob a subscription each), so every plugin of a vertical is loaded and
// killed; polls of up to 100 events; and logs at info, since a debug line
// per call would cost the host more than the calls themselves.
func withLoadConfig(cfg string) string {
	search := regexp.MustCompile(`(?m)^  - \{name: search, path: "(.*)capgate-plugin-search"\}$`).FindStringSubmatch(cfg)
	if search == nil {
		panic("withLoadConfig: the test config has no search plugin line to place subscription beside:\n" + cfg)
	}
	for _, r := range [][2]string{
		{"packs: {booking: true, search: true}", "packs: {booking: true, search: true, events: true, subscription: true}"},
		{"  customer: [", "  customer: [events.read, subscription.read, "},
		{"  guest: [", "  guest: [events.read, "},
		{"  level: debug", "  level: info"},
		{"\nplugins:\n", "\nmax_results: 100\nplugins:\n"},
	} {
		if !strings.Contains(cfg, r[0]) {
			panic(fmt.Sprintf("withLoadConfig: the test config has no %q to edit:\n%s", r[0], cfg))
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	return cfg + fmt.Sprintf("  - {name: subscription, path: %q, config: {seed: demo}}\n", search[1]+"capgate-plugin-subscription")
}

// loggedCall is one call of the load.
type loggedCall struct {
	op    loadOp
	user  string
	key   string         // a create's idempotency key
	args  map[string]any // a create's arguments, for a retry
	phase string         // which part of the test sent it
	o     dsOutcome      // o.sent and o.took are its start and duration
}

func (c loggedCall) end() time.Time { return c.o.sent.Add(c.o.took) }

func (c loggedCall) ok() bool { return c.o.err == nil && c.o.rpcErr == nil && !c.o.isError }

// polledEvent is one event as events.poll returned it.
type polledEvent struct {
	Cursor uint64 `json:"cursor"`
	Type   string `json:"type"`
	Entity string `json:"entity"`
	ID     string `json:"id"`
	UserID string `json:"user_id"`
}

// pollAgent follows the bus as one user, from cursor 0, the way an agent
// does: each poll passes the previous poll's next. One poll at a time.
type pollAgent struct {
	user   loadUser
	busy   sync.Mutex // held while a poll is out
	mu     sync.Mutex
	cursor uint64
	events []polledEvent
}

// at is the agent's cursor now.
func (a *pollAgent) at() uint64 { a.mu.Lock(); defer a.mu.Unlock(); return a.cursor }

// loadGen drives one host.
type loadGen struct {
	t         *testing.T
	h         *host
	c         *mcpClient // shares its transport with every keyed call
	name      string     // prefixes idempotency keys and resource ids
	resources []string
	first     time.Time // the first slot booked
	nextSlot  atomic.Int64
	nextKey   atomic.Int64
	agents    map[string]*pollAgent // by user
	phase     atomic.Pointer[string]

	mu      sync.Mutex
	calls   []loggedCall
	created map[string]dsBooking // answered as created, by id
	own     map[string][]string  // ids of created, by user
	wrong   []string             // answers no call may get, at any time
}

// newLoad adds the load's resources to h (as the admin) and returns a load
// that books them, in turn. Agents start at cursor 0.
func newLoad(t *testing.T, h *host, name string, resources int) *loadGen {
	t.Helper()
	// A bounded pool, as a proxy or a client library keeps: an open-loop
	// load would otherwise open a connection for every call that finds the
	// others busy, and the host's memory would follow the client's
	// connection count rather than its own state.
	tr := &http.Transport{MaxConnsPerHost: loadConns, MaxIdleConns: loadConns, MaxIdleConnsPerHost: loadConns, IdleConnTimeout: time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	l := &loadGen{
		t: t, h: h, name: name,
		c:       &mcpClient{http: &http.Client{Timeout: 60 * time.Second, Transport: tr}},
		first:   startOfDayUTC(time.Now()).Add(24 * time.Hour),
		agents:  map[string]*pollAgent{},
		created: map[string]dsBooking{},
		own:     map[string][]string{},
	}
	l.setPhase("setup")
	for i := range resources {
		// The first is datasafety's resource, whose bookings checkSQLite
		// counts; the others are numbered after it.
		id := dsResource
		if i > 0 {
			id = fmt.Sprintf("%s-%d", dsResource, i)
		}
		if _, err := l.c.mustCall(t, h, tokenAdmin, "booking.add_resource", map[string]any{
			"id": id, "name": fmt.Sprintf("Load room %d", i), "kind": "room", "capacity": 1,
			"slot_minutes": int(loadSlot / time.Minute), "opens": "00:00", "closes": "24:00",
		}); err != nil {
			t.Fatalf("booking.add_resource %s: %v", id, err)
		}
		l.resources = append(l.resources, id)
	}
	for _, u := range loadUsers {
		l.agents[u.name] = &pollAgent{user: u}
	}
	return l
}

func (l *loadGen) setPhase(p string) { l.phase.Store(&p) }

// slot is the next free slot: the load's resources in turn, then the next
// five minutes.
func (l *loadGen) slot() (resource, start string) {
	n := l.nextSlot.Add(1) - 1
	r := int(n % int64(len(l.resources)))
	i := n / int64(len(l.resources))
	if i >= loadSlotsPerResource {
		panic(fmt.Sprintf("the load booked every slot of its %d resources", len(l.resources)))
	}
	return l.resources[r], l.first.Add(time.Duration(i) * loadSlot).Format(time.RFC3339)
}

// callTimed is l.c.call with the call's start and duration filled in; a
// key, when set, goes in the call's _meta.
func (l *loadGen) callTimed(token, tool string, args any, key string) dsOutcome {
	var meta map[string]any
	if key != "" {
		meta = map[string]any{dispatch.MetaIdempotencyKey: key}
	}
	sent := time.Now()
	o := l.c.callMeta(l.h, token, tool, args, meta)
	o.sent, o.took = sent, time.Since(sent)
	return o
}

func (l *loadGen) record(c loggedCall) {
	c.phase = *l.phase.Load()
	if c.op != opCreate {
		c.o.structured = nil // checked already; a long soak need not keep every search result
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *loadGen) wrongf(format string, args ...any) {
	l.mu.Lock()
	l.wrong = append(l.wrong, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// do sends one call of op as u and logs it. It reports false when it sent
// nothing: a poll while u's agent has one out.
func (l *loadGen) do(op loadOp, u loadUser) bool {
	switch op {
	case opCreate:
		l.create(u)
	case opGet:
		l.mu.Lock()
		ids := l.own[u.name]
		var id string
		if len(ids) > 0 {
			id = ids[rand.IntN(len(ids))]
		}
		l.mu.Unlock()
		if id == "" {
			l.create(u) // nothing of u's to read yet
			return true
		}
		l.get(u, id)
	case opSearch:
		q := loadQueries[rand.IntN(len(loadQueries))]
		o := l.callTimed(u.token, string(opSearch), map[string]any{"query": q, "limit": 5}, "")
		if o.err == nil && o.rpcErr == nil && !o.isError {
			var res struct {
				Hits []json.RawMessage `json:"hits"`
			}
			if err := json.Unmarshal(o.structured, &res); err != nil || res.Hits == nil {
				l.wrongf("platform.search %q answered %s", q, o.structured)
			}
		}
		l.record(loggedCall{op: op, user: u.name, o: o})
	case opPoll:
		return l.poll(l.agents[u.name])
	case opSubs:
		o := l.callTimed(u.token, string(opSubs), map[string]any{}, "")
		if o.err == nil && o.rpcErr == nil && !o.isError && !bytes.Contains(o.structured, []byte(`"subscriptions":[{`)) {
			l.wrongf("subscription.list as %s answered %s, want the seeded subscription", u.name, o.structured)
		}
		l.record(loggedCall{op: op, user: u.name, o: o})
	}
	return true
}

// create books the next slot as u, with a fresh idempotency key.
func (l *loadGen) create(u loadUser) {
	res, start := l.slot()
	args := map[string]any{"resource_id": res, "start": start}
	key := fmt.Sprintf("%s-%s-%d", l.name, u.name, l.nextKey.Add(1))
	o := l.callTimed(u.token, string(opCreate), args, key)
	c := loggedCall{op: opCreate, user: u.name, key: key, args: args, o: o}
	l.record(c)
	if c.ok() {
		l.acknowledge(c, u)
	}
}

// acknowledge keeps a create answered as successful, after checking the
// answer is the booking asked for and no other answer had its id.
func (l *loadGen) acknowledge(c loggedCall, u loadUser) (dsBooking, bool) {
	var b dsBooking
	res, start := c.args["resource_id"].(string), c.args["start"].(string)
	if err := json.Unmarshal(c.o.structured, &b); err != nil || b.ID == "" {
		l.wrongf("booking.create answered success without a booking: %s", c.o.structured)
		return b, false
	}
	if b.ResourceID != res || b.Start != start || b.Status != "active" {
		l.wrongf("booking.create of %s at %s answered %s", res, start, c.o.structured)
		return b, false
	}
	b.user, b.token = u.name, u.token
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, dup := l.created[b.ID]; dup {
		if prev.booking != b.booking || prev.CreatedAt != b.CreatedAt {
			l.wrong = append(l.wrong, fmt.Sprintf("booking id %s answered as %+v and as %+v", b.ID, prev, b))
		}
		return b, true
	}
	l.created[b.ID] = b
	l.own[u.name] = append(l.own[u.name], b.ID)
	return b, true
}

// get reads one of u's bookings and compares it with its create's answer.
func (l *loadGen) get(u loadUser, id string) {
	o := l.callTimed(u.token, string(opGet), map[string]any{"id": id}, "")
	c := loggedCall{op: opGet, user: u.name, o: o}
	l.record(c)
	if !c.ok() {
		return
	}
	var got dsBooking
	l.mu.Lock()
	want := l.created[id]
	l.mu.Unlock()
	if err := json.Unmarshal(o.structured, &got); err != nil || got.booking != want.booking || got.CreatedAt != want.CreatedAt {
		l.wrongf("booking.get %s answered %s, created as %+v", id, o.structured, want)
	}
}

// poll reads the bus after a's cursor; false when a already has a poll out.
func (l *loadGen) poll(a *pollAgent) bool {
	if !a.busy.TryLock() {
		return false
	}
	defer a.busy.Unlock()
	after := a.at()
	o := l.callTimed(a.user.token, string(opPoll), map[string]any{"after": after, "limit": 100}, "")
	l.record(loggedCall{op: opPoll, user: a.user.name, o: o})
	if o.err != nil || o.rpcErr != nil || o.isError {
		return true
	}
	page, err := decodePoll(o.structured)
	if err != nil {
		l.wrongf("events.poll after %d: %v", after, err)
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	last := after
	for _, e := range page.Events {
		if e.Cursor <= last {
			l.wrongf("events.poll after %d as %s returned cursor %d after %d", after, a.user.name, e.Cursor, last)
		}
		last = e.Cursor
	}
	if page.Next < last {
		l.wrongf("events.poll after %d as %s: next %d is before its last event %d", after, a.user.name, page.Next, last)
	}
	a.events = append(a.events, page.Events...)
	a.cursor = max(page.Next, after)
	return true
}

type pollPage struct {
	Events []polledEvent `json:"events"`
	Next   uint64        `json:"next"`
}

func decodePoll(raw json.RawMessage) (pollPage, error) {
	var p pollPage
	if err := json.Unmarshal(raw, &p); err != nil || p.Events == nil {
		return p, fmt.Errorf("not an events.poll result (%v): %s", err, raw)
	}
	return p, nil
}

// drain polls with every agent until each has read to the end of the bus.
func (l *loadGen) drain(t *testing.T) {
	t.Helper()
	for _, u := range loadUsers {
		a := l.agents[u.name]
		for i := 0; ; i++ {
			before := a.at()
			l.poll(a)
			if a.at() == before {
				break
			}
			if i > 10000 {
				t.Fatalf("events.poll as %s never reached the end of the bus", u.name)
			}
		}
	}
}

// replay reads the bus after cursor as u, page after page, to its end:
// what an agent holding that cursor gets.
func (l *loadGen) replay(t *testing.T, u loadUser, after uint64) ([]polledEvent, error) {
	t.Helper()
	var out []polledEvent
	for range 10000 {
		raw, err := l.c.mustCall(t, l.h, u.token, string(opPoll), map[string]any{"after": after, "limit": 100})
		if err != nil {
			return out, fmt.Errorf("events.poll after %d: %v", after, err)
		}
		page, err := decodePoll(raw)
		if err != nil {
			return out, err
		}
		out = append(out, page.Events...)
		if page.Next == after {
			return out, nil
		}
		after = page.Next
	}
	return out, fmt.Errorf("events.poll as %s never reached the end of the bus", u.name)
}

// pickLoadCall draws one call of the mix and the user to send it as.
func pickLoadCall() (loadOp, loadUser) {
	total := 0
	for _, m := range loadMix {
		total += m.parts
	}
	n := rand.IntN(total)
	u := loadUsers[rand.IntN(len(loadUsers))]
	for _, m := range loadMix {
		if n < m.parts {
			return m.op, u
		}
		n -= m.parts
	}
	panic("unreachable")
}

// runClosed sends the mix from workers goroutines, each sending its next
// call when the last is answered (and pause has passed), until ctx ends.
// The returned function waits for the workers.
func (l *loadGen) runClosed(ctx context.Context, workers int, pause time.Duration) (wait func()) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				op, u := pickLoadCall()
				if !l.do(op, u) {
					continue
				}
				if pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
			}
		})
	}
	return wg.Wait
}

// openStats is what an open-loop run sent.
type openStats struct {
	target  float64 // calls per second asked for
	sent    int64
	busy    int64 // polls not sent: the agent still had one out
	dropped int64 // calls not sent: maxOutstanding calls were unanswered
	elapsed time.Duration
}

// runOpen sends the mix at a fixed rate for d, each call at its scheduled
// time whatever happened to the calls before it (open loop), with at most
// maxOutstanding unanswered; it returns once every call is answered.
func (l *loadGen) runOpen(ctx context.Context, rate float64, d time.Duration, maxOutstanding int64) openStats {
	st := openStats{target: rate}
	period := time.Duration(float64(time.Second) / rate)
	var (
		wg                  sync.WaitGroup
		outstanding         atomic.Int64
		sent, busy, dropped atomic.Int64
	)
	t0 := time.Now()
	for i := int64(0); ctx.Err() == nil; i++ {
		at := t0.Add(time.Duration(i) * period)
		if at.Sub(t0) >= d {
			break
		}
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		if outstanding.Load() >= maxOutstanding {
			dropped.Add(1)
			continue
		}
		op, u := pickLoadCall()
		outstanding.Add(1)
		wg.Go(func() {
			defer outstanding.Add(-1)
			if l.do(op, u) {
				sent.Add(1)
			} else {
				busy.Add(1)
			}
		})
	}
	st.elapsed = time.Since(t0)
	wg.Wait()
	st.sent, st.busy, st.dropped = sent.Load(), busy.Load(), dropped.Load()
	return st
}

// stopAndCheckWrites reads back (through the host) the bookings in served,
// stops the host within stopIn, and checks the load's bookings as stored:
// every acknowledged one there as answered, no slot booked twice. It
// returns the acknowledged and the stored bookings and the check.
func (l *loadGen) stopAndCheckWrites(t *testing.T, dir string, served map[string]dsBooking, stopIn time.Duration) (created map[string]dsBooking, stored map[string]storedBooking, wc writeCheck) {
	t.Helper()
	created = l.acknowledged()
	checkCreatedServed(t, l.h, l.c, served)
	if !l.h.terminate(stopIn) {
		t.Fatalf("the host did not exit within %v of SIGTERM", stopIn)
	}
	stored = storedBookings(t, dir, l.resources)
	wc = checkWrites(created, stored)
	for _, s := range wc.lost {
		t.Errorf("acknowledged booking lost: %s", s)
	}
	for _, s := range wc.doubled {
		t.Errorf("a slot booked twice: %s", s)
	}
	return created, stored, wc
}

// snapshot is a copy of the call log.
func (l *loadGen) snapshot() []loggedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// acknowledged is a copy of the bookings answered as created.
func (l *loadGen) acknowledged() map[string]dsBooking {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]dsBooking, len(l.created))
	for k, v := range l.created {
		m[k] = v
	}
	return m
}

// healthProbe is one GET /healthz.
type healthProbe struct {
	start, end time.Time
	code       int
	status     string            // "ok", "restarting", "unavailable"; "" when it failed
	down       map[string]string // plugin → state, for those not running
	err        error
}

// healthProber asks /healthz every interval and keeps every answer.
type healthProber struct {
	mu     sync.Mutex
	probes []healthProbe
}

func startProber(ctx context.Context, h *host, every time.Duration) *healthProber {
	p := &healthProber{}
	client := &http.Client{Timeout: 10 * time.Second}
	go func() {
		for ctx.Err() == nil {
			pr := healthProbe{start: time.Now()}
			resp, err := client.Get(h.base + "/healthz")
			if err != nil {
				pr.err = err
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				pr.code = resp.StatusCode
				var body struct {
					Status  string `json:"status"`
					Plugins []struct {
						Name  string `json:"name"`
						State string `json:"state"`
					} `json:"plugins"`
				}
				if err := json.Unmarshal(b, &body); err != nil {
					pr.err = fmt.Errorf("HTTP %d, not JSON: %s", resp.StatusCode, b)
				}
				pr.status = body.Status
				pr.down = map[string]string{}
				for _, pl := range body.Plugins {
					pr.down[pl.Name] = pl.State
				}
			}
			pr.end = time.Now()
			p.mu.Lock()
			p.probes = append(p.probes, pr)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return p
}

// restartWindow is one kill and the host healing from it, as /healthz
// showed it.
type restartWindow struct {
	plugin   string
	oldPIDs  []int
	killed   time.Time // just before the SIGKILL
	detected time.Time // end of the first probe answering that plugin restarting
	healthy  time.Time // end of the first probe answering ok after that
	grace    time.Duration
	probes   []healthProbe // the probes from the kill to healthy
}

// contains reports whether a call sent at t falls in the window.
func (w restartWindow) contains(t time.Time) bool {
	return !t.Before(w.killed) && !t.After(w.healthy.Add(w.grace))
}

// await waits up to within after killed for /healthz to say the plugin is
// restarting and then ok.
func (p *healthProber) await(plugin string, killed time.Time, within time.Duration) (restartWindow, error) {
	w := restartWindow{plugin: plugin, killed: killed}
	for deadline := killed.Add(within); ; {
		p.mu.Lock()
		probes := slices.Clone(p.probes)
		p.mu.Unlock()
		w.detected, w.probes = time.Time{}, nil
		for _, pr := range probes {
			if pr.start.Before(killed) {
				continue
			}
			w.probes = append(w.probes, pr)
			switch {
			case w.detected.IsZero() && pr.code == http.StatusServiceUnavailable && pr.status == "restarting" && pr.down[plugin] == "restarting":
				w.detected = pr.end
			case !w.detected.IsZero() && pr.code == http.StatusOK && pr.status == "ok":
				w.healthy = pr.end
				return w, nil
			}
		}
		if time.Now().After(deadline) {
			last := "no probe"
			if n := len(w.probes); n > 0 {
				last = fmt.Sprintf("HTTP %d %s %v (%v)", w.probes[n-1].code, w.probes[n-1].status, w.probes[n-1].down, w.probes[n-1].err)
			}
			if w.detected.IsZero() {
				return w, fmt.Errorf("/healthz never said %s was restarting within %v of its kill (last: %s)", plugin, within, last)
			}
			return w, fmt.Errorf("/healthz not ok again within %v of the kill of %s (last: %s)", within, plugin, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitDetected waits up to within after killed for /healthz to say the
// plugin is restarting.
func (p *healthProber) awaitDetected(plugin string, killed time.Time, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		p.mu.Lock()
		for _, pr := range p.probes {
			if !pr.start.Before(killed) && pr.status == "restarting" && pr.down[plugin] == "restarting" {
				p.mu.Unlock()
				return true
			}
		}
		p.mu.Unlock()
	}
	return false
}

// killPlugin sends SIGKILL to every process of the named plugin.
func killPlugin(t *testing.T, h *host, name string) (pids []int, at time.Time) {
	t.Helper()
	pids, at, err := killPluginProcs(h, name)
	if err != nil {
		t.Fatal(err)
	}
	return pids, at
}

// killPluginProcs is killPlugin for any goroutine: it returns the error.
func killPluginProcs(h *host, name string) (pids []int, at time.Time, err error) {
	pids = pluginProcs(h.plugins[name])
	if len(pids) == 0 {
		return nil, time.Time{}, fmt.Errorf("no process runs the %s plugin %s", name, h.plugins[name])
	}
	at = time.Now()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			return pids, at, fmt.Errorf("kill -9 %d (%s plugin): %v", pid, name, err)
		}
	}
	return pids, at, nil
}

// restartingText is how a call to a plugin being restarted fails.
func restartingText(plugin string) string {
	return fmt.Sprintf("plugin %q is restarting after it stopped", plugin)
}

// callVerdict is what a call's outcome means, given the restart windows.
type callVerdict string

const (
	vOK         callVerdict = "success"
	vRestarting callVerdict = "restarting error"             // the plugin was down: nothing ran
	vInFlight   callVerdict = "in flight at the kill"        // sent before the kill, failed by it
	vUndetected callVerdict = "sent before the host noticed" // after the kill, to the dying process
	vError      callVerdict = "error"                        // a failure nothing explains
)

// classifyCall judges one call: a failure is allowed only for a call to the
// killed plugin's capabilities in its window — the restarting error (sent
// while the host had it down), or an internal error for one in flight at
// the kill or sent after it but before the host noticed the death.
func classifyCall(c loggedCall, ws []restartWindow) (callVerdict, *restartWindow) {
	var in *restartWindow
	for i := range ws {
		w := &ws[i]
		if w.plugin != providerOf[c.op] {
			continue
		}
		if w.contains(c.o.sent) || (c.o.sent.Before(w.killed) && c.end().After(w.killed)) {
			in = w
			break
		}
	}
	if c.ok() {
		return vOK, in
	}
	if in == nil || c.o.err != nil || c.o.rpcErr != nil {
		return vError, in
	}
	restarting := strings.Contains(c.o.text, restartingText(in.plugin)) && strings.Contains(c.o.text, "nothing ran: retry")
	internal := strings.HasPrefix(c.o.text, "internal error while running "+string(c.op))
	switch {
	case c.o.sent.Before(in.killed) && (internal || restarting):
		return vInFlight, in
	case restarting:
		return vRestarting, in
	case internal && c.o.sent.Before(in.detected):
		return vUndetected, in
	}
	return vError, in
}

// failedCreates splits the creates that failed into those that may have
// run (unknown) and those told nothing ran.
func failedCreates(calls []loggedCall) (unknown, nothingRan []loggedCall) {
	for _, c := range calls {
		switch {
		case c.op != opCreate || c.ok():
		case unknownOutcome(c):
			unknown = append(unknown, c)
		default:
			nothingRan = append(nothingRan, c)
		}
	}
	return unknown, nothingRan
}

// unknownOutcome reports whether a failed create may have run: anything
// but an answer saying nothing ran.
func unknownOutcome(c loggedCall) bool {
	return !c.ok() && !(c.o.isError && strings.Contains(c.o.text, "nothing ran"))
}

// retryOutcome is what a create retried with its first key answered.
type retryOutcome struct {
	first, retry loggedCall
}

// retryCreates sends each create again with its own key and arguments.
func (l *loadGen) retryCreates(calls []loggedCall) []retryOutcome {
	var out []retryOutcome
	for _, c := range calls {
		u := loadUser{c.user, loadTokenOf(c.user)}
		o := l.callTimed(u.token, string(opCreate), c.args, c.key)
		r := loggedCall{op: opCreate, user: c.user, key: c.key, args: c.args, o: o, phase: "retry"}
		if r.ok() {
			l.acknowledge(r, u)
		}
		out = append(out, retryOutcome{first: c, retry: r})
	}
	return out
}

func loadTokenOf(user string) string {
	for _, u := range loadUsers {
		if u.name == user {
			return u.token
		}
	}
	panic("no token for " + user)
}

// createdOn is the part of created booked on resource.
func createdOn(created map[string]dsBooking, resource string) map[string]dsBooking {
	out := map[string]dsBooking{}
	for id, b := range created {
		if b.ResourceID == resource {
			out[id] = b
		}
	}
	return out
}

// storedBooking is one row of the booking plugin's table.
type storedBooking struct {
	id, resource, user, status, start string
}

// storedBookings reads every booking of the load's resources from the
// booking plugin's SQLite file; the host must have stopped.
func storedBookings(t *testing.T, dir string, resources []string) map[string]storedBooking {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "data", "plugins", "booking", "booking.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, resource_id, user_id, status, starts_at FROM bookings`)
	if err != nil {
		t.Fatalf("reading the bookings: %v", err)
	}
	defer rows.Close()
	out := map[string]storedBooking{}
	for rows.Next() {
		var b storedBooking
		if err := rows.Scan(&b.id, &b.resource, &b.user, &b.status, &b.start); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(resources, b.resource) {
			if ts, err := time.Parse(time.RFC3339, b.start); err == nil {
				b.start = ts.UTC().Format(time.RFC3339)
			}
			out[b.id] = b
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeCheck compares the bookings answered as created with the stored
// ones: lost are answered but missing or stored otherwise; doubled are
// slots holding more than one booking.
type writeCheck struct {
	lost    []string
	doubled []string
	stored  int
}

func checkWrites(created map[string]dsBooking, stored map[string]storedBooking) writeCheck {
	wc := writeCheck{stored: len(stored)}
	for id, b := range created {
		s, ok := stored[id]
		switch {
		case !ok:
			wc.lost = append(wc.lost, fmt.Sprintf("%s (%s at %s for %s): not stored", id, b.ResourceID, b.Start, b.user))
		case s.resource != b.ResourceID || s.user != b.user || s.status != "active" || s.start != b.Start:
			wc.lost = append(wc.lost, fmt.Sprintf("%s: answered as (%s, %s, %s, active), stored as (%s, %s, %s, %s)",
				id, b.ResourceID, b.Start, b.user, s.resource, s.start, s.user, s.status))
		}
	}
	slots := map[string][]string{}
	for _, s := range stored {
		slots[s.resource+" "+s.start] = append(slots[s.resource+" "+s.start], s.id)
	}
	for slot, ids := range slots {
		if len(ids) > 1 {
			wc.doubled = append(wc.doubled, fmt.Sprintf("%s: %v", slot, ids))
		}
	}
	slices.Sort(wc.lost)
	slices.Sort(wc.doubled)
	return wc
}

// eventCheck compares each agent's events with the bookings: every one
// answered as created must show up exactly once as booking.created in its
// user's stream, and none may show up for a booking that is not stored.
type eventCheck struct {
	missing, repeated, phantom []string
	seen                       int
}

func checkEvents(agents map[string]*pollAgent, created map[string]dsBooking, stored map[string]storedBooking) eventCheck {
	var ec eventCheck
	for _, u := range loadUsers {
		a := agents[u.name]
		a.mu.Lock()
		count := map[string]int{}
		cursors := map[uint64]bool{}
		for _, e := range a.events {
			if cursors[e.Cursor] {
				ec.repeated = append(ec.repeated, fmt.Sprintf("%s saw cursor %d twice", u.name, e.Cursor))
			}
			cursors[e.Cursor] = true
			if e.Type != "booking.created" {
				continue
			}
			if e.UserID != u.name {
				ec.phantom = append(ec.phantom, fmt.Sprintf("%s saw %s's booking.created %s", u.name, e.UserID, e.ID))
			}
			count[e.ID]++
		}
		a.mu.Unlock()
		for id, b := range created {
			if b.user != u.name {
				continue
			}
			ec.seen++
			switch n := count[id]; {
			case n == 0:
				ec.missing = append(ec.missing, fmt.Sprintf("%s's booking %s (%s at %s)", u.name, id, b.ResourceID, b.Start))
			case n > 1:
				ec.repeated = append(ec.repeated, fmt.Sprintf("%s's booking %s polled %d times", u.name, id, n))
			}
		}
		for id := range count {
			if _, ok := stored[id]; !ok && strings.HasPrefix(id, "bk_") {
				if _, answered := created[id]; !answered {
					ec.phantom = append(ec.phantom, fmt.Sprintf("booking.created %s polled by %s, but no such booking is stored", id, u.name))
				}
			}
		}
	}
	slices.Sort(ec.missing)
	slices.Sort(ec.repeated)
	slices.Sort(ec.phantom)
	return ec
}

// searchReadyLines are the search plugin's "search index ready" log lines
// of h, in order: one per start of the plugin's process.
func searchReadyLines(t *testing.T, h *host) (ready, resynced []string) {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.Contains(line, `msg="search index ready"`):
			ready = append(ready, line)
		case strings.Contains(line, `msg="search index resynced"`), strings.Contains(line, "search index missed catalogue events"):
			resynced = append(resynced, line)
		}
	}
	return ready, resynced
}

// searchTrouble is what the search plugin logged at warn or error, and
// the host about its subscriptions.
func searchTrouble(t *testing.T, h *host) []string {
	t.Helper()
	b, err := os.ReadFile(h.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if (strings.Contains(line, "plugin=search") && !strings.Contains(line, "level=INFO") && !strings.Contains(line, "level=DEBUG")) ||
			strings.Contains(line, "subscri") {
			out = append(out, line)
		}
	}
	return out
}

// logAttr is the value of key=value in a text log line ("" if absent).
func logAttr(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if s, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(s)
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// searchable waits up to within for platform.search of query to find the
// resource id.
func (l *loadGen) searchable(t *testing.T, query, id string, within time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < within {
		o := l.callTimed(tokenGuest, string(opSearch), map[string]any{"query": query, "limit": 5}, "")
		last = o.String()
		if o.err == nil && o.rpcErr == nil && !o.isError {
			var res struct {
				Hits []struct {
					Entity string `json:"entity"`
					ID     string `json:"id"`
				} `json:"hits"`
			}
			if json.Unmarshal(o.structured, &res) == nil {
				for _, h := range res.Hits {
					if h.Entity == "booking.resource" && h.ID == id {
						return time.Since(start), nil
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), fmt.Errorf("platform.search %q did not find %s within %v (last answer: %s)", query, id, within, last)
}

// loadQuantile is the q-quantile (0..1) of ds, nearest rank; 0 for none.
func loadQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// fmtMS formats a duration in milliseconds, for tables.
func fmtMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}
