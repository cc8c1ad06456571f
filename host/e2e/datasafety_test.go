package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/capgate/capgate/sdk/pgtest"
)

// The data safety tests kill a process with SIGKILL in the middle of a
// burst of booking.create calls and then check what an operator is
// promised: every call that was answered as successful is in the database
// afterwards, exactly as answered; no row is half-written or breaks the
// schema's invariants; the database itself is intact; and a host started
// again on the same data serves again.
//
// What a killed booking plugin does to its host (checked by these tests, so
// a change is noticed): the host keeps running and restarts the plugin
// after a short backoff. Calls in flight at the kill answer "internal error
// while running …"; calls in the gap answer at once that the plugin is
// restarting and nothing ran; once it is back, calls succeed again on the
// same database, and a restarted host serves too.

// dsResource is the resource the burst books: 5-minute slots round the
// clock, so a burst never runs out of slots within the booking horizon.
const dsResource = "ds-burst"

// dsWorkers is how many clients create bookings at once.
const dsWorkers = 6

// dsKillAfter is how many bookings must have been answered as created
// before the kill, so the kill lands in the middle of the burst.
const dsKillAfter = 40

// dsBackend is a booking store the test runs against.
type dsBackend struct {
	name string
	// dsn is the PostgreSQL database's, empty for SQLite.
	dsn string
	// bookingConfig is the booking plugin's config block, as a YAML flow
	// mapping.
	bookingConfig string
	// check inspects the database directly after the last host stopped:
	// its integrity, the schema's invariants, and that every booking in
	// want (answered as created) is stored as answered.
	check func(t *testing.T, dataDir string, want map[string]dsBooking)
}

// dsBooking is one booking answered as created, and the token that made it.
type dsBooking struct {
	booking
	CreatedAt string `json:"created_at"`
	user      string
	token     string
}

func TestDataSafety(t *testing.T) {
	needE2E(t)
	backends := []struct {
		name string
		mk   func(t *testing.T) dsBackend
	}{{"sqlite", sqliteBackend}, {"postgres", postgresBackend}}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, victim := range []string{"kill-plugin", "kill-host"} {
				t.Run(victim, func(t *testing.T) {
					be := b.mk(t) // skips when the backend is unavailable
					runDataSafety(t, be, strings.TrimPrefix(victim, "kill-"))
				})
			}
		})
	}
}

