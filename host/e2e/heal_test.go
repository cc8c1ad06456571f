package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPluginsHealUnderLoad: with a steady load on one host (booking.create
// of free slots with idempotency keys, booking.get of the caller's own
// bookings, platform.search, events.poll, subscription.list; as alice and
// bob, from a few goroutines), kill -9 each plugin in turn: booking,
// search, subscription. Each
// time the host restarts the plugin within its backoff (/healthz answers
// restarting, then ok within a few seconds); the calls that meet the gap
// fail at once with the restarting error naming the plugin; those in flight
// at the kill, and those sent in the moment before the host notices the
// death (the process is gone, the supervisor has not yet marked it so),
// fail with "internal error while running …" rather than hang; nothing else
// fails. No acknowledged booking is lost: a create refused as restarting
// books its slot when retried with its key, one whose outcome is unknown is
// held by its key's lease and never books twice, and an acknowledged one
// replays its booking. The search index resumes from its cursor (no
// resync) and indexes resources added while it was down and right after;
// and an events.poll cursor held across each kill goes on without
// skipping, every acknowledged booking polled exactly once.
func TestPluginsHealUnderLoad(t *testing.T) {
	needE2E(t)
	began := time.Now()
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withLoadConfig)
	l := newLoad(t, h, "heal", 1)
	t.Logf("host up %v after the test began", time.Since(began).Round(time.Millisecond))

	ctx, stopProbes := context.WithCancel(context.Background())
	defer stopProbes()
	pr := startProber(ctx, h, 20*time.Millisecond)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	l.setPhase("load")
	waitLoad := l.runClosed(loadCtx, 4, 5*time.Millisecond)

	time.Sleep(2 * time.Second)
	if n := len(l.acknowledged()); n == 0 {
		stopLoad()
		waitLoad()
		t.Fatalf("no booking answered as created in 2s of load; log:\n%s", h.logText())
	}

	// earlyCreates are acknowledged before any kill: retried with their key
	// at the end, each must replay its booking.
	var earlyCreates []loggedCall
	for _, c := range l.snapshot() {
		if c.op == opCreate && c.ok() && len(earlyCreates) < 20 {
			earlyCreates = append(earlyCreates, c)
		}
	}

	type heldCursor struct {
		at     uint64
		replay []polledEvent
	}
	var (
		windows []restartWindow
		held    []heldCursor
	)
	alice := loadUsers[0]
	for _, victim := range loadPlugins {
		hc := heldCursor{at: l.agents[alice.name].at()}
		oldPIDs, killed := killPlugin(t, h, victim)

		var gapAdded time.Time
		var gapState string
		if victim == "search" {
			// A resource added while search is down (the host has seen it
			// die): booking serves it, and its catalogue.upsert waits on
			// the bus for search.
			if !pr.awaitDetected(victim, killed, 5*time.Second) {
				t.Errorf("/healthz did not say search was restarting within 5s of its kill")
			}
			if _, err := l.c.mustCall(t, h, tokenAdmin, "booking.add_resource", map[string]any{
				"id": "heal-gap", "name": "Gap studio", "kind": "studio", "capacity": 2,
				"description": "A small studio with a theremin.", "slot_minutes": 60, "opens": "08:00", "closes": "20:00",
			}); err != nil {
				t.Errorf("booking.add_resource while search was down: %v", err)
			}
			gapAdded = time.Now()
			code, body := getHealthz(t, h)
			gapState = fmt.Sprintf("%d %s", code, body)
		}

		w, err := pr.await(victim, killed, 15*time.Second)
		w.oldPIDs = oldPIDs
		if err != nil {
			stopLoad()
			waitLoad()
			t.Fatalf("after kill -9 of the %s plugin: %v; log:\n%s", victim, err, h.logText())
		}
		windows = append(windows, w)
		t.Logf("kill -9 of %s (pid %v): /healthz said restarting %v later and ok %v later",
			victim, oldPIDs, w.detected.Sub(killed).Round(time.Millisecond), w.healthy.Sub(killed).Round(time.Millisecond))
		if d := w.detected.Sub(killed); d > time.Second {
			t.Errorf("/healthz said %s was restarting only %v after its kill; the host should notice a death at once", victim, d)
		}
		if d := w.healthy.Sub(killed); d > 5*time.Second {
			t.Errorf("%s took %v to be healthy again after its kill; the default policy restarts after 250ms ±20%%", victim, d)
		}
		if now := pluginProcs(h.plugins[victim]); len(now) != 1 || slices.Contains(oldPIDs, now[0]) {
			t.Errorf("%s plugin processes after the restart: %v (killed: %v); want one new process", victim, now, oldPIDs)
		}

		if victim == "search" {
			t.Logf("heal-gap added %v after the kill of search, /healthz then answering %s", gapAdded.Sub(killed).Round(time.Millisecond), gapState)
			// And one right after the restart.
			if _, err := l.c.mustCall(t, h, tokenAdmin, "booking.add_resource", map[string]any{
				"id": "heal-after", "name": "After room", "kind": "room", "capacity": 4,
				"description": "A meeting room with a harmonium.", "slot_minutes": 60, "opens": "08:00", "closes": "20:00",
			}); err != nil {
				t.Errorf("booking.add_resource right after search restarted: %v", err)
			}
			for _, q := range [][2]string{{"theremin", "heal-gap"}, {"harmonium", "heal-after"}} {
				took, err := l.searchable(t, q[0], q[1], 15*time.Second)
				if err != nil {
					t.Error(err)
				} else {
					t.Logf("%s searchable (%q) %v after search was healthy again", q[1], q[0], time.Since(w.healthy).Round(time.Millisecond))
				}
				if err != nil || took > 3*time.Second {
					t.Logf("what search logged beyond info:\n%s", strings.Join(searchTrouble(t, h), "\n"))
				}
			}
		}
		// The cursor alice's agent held before the kill still works.
		replay, err := l.replay(t, alice, hc.at)
		if err != nil {
			t.Errorf("events.poll from the cursor held before the kill of %s (%d): %v", victim, hc.at, err)
		}
		hc.replay = replay
		held = append(held, hc)
		time.Sleep(1500 * time.Millisecond) // the load goes on against the healed host
	}
	stopLoad()
	waitLoad()
	l.setPhase("after")
	for _, w := range l.wrong {
		t.Error(w)
	}

	// Judge every call against the windows.
	calls := l.snapshot()
	type tally struct {
		n         map[callVerdict]int
		gapTook   []time.Duration // restarting errors
		otherTook []time.Duration // in flight, undetected
		byCap     map[string]int
	}
	perWindow := make([]tally, len(windows))
	for i := range perWindow {
		perWindow[i] = tally{n: map[callVerdict]int{}, byCap: map[string]int{}}
	}
	unknown, nothingRan := failedCreates(calls)
	outside := 0
	for _, c := range calls {
		v, w := classifyCall(c, windows)
		if w == nil {
			if v != vOK {
				t.Errorf("%s as %s sent at +%v failed outside any restart window: %s", c.op, c.user, c.o.sent.Sub(began).Round(time.Millisecond), c.o)
			} else {
				outside++
			}
			continue
		}
		ti := &perWindow[slices.IndexFunc(windows, func(x restartWindow) bool { return x.killed.Equal(w.killed) })]
		ti.n[v]++
		switch v {
		case vRestarting:
			ti.gapTook = append(ti.gapTook, c.o.took)
			ti.byCap[string(c.op)]++
			if c.o.took > time.Second {
				t.Errorf("%s sent %v after the kill of %s took %v to fail with %q; want well under a second",
					c.op, c.o.sent.Sub(w.killed).Round(time.Millisecond), w.plugin, c.o.took, c.o.text)
			}
		case vInFlight, vUndetected:
			t.Logf("%s: %s sent %v after the kill of %s, answered after %v: %s", v, c.op, c.o.sent.Sub(w.killed).Round(time.Millisecond),
				w.plugin, c.o.took.Round(time.Microsecond), c.o)
			ti.otherTook = append(ti.otherTook, c.o.took)
			if c.o.took > 10*time.Second {
				t.Errorf("%s %s (%v after the kill of %s) took %v to fail: %s", v, c.op, c.o.sent.Sub(w.killed).Round(time.Millisecond), w.plugin, c.o.took, c.o)
			}
		case vError:
			t.Errorf("%s as %s sent %v after the kill of %s (healthy again at +%v) answered %s; only the restarting error, or an internal error for a call the kill cut short, may fail",
				c.op, c.user, c.o.sent.Sub(w.killed).Round(time.Millisecond), w.plugin, w.healthy.Sub(w.killed).Round(time.Millisecond), c.o)
		}
	}
	for i, w := range windows {
		ti := perWindow[i]
		t.Logf("window of %s (%v): %d successes, %d restarting errors %v (took p50 %v, max %v), %d in flight at the kill, %d sent before the host noticed (took max %v)",
			w.plugin, w.healthy.Sub(w.killed).Round(time.Millisecond), ti.n[vOK], ti.n[vRestarting], ti.byCap,
			loadQuantile(ti.gapTook, 0.5).Round(time.Microsecond), loadQuantile(ti.gapTook, 1).Round(time.Microsecond),
			ti.n[vInFlight], ti.n[vUndetected], loadQuantile(ti.otherTook, 1).Round(time.Microsecond))
		if ti.n[vRestarting] == 0 {
			t.Errorf("no call met the %s plugin down (in %v of restart); the gap was not exercised", w.plugin, w.healthy.Sub(w.killed))
		}
	}
	t.Logf("%d calls in all, %d of them outside the windows (all successful)", len(calls), outside)
	for _, c := range calls {
		if c.op == opCreate && !c.ok() && unknownOutcome(c) {
			t.Logf("create with an unknown outcome: %s sent %v: %s", c.key, c.o.sent.Sub(began).Round(time.Millisecond), c.o)
		}
	}

	// Retries with the same key. A create refused because the plugin was
	// down ran nothing, so its retry books the slot; one whose outcome is
	// unknown is held by its key's lease, so the retry runs nothing now and
	// can never book twice; an acknowledged one replays its booking.
	for _, r := range l.retryCreates(nothingRan) {
		if !r.retry.ok() {
			t.Errorf("create %s refused with %q, retried with its key: %s; want the booking", r.first.key, r.first.o.text, r.retry.o)
		}
	}
	unknownRetries := l.retryCreates(unknown)
	for _, r := range unknownRetries {
		switch {
		case r.retry.ok():
			t.Logf("create %s (first: %s) retried: %s", r.first.key, r.first.o, r.retry.o)
		case r.retry.o.isError && strings.Contains(r.retry.o.text, "still running or its outcome is not known yet"):
		default:
			t.Errorf("create %s (first: %s) retried with its key: %s; want its outcome or the lease's wait", r.first.key, r.first.o, r.retry.o)
		}
	}
	for _, r := range l.retryCreates(earlyCreates) {
		if !r.retry.ok() || string(r.retry.o.structured) != string(r.first.o.structured) {
			t.Errorf("acknowledged create %s retried with its key after the restarts answered %s, first %s", r.first.key, r.retry.o, r.first.o.structured)
		}
	}
	t.Logf("retried with their keys: %d creates refused as restarting (now booked), %d with unknown outcome, %d acknowledged (replayed)",
		len(nothingRan), len(unknown), len(earlyCreates))

	// The search index resumed from its cursor each time.
	ready, resynced := searchReadyLines(t, h)
	if len(ready) != 2 {
		t.Errorf("search index ready logged %d times, want 2 (start, restart):\n%s", len(ready), strings.Join(ready, "\n"))
	} else {
		if got := logAttr(ready[0], "resumed"); got != "false" {
			t.Errorf("first search start: resumed=%s, want false (a fresh index): %s", got, ready[0])
		}
		if got, ents := logAttr(ready[1], "resumed"), logAttr(ready[1], "entities"); got != "true" || ents != "[]" {
			t.Errorf("search after its restart: resumed=%s entities=%s, want it to resume from its cursor without syncing: %s", got, ents, ready[1])
		}
		t.Logf("search restarted: %s", ready[1])
	}
	for _, line := range resynced {
		t.Errorf("the search index resynced instead of resuming: %s", line)
	}

	// Everything polled, and read back from the host.
	l.drain(t)
	for i, hc := range held {
		a := l.agents[alice.name]
		a.mu.Lock()
		var want []polledEvent
		last := hc.at
		if n := len(hc.replay); n > 0 {
			last = hc.replay[n-1].Cursor
		}
		for _, e := range a.events {
			if e.Cursor > hc.at && e.Cursor <= last {
				want = append(want, e)
			}
		}
		a.mu.Unlock()
		if !slices.Equal(hc.replay, want) {
			t.Errorf("events.poll from cursor %d held before kill %d: %d events, the agent that kept polling saw %d in the same range",
				hc.at, i+1, len(hc.replay), len(want))
		}
		t.Logf("cursor %d held before the kill of %s: %d events after it, as the polling agent saw them", hc.at, windows[i].plugin, len(hc.replay))
	}
	created, stored, wc := l.stopAndCheckWrites(t, dir, l.acknowledged(), 30*time.Second)
	for _, r := range unknownRetries {
		res, start := r.first.args["resource_id"].(string), r.first.args["start"].(string)
		n := 0
		for _, s := range stored {
			if s.resource == res && s.start == start {
				n++
			}
		}
		t.Logf("create %s with unknown outcome: %d booking(s) of its slot stored", r.first.key, n)
	}
	ec := checkEvents(l.agents, created, stored)
	for _, s := range append(append(ec.missing, ec.repeated...), ec.phantom...) {
		t.Errorf("events.poll: %s", s)
	}
	t.Logf("%d bookings answered as created, %d stored on the load's resources; each acknowledged one polled once by its user (%d checked)",
		len(created), wc.stored, ec.seen)
	checkSQLite(t, dir, created)
	t.Logf("took %v", time.Since(began).Round(time.Millisecond))
}
