package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The replicas config is one capgate accepts: the booking plugin on the
// given dsn (none for SQLite), the events section only with a NATS URL,
// and an admin token that may add resources.
func TestReplicaConfigLoads(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, nats, stream string
	}{
		{"sqlite", "", "", ""},
		{"postgres", "postgres://postgres@127.0.0.1:5432/capgate_bench_x?sslmode=disable", "nats://127.0.0.1:4222", "CAPGATE_BENCH_x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := replicaConfig(t.TempDir(), t.TempDir(), "127.0.0.1:18080", tc.dsn, tc.nats, tc.stream)
			raw := validate(t, cfg)
			if (cfg.Events != nil) != (tc.nats != "") || (cfg.Events != nil && (cfg.Events.NATSURL != tc.nats || cfg.Events.Stream != tc.stream)) {
				t.Errorf("events = %+v, want %q %q", cfg.Events, tc.nats, tc.stream)
			}
			var booking map[string]any
			found := false
			for _, p := range cfg.Plugins {
				if p.Name == "booking" {
					booking, found = p.Config, true
				}
			}
			if !found {
				t.Fatalf("no booking plugin: %+v", cfg.Plugins)
			}
			if dsn, _ := booking["dsn"].(string); dsn != tc.dsn {
				t.Errorf("booking dsn = %q, want %q", dsn, tc.dsn)
			}
			if _, ok := booking["seed"]; ok {
				t.Error("the replicas rows must not seed: two replicas would seed one database twice")
			}
			// Tokens in the order written: the bench customer, then admin.
			if len(cfg.Tokens) != 2 || cfg.Tokens[0].UserID != benchUser || cfg.Tokens[1].Scope != "admin" {
				t.Fatalf("tokens = %+v", cfg.Tokens)
			}
			if !slices.Contains(cfg.Roles[cfg.Tokens[1].Role], "*") {
				t.Errorf("admin token's role %q: %v", cfg.Tokens[1].Role, cfg.Roles)
			}
			if !slices.Contains(cfg.Roles[cfg.Tokens[0].Role], "booking.write") {
				t.Errorf("bench token's role %q: %v", cfg.Tokens[0].Role, cfg.Roles)
			}
			if strings.Contains(string(raw), "events:") != (tc.nats != "") {
				t.Errorf("events section present = %v with nats %q:\n%s", strings.Contains(string(raw), "events:"), tc.nats, raw)
			}
		})
	}
}

func TestReplicaKeys(t *testing.T) {
	keys := replicaKeys()
	if len(keys) != len(replicaTools)*len(replicaSetups) {
		t.Fatalf("keys = %v", keys)
	}
	if keys[0] != "replicas/booking.get/sqlite/1" || keys[len(keys)-1] != "replicas/booking.create/postgres/2" {
		t.Errorf("keys = %v", keys)
	}
	if got := rowKeys([]string{keyCapgate, keyReplicas}); !slices.Equal(got, append([]string{keyCapgate}, keys...)) {
		t.Errorf("rowKeys = %v", got)
	}
}