// runDataSafety runs one scenario: a burst of creates, SIGKILL of the
// victim ("plugin": the booking plugin's process; "host": capgate itself)
// in the middle of it, a restart on the same data directory, and the
// checks.
func runDataSafety(t *testing.T, be dsBackend, victim string) {
	dir := t.TempDir()
	h := startHostIn(t, dir, be.bookingConfig)
	c := &mcpClient{http: &http.Client{Timeout: 60 * time.Second}}

	if _, err := c.mustCall(t, h, tokenAdmin, "booking.add_resource", map[string]any{
		"id": dsResource, "name": "Burst room", "kind": "room", "capacity": 1,
		"slot_minutes": 5, "opens": "00:00", "closes": "24:00",
	}); err != nil {
		t.Fatalf("booking.add_resource: %v", err)
	}
	// The burst books tomorrow's slots and onwards, one after the other.
	// booking.availability must list tomorrow's first one as free.
	first := startOfDayUTC(time.Now()).Add(24 * time.Hour)
	var avail struct {
		FreeSlots []struct{ Start string } `json:"free_slots"`
	}
	raw, err := c.mustCall(t, h, tokenAlice, "booking.availability", map[string]any{"resource_id": dsResource, "date": first.Format(time.DateOnly)})
	if err != nil {
		t.Fatalf("booking.availability: %v", err)
	}
	if err := json.Unmarshal(raw, &avail); err != nil || len(avail.FreeSlots) != 288 || avail.FreeSlots[0].Start != first.Format(time.RFC3339) {
		t.Fatalf("booking.availability of %s on %s: want 288 free slots from %s, got %s (%v)", dsResource, first.Format(time.DateOnly), first.Format(time.RFC3339), raw, err)
	}
	var next atomic.Int64 // index of the next slot to book
	slot := func() string { return first.Add(time.Duration(next.Add(1)-1) * 5 * time.Minute).Format(time.RFC3339) }

	var (
		mu        sync.Mutex
		created   = map[string]dsBooking{}
		afterKill []dsOutcome // outcomes of calls sent after the kill
		wrong     []string    // answers no call may give, at any time
		killedAt  atomic.Pointer[time.Time]
		stop      atomic.Bool
		workers   sync.WaitGroup
	)
	users := []struct{ user, token string }{{"alice", tokenAlice}, {"bob", tokenBob}}
	for w := range dsWorkers {
		u := users[w%len(users)]
		workers.Go(func() {
			deadline := time.Now().Add(120 * time.Second)
			for !stop.Load() && time.Now().Before(deadline) {
				sent := time.Now()
				start := slot()
				o := c.call(h, u.token, "booking.create", map[string]any{"resource_id": dsResource, "start": start})
				o.sent, o.took = sent, time.Since(sent)
				ka := killedAt.Load()
				mu.Lock()
				if ka != nil && sent.After(*ka) {
					afterKill = append(afterKill, o)
				}
				switch {
				case o.err != nil || o.rpcErr != nil || o.isError:
					// Not answered as created: the booking may or may not be
					// stored, and the checks accept either.
				default:
					var b dsBooking
					if err := json.Unmarshal(o.structured, &b); err != nil || b.ID == "" {
						wrong = append(wrong, fmt.Sprintf("booking.create answered success without a booking: %s", o.structured))
					} else if b.ResourceID != dsResource || b.Start != start || b.Status != "active" {
						wrong = append(wrong, fmt.Sprintf("booking.create of %s at %s answered %s", dsResource, start, o.structured))
					} else if _, dup := created[b.ID]; dup {
						wrong = append(wrong, fmt.Sprintf("booking id %s answered twice", b.ID))
					} else {
						b.user, b.token = u.user, u.token
						created[b.ID] = b
					}
				}
				mu.Unlock()
				if o.err != nil && ka != nil && victim == "host" {
					return // the host is gone: nothing more to send it
				}
				if o.err != nil && ka == nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(created) }
	warm := time.Now().Add(90 * time.Second)
	for count() < dsKillAfter {
		if time.Now().After(warm) {
			stop.Store(true)
			workers.Wait()
			t.Fatalf("only %d bookings created in 90s before the kill; log:\n%s", count(), h.logText())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The kill, while the workers keep sending.
	var pluginPIDs []int
	switch victim {
	case "plugin":
		pluginPIDs = pluginProcs(h.plugins["booking"])
		if len(pluginPIDs) == 0 {
			t.Fatalf("no process runs the booking plugin %s", h.plugins["booking"])
		}
		now := time.Now()
		killedAt.Store(&now)
		for _, pid := range pluginPIDs {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill -9 %d (booking plugin): %v", pid, err)
			}
		}
	case "host":
		pluginPIDs = h.pluginProcs()["booking"]
		h.killed = true
		now := time.Now()
		killedAt.Store(&now)
		if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	killed := count()
	t.Logf("kill -9 of the %s after %d bookings were answered as created", victim, killed)

	if victim == "plugin" {
		// The burst goes on against the host whose plugin died: three
		// seconds of calls, each of which must be answered.
		time.Sleep(3 * time.Second)
	} else {
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the host did not die within 30s of SIGKILL")
		}
	}
	stop.Store(true)
	workers.Wait()
	for _, w := range wrong {
		t.Error(w)
	}
	t.Logf("%d bookings answered as created (%d of them after the kill); %d calls sent after the kill", len(created), len(created)-killed, len(afterKill))

	switch victim {
	case "plugin":
		checkDeadPluginAnswers(t, h, c, afterKill, killedAt.Load())
		// The host restarted the plugin: a new process serves on the same
		// database, and the booking it creates is checked with the rest.
		if left := pluginProcs(h.plugins["booking"]); len(left) != 1 || left[0] == pluginPIDs[0] {
			t.Errorf("booking plugin processes after the kill: %v (killed %v), want one new one", left, pluginPIDs)
		}
		o := c.call(h, tokenAlice, "booking.create", map[string]any{"resource_id": dsResource, "start": slot()})
		var b dsBooking
		if o.err != nil || o.rpcErr != nil || o.isError || json.Unmarshal(o.structured, &b) != nil || b.ID == "" {
			t.Errorf("booking.create %v after the plugin died: want a booking from the restarted plugin, got %s", time.Since(*killedAt.Load()).Round(time.Millisecond), o)
		} else {
			b.user, b.token = "alice", tokenAlice
			created[b.ID] = b
		}
		if code, body := getHealthz(t, h); code != http.StatusOK {
			t.Errorf("GET /healthz after the plugin's restart = %d %s", code, body)
		}
		// A SIGTERM still stops the host cleanly (exit 0 is checked by the
		// harness's stop).
		stopped := time.Now()
		if !h.terminate(30 * time.Second) {
			t.Fatalf("the host did not exit within 30s of SIGTERM")
		}
		t.Logf("the host exited %v after SIGTERM: %v", time.Since(stopped).Round(time.Millisecond), h.state)
	case "host":
		// The kernel's parent-death signal ends the plugins; the restart
		// must not meet the old booking plugin still holding the database.
		deadline := time.Now().Add(15 * time.Second)
		for len(h.pluginProcs()) > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		for _, pid := range pluginPIDs {
			if alive(pid, h.plugins["booking"]) {
				t.Fatalf("booking plugin %d still runs 15s after its host was killed", pid)
			}
		}
	}

	// A host started again on the same data directory serves again, and
	// every booking answered as created is there, as it was answered.
	h2 := startHostIn(t, dir, be.bookingConfig)
	checkCreatedServed(t, h2, c, created)
	o := c.call(h2, tokenAlice, "booking.create", map[string]any{"resource_id": dsResource, "start": slot()})
	if o.err != nil || o.rpcErr != nil || o.isError {
		t.Errorf("booking.create on the restarted host: %s", o)
	} else {
		var b dsBooking
		if err := json.Unmarshal(o.structured, &b); err != nil || b.ID == "" {
			t.Errorf("booking.create on the restarted host answered %s", o.structured)
		} else {
			b.user, b.token = "alice", tokenAlice
			created[b.ID] = b
		}
	}
	if !h2.terminate(30 * time.Second) {
		t.Fatalf("the restarted host did not exit within 30s of SIGTERM")
	}
	be.check(t, dir, created)
}

// checkDeadPluginAnswers checks the calls sent after the booking plugin was
// killed: each was answered, promptly, as a success (before the death, or
// by the restarted plugin: checked against the database), an internal
// error (in flight as the process died), or the plugin restarting (sent in
// the gap) — never a hang or a broken connection; and the gap was seen.
func checkDeadPluginAnswers(t *testing.T, h *host, c *mcpClient, after []dsOutcome, killedAt *time.Time) {
	t.Helper()
	var internal, restarting, ok, other int
	for _, o := range after {
		switch {
		case o.err != nil:
			t.Errorf("a call sent %v after the plugin died got no answer: %v", o.sent.Sub(*killedAt), o.err)
			other++
		case o.took > 10*time.Second:
			t.Errorf("a call sent %v after the plugin died took %v to answer", o.sent.Sub(*killedAt), o.took)
		case o.isError && strings.Contains(o.text, "internal error while running booking.create"):
			internal++
		case o.isError && strings.Contains(o.text, `plugin "booking" is restarting`) && strings.Contains(o.text, "nothing ran"):
			restarting++
			if o.took > time.Second {
				t.Errorf("a call in the restart gap took %v to be told so", o.took)
			}
		case !o.isError && o.rpcErr == nil:
			ok++
		default:
			t.Errorf("a call sent %v after the plugin died answered %s; want a booking, an internal error or the restarting error", o.sent.Sub(*killedAt), o)
			other++
		}
	}
	if restarting == 0 {
		t.Errorf("no call after the plugin died was told it is restarting (%d calls, %d successes, %d internal errors)", len(after), ok, internal)
	}
	if ok == 0 {
		t.Errorf("no call succeeded after the plugin died: it did not come back within 3s")
	}
	t.Logf("calls after the plugin died: %d internal errors, %d restarting, %d successes, %d other", internal, restarting, ok, other)
}

// checkCreatedServed reads every booking answered as created back through
// booking.get and booking.list on host h, and compares it with the answer.
func checkCreatedServed(t *testing.T, h *host, c *mcpClient, created map[string]dsBooking) {
	t.Helper()
	byUser := map[string][]dsBooking{}
	for _, b := range created {
		byUser[b.token] = append(byUser[b.token], b)
		raw, err := c.mustCall(t, h, b.token, "booking.get", map[string]any{"id": b.ID})
		if err != nil {
			t.Errorf("booking %s (answered as created) after the restart: %v", b.ID, err)
			continue
		}
		var got dsBooking
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Errorf("booking.get %s: %v: %s", b.ID, err, raw)
			continue
		}
		if got.booking != b.booking || got.CreatedAt != b.CreatedAt {
			t.Errorf("booking %s after the restart is %+v, was answered as %+v", b.ID, got, b)
		}
	}
	for token, want := range byUser {
		raw, err := c.mustCall(t, h, token, "booking.list", map[string]any{"status": "active", "limit": 200})
		if err != nil {
			t.Errorf("booking.list: %v", err)
			continue
		}
		var list struct {
			Bookings []dsBooking `json:"bookings"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Errorf("booking.list: %v: %s", err, raw)
			continue
		}
		if len(list.Bookings) == 200 {
			t.Logf("booking.list is full (200): only booking.get checked each of %d bookings", len(want))
			continue
		}
		listed := map[string]dsBooking{}
		for _, b := range list.Bookings {
			listed[b.ID] = b
		}
		for _, b := range want {
			if got, ok := listed[b.ID]; !ok {
				t.Errorf("booking %s (answered as created) missing from booking.list after the restart", b.ID)
			} else if got.booking != b.booking || got.CreatedAt != b.CreatedAt {
				t.Errorf("booking.list shows %s as %+v, was answered as %+v", b.ID, got, b)
			}
		}
	}
}

// sqliteBackend is the booking plugin's default store: booking.db in its
// data directory.
func sqliteBackend(t *testing.T) dsBackend {
	return dsBackend{name: "sqlite", bookingConfig: "{seed: demo}", check: checkSQLite}
}

// checkSQLite opens the booking database read-only once no process uses
// it, and checks its integrity, the invariants of every row and the
// bookings answered as created.
func checkSQLite(t *testing.T, dir string, want map[string]dsBooking) {
	t.Helper()
	path := filepath.Join(dir, "data", "plugins", "booking", "booking.db")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("booking database: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows []string
	r, err := db.Query(`PRAGMA integrity_check`)
	if err != nil {
		t.Fatalf("PRAGMA integrity_check: %v", err)
	}
	for r.Next() {
		var s string
		r.Scan(&s)
		rows = append(rows, s)
	}
	r.Close()
	if len(rows) != 1 || rows[0] != "ok" {
		t.Errorf("PRAGMA integrity_check: %q", rows)
	}
	var fk int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_foreign_key_check`).Scan(&fk); err != nil || fk != 0 {
		t.Errorf("PRAGMA foreign_key_check: %d rows (%v)", fk, err)
	}
	checkInvariants(t, sqlRow(db), "strftime('%s', b.ends_at) - strftime('%s', b.starts_at)")
	checkStored(t, sqlRow(db), want)
}

// dsInvariants are queries for rows that break what the schema promises;
// each must find none. %s is the SQL of a booking's length in seconds.
var dsInvariants = []struct{ what, query string }{
	{"a booking that ends before it starts", `SELECT count(*) FROM bookings b WHERE NOT (b.ends_at > b.starts_at)`},
	{"a booking with an unknown status", `SELECT count(*) FROM bookings b WHERE b.status NOT IN ('active', 'cancelled')`},
	{"a booking whose status and cancelled_at disagree", `SELECT count(*) FROM bookings b WHERE NOT ((b.status = 'active' AND b.cancelled_at IS NULL) OR (b.status = 'cancelled' AND b.cancelled_at IS NOT NULL))`},
	{"a booking with no user, id or creation time", `SELECT count(*) FROM bookings b WHERE b.user_id IS NULL OR b.user_id = '' OR b.id IS NULL OR b.id = '' OR b.created_at IS NULL`},
	{"a booking of no resource", `SELECT count(*) FROM bookings b LEFT JOIN resources r ON r.id = b.resource_id WHERE r.id IS NULL`},
	{"two active bookings of one slot", `SELECT count(*) FROM (SELECT resource_id, starts_at FROM bookings WHERE status = 'active' GROUP BY resource_id, starts_at HAVING count(*) > 1) d`},
	{"a booking not one slot long", `SELECT count(*) FROM bookings b JOIN resources r ON r.id = b.resource_id WHERE %s <> r.slot_minutes * 60`},
}

// queryRow runs one query on the database under test: *sql.DB's QueryRow
// for SQLite, pgx's for PostgreSQL.
type queryRow func(q string, args ...any) interface{ Scan(...any) error }

func sqlRow(db *sql.DB) queryRow {
	return func(q string, args ...any) interface{ Scan(...any) error } { return db.QueryRow(q, args...) }
}

func checkInvariants(t *testing.T, db queryRow, lengthSQL string) {
	t.Helper()
	for _, inv := range dsInvariants {
		q := inv.query
		if strings.Contains(q, "%s") {
			q = fmt.Sprintf(q, lengthSQL)
		}
		var n int
		if err := db(q).Scan(&n); err != nil {
			t.Errorf("checking for %s: %v", inv.what, err)
		} else if n != 0 {
			t.Errorf("the database holds %d × %s", n, inv.what)
		}
	}
}

// checkStored checks that every booking answered as created has its row,
// as answered, and counts the rows of the burst no answer reported (a
// create committed whose answer was lost in the kill: allowed).
func checkStored(t *testing.T, db queryRow, want map[string]dsBooking) {
	t.Helper()
	const q = `SELECT resource_id, user_id, status FROM bookings WHERE id = $1`
	for id, b := range want {
		var res, user, status string
		if err := db(q, id).Scan(&res, &user, &status); err != nil {
			t.Errorf("booking %s (answered as created): %v", id, err)
			continue
		}
		if res != b.ResourceID || user != b.user || status != "active" {
			t.Errorf("booking %s is stored as (%s, %s, %s), was answered as (%s, %s, active)", id, res, user, status, b.ResourceID, b.user)
		}
	}
	var n int
	if err := db(`SELECT count(*) FROM bookings WHERE resource_id = $1`, dsResource).Scan(&n); err != nil {
		t.Errorf("counting the burst's bookings: %v", err)
	} else {
		t.Logf("the database holds %d bookings of %s; %d were answered as created (the rest were committed but their answer was lost in the kill)", n, dsResource, len(want))
		if n < len(want) {
			t.Errorf("the database holds %d bookings of %s, fewer than the %d answered as created", n, dsResource, len(want))
		}
	}
}

// pgBaseDSN is the test PostgreSQL server, as every PostgreSQL test finds
// it (pgtest.EnvDSN overrides pgtest.DefaultDSN).
func pgBaseDSN() string {
	if v := os.Getenv(pgtest.EnvDSN); v != "" {
		return v
	}
	return pgtest.DefaultDSN
}

// postgresBackend runs the booking plugin on PostgreSQL, in a database of
// its own created for the test and dropped after it. It skips the test
// while the booking plugin has no dsn key, and when the server cannot be
// reached outside CI.
func postgresBackend(t *testing.T) dsBackend {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot(t), "plugins", "booking", "internal", "booking", "register.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(`json:"dsn`)) {
		t.Skip("the booking plugin has no dsn config key yet: PostgreSQL data safety not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgBaseDSN())
	if err != nil {
		if inCI() {
			t.Fatalf("PostgreSQL at %s: %v", pgBaseDSN(), err)
		}
		t.Skipf("PostgreSQL at %s unreachable: %v", pgBaseDSN(), err)
	}
	defer admin.Close(context.Background())
	var rnd [6]byte
	rand.Read(rnd[:])
	dbName := "capgate_e2e_ds_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+dbName); err != nil {
		t.Fatalf("CREATE DATABASE %s: %v", dbName, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, pgBaseDSN()); err == nil {
			c.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(pgBaseDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + dbName
	dsn := u.String()
	return dsBackend{
		name:          "postgres",
		dsn:           dsn,
		bookingConfig: fmt.Sprintf("{seed: demo, dsn: %q}", dsn),
		check: func(t *testing.T, _ string, want map[string]dsBooking) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			db := func(q string, args ...any) interface{ Scan(...any) error } { return conn.QueryRow(ctx, q, args...) }
			checkInvariants(t, db, "EXTRACT(EPOCH FROM (b.ends_at::timestamptz - b.starts_at::timestamptz))")
			checkStored(t, db, want)
		},
	}
}

func startOfDayUTC(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// mcpClient sends raw 2025-11-25 tools/call requests, one HTTP exchange
// each, so a test sees exactly which calls were answered and how.
type mcpClient struct {
	http *http.Client
	id   atomic.Int64
}

// dsOutcome is what one call got.
type dsOutcome struct {
	err        error           // no answer: the connection failed or was cut
	status     int             // HTTP status
	rpcErr     json.RawMessage // a JSON-RPC error
	isError    bool            // a tool error result
	text       string          // the result's first text content
	structured json.RawMessage // the result's structuredContent
	sent       time.Time
	took       time.Duration
}

func (o dsOutcome) String() string {
	switch {
	case o.err != nil:
		return "no answer: " + o.err.Error()
	case o.rpcErr != nil:
		return "JSON-RPC error " + string(o.rpcErr)
	case o.isError:
		return "tool error: " + o.text
	}
	return "success: " + string(o.structured)
}

func (c *mcpClient) call(h *host, token, tool string, args any) dsOutcome {
	return c.callMeta(h, token, tool, args, nil)
}

// callMeta is call with _meta in the params (nil: none), e.g. an
// idempotency key.
func (c *mcpClient) callMeta(h *host, token, tool string, args any, meta map[string]any) dsOutcome {
	params := map[string]any{"name": tool, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": c.id.Add(1), "method": "tools/call", "params": params,
	})
	if err != nil {
		return dsOutcome{err: err}
	}
	req, err := http.NewRequest(http.MethodPost, h.url(), bytes.NewReader(body))
	if err != nil {
		return dsOutcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		return dsOutcome{err: err}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return dsOutcome{err: fmt.Errorf("answer cut short: %w", err)}
	}
	return decodeAnswer(resp.StatusCode, answer)
}

// decodeAnswer reads a tools/call answer of HTTP status: its JSON-RPC
// error, or its result's isError, text and structured content. An answer
// that is neither is an error quoting (the start of) it.
func decodeAnswer(status int, answer []byte) dsOutcome {
	o := dsOutcome{status: status}
	var msg struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(answer, &msg); err != nil {
		o.err = fmt.Errorf("HTTP %d, not a JSON-RPC answer (%v): %.300s", status, err, answer)
		return o
	}
	switch {
	case msg.Error != nil:
		o.rpcErr = msg.Error
	case msg.Result == nil:
		o.err = fmt.Errorf("HTTP %d, neither result nor error: %.300s", status, answer)
	default:
		o.isError = msg.Result.IsError
		if len(msg.Result.Content) > 0 {
			o.text = msg.Result.Content[0].Text
		}
		o.structured = msg.Result.StructuredContent
	}
	return o
}

// mustCall is call, with anything but a success as an error.
func (c *mcpClient) mustCall(t *testing.T, h *host, token, tool string, args any) (json.RawMessage, error) {
	t.Helper()
	o := c.call(h, token, tool, args)
	if o.err != nil || o.rpcErr != nil || o.isError {
		return nil, errors.New(o.String())
	}
	return o.structured, nil
}