// The replicas rows need PostgreSQL and NATS: named with -only, not run by
// default.
func TestReplicasOptIn(t *testing.T) {
	o, err := parseFlags(nil, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.only, keyReplicas) {
		t.Errorf("default -only %v includes %s", o.only, keyReplicas)
	}
	o, err = parseFlags([]string{"-only", "replicas", "-pg-dsn", "postgres://x@h/db", "-nats-url", "nats://h:1"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.only, []string{keyReplicas}) || o.replica.pgDSN != "postgres://x@h/db" || o.replica.natsURL != "nats://h:1" {
		t.Errorf("options = %+v", o)
	}
}

func TestCreateSlot(t *testing.T) {
	base := createBase(time.Date(2030, 1, 7, 23, 59, 0, 0, time.UTC))
	if want := time.Date(2030, 1, 9, 0, 0, 0, 0, time.UTC); !base.Equal(want) {
		t.Fatalf("base = %v, want %v", base, want)
	}
	seen := map[string]bool{}
	for n := int64(0); n < createResources*slotsPerDay*2; n++ {
		r, start := createSlot(base, n)
		k := createResourceID(1, "run", r) + "@" + start.Format(time.RFC3339)
		if seen[k] {
			t.Fatalf("slot %d repeats %s", n, k)
		}
		seen[k] = true
		if start.Minute()%createSlotMinutes != 0 || start.Before(base) {
			t.Fatalf("slot %d = %v", n, start)
		}
	}
	if r, s := createSlot(base, createResources+1); r != 1 || !s.Equal(base.Add(createSlotMinutes*time.Minute)) {
		t.Errorf("slot %d = %d %v", createResources+1, r, s)
	}
	// The last slot stays within the plugin's 365-day horizon from now.
	_, last := createSlot(base, createResources*createDays*slotsPerDay-1)
	if last.Sub(base) > 363*24*time.Hour {
		t.Errorf("last slot %v is %v after the base", last, last.Sub(base))
	}
	// Past the end the slots wrap round (and would be refused as taken).
	if _, s := createSlot(base, createResources*createDays*slotsPerDay); !s.Equal(base) {
		t.Errorf("slot after the last = %v", s)
	}
}

func TestSplitLoad(t *testing.T) {
	for _, tc := range []struct {
		conns, threads, n int
		wantC, wantT      []int
	}{
		{64, 2, 1, []int{64}, []int{2}},
		{64, 2, 2, []int{32, 32}, []int{1, 1}},
		{65, 3, 2, []int{33, 32}, []int{2, 1}},
		{1, 1, 2, []int{1, 0}, []int{1, 1}},
	} {
		c, th := splitLoad(tc.conns, tc.threads, tc.n)
		if !slices.Equal(c, tc.wantC) || !slices.Equal(th, tc.wantT) {
			t.Errorf("splitLoad(%d, %d, %d) = %v %v, want %v %v", tc.conns, tc.threads, tc.n, c, th, tc.wantC, tc.wantT)
		}
	}
}

func TestCombine(t *testing.T) {
	a := &result{requests: 100, rps: 10, p50: 2 * time.Millisecond, p99: 9 * time.Millisecond, checked: 100, creates: true, created: 90, taken: 8, bad: 2}
	b := &result{requests: 300, rps: 30, p50: 3 * time.Millisecond, p99: 5 * time.Millisecond, checked: 300, non2xx: 1, sockErrs: 2, creates: true, created: 300}
	c := combine([]*result{a, b})
	if c.requests != 400 || c.rps != 40 || c.checked != 400 || c.created != 390 || c.taken != 8 || c.bad != 2 || c.non2xx != 1 || c.sockErrs != 2 {
		t.Errorf("combined counts = %+v", c)
	}
	if c.p50 != 3*time.Millisecond || c.p99 != 9*time.Millisecond {
		t.Errorf("combined p50, p99 = %v, %v, want the worse of each", c.p50, c.p99)
	}
	if got := c.createdRPS(); got != 40*390.0/400 {
		t.Errorf("createdRPS = %v", got)
	}
	if got := (&result{requests: 10, rps: 5, created: 1}).createdRPS(); got != 5 {
		t.Errorf("createdRPS of a get run = %v, want its rps", got)
	}
	if combine([]*result{a}) != a {
		t.Error("one part is not its own combination")
	}
}

const createOutput = wrkOutput + "capgate-bench-create: created=299000 taken=993 errors=7\n"

func TestParseCreate(t *testing.T) {
	r, err := parseCreate(createOutput)
	if err != nil {
		t.Fatal(err)
	}
	if !r.creates || r.created != 299000 || r.taken != 993 || r.bad != 7 {
		t.Errorf("counts = %+v", r)
	}
	if _, err := parseCreate(wrkOutput); err == nil {
		t.Error("output without the create line parsed")
	}
	ok := strings.Replace(createOutput, "Non-2xx or 3xx responses: 5", "", 1)
	ok = strings.Replace(ok, "Socket errors: connect 0, read 2, write 0, timeout 1", "", 1)
	ok = strings.Replace(ok, "errors=7", "errors=0", 1)
	if r, err := parseCreate(ok); err != nil || !r.valid() {
		t.Errorf("a run with only refusals as taken is not valid: %v %s", err, r.problem())
	}
}

// TestCreateScript runs the create script with wrk for a second against a
// server that records each booking.create: no slot is asked for twice
// across threads, every start is a slot of the script's resources, and the
// counts come back.
func TestCreateScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wrk")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk not installed")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Params struct {
				Name      string `json:"name"`
				Arguments struct {
					ResourceID string `json:"resource_id"`
					Start      string `json:"start"`
				} `json:"arguments"`
			} `json:"params"`
		}
		err := json.NewDecoder(r.Body).Decode(&req)
		a := req.Params.Arguments
		start, perr := time.Parse(time.RFC3339, a.Start)
		mu.Lock()
		k := a.ResourceID + "@" + a.Start
		seen[k]++
		n := seen[k]
		if err != nil || perr != nil || req.Params.Name != "booking.create" || !strings.HasPrefix(a.ResourceID, "res-") || start.Minute()%createSlotMinutes != 0 {
			bad = append(bad, k)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if n > 1 {
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"slot is already booked"}],"isError":true}}`))
			return
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"id":"bk_1","status":"active"}}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	script := filepath.Join(dir, "create.lua")
	const threads = 3
	if err := os.WriteFile(script, []byte(createScript([]string{"res-a", "res-b"}, createBase(time.Now()), threads)), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &load{wrk: wrk, threads: threads, connections: 6, workDir: dir}
	outs, _, err := l.runParts(context.Background(), []wrkPart{{script: script, url: srv.URL, connections: 6, threads: threads}}, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := parseCreate(outs[0])
	if err != nil {
		t.Fatalf("%v\n%s", err, outs[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("%d malformed requests, e.g. %s", len(bad), bad[0])
	}
	if r.created == 0 || r.taken != 0 || r.bad != 0 || r.created+r.taken+r.bad != r.checked {
		t.Errorf("counts = %+v (distinct slots asked: %d)\n%s", r, len(seen), outs[0])
	}
	if !r.valid() {
		t.Errorf("invalid: %s", r.problem())
	}
}
