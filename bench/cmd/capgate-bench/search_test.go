package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSearchQueries(t *testing.T) {
	if n := len(searchQueries); n < 40 || n > 60 {
		t.Errorf("%d queries, want about 50", n)
	}
	seen := map[string]bool{}
	for _, q := range searchQueries {
		if w := len(strings.Fields(q)); w < 1 || w > 2 || strings.TrimSpace(q) != q {
			t.Errorf("query %q: want one or two words", q)
		}
		if seen[q] {
			t.Errorf("query %q twice", q)
		}
		seen[q] = true
	}
	bodies, err := searchBodies(searchQueries[:2])
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Method string `json:"method"`
		Params struct {
			Name      string   `json:"name"`
			Arguments searchIn `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(bodies[1], &req); err != nil {
		t.Fatal(err)
	}
	if req.Method != "tools/call" || req.Params.Name != searchTool || req.Params.Arguments != (searchIn{Query: searchQueries[1], Limit: searchLimit}) {
		t.Errorf("body = %s", bodies[1])
	}
}

// The search config is one capgate accepts: the bench token reads the
// catalogue, the search pack is on, and both plugins are configured.
func TestSearchConfigLoads(t *testing.T) {
	bin, data := t.TempDir(), t.TempDir()
	cfg := searchConfig(bin, data, "127.0.0.1:18081", 1234)
	raw := validate(t, cfg)
	if len(cfg.Tokens) != 1 || cfg.Tokens[0].Scope != "read" {
		t.Fatalf("tokens = %+v", cfg.Tokens)
	}
	if perms := cfg.Roles[cfg.Tokens[0].Role]; !slices.Equal(perms, []string{"catalogue.read"}) {
		t.Errorf("role %q = %v", cfg.Tokens[0].Role, perms)
	}
	if !cfg.Packs["search"] {
		t.Errorf("packs = %v", cfg.Packs)
	}
	byName := map[string]pluginConfig{}
	for _, p := range cfg.Plugins {
		byName[p.Name] = p
	}
	if byName["synthetic"].Path != filepath.Join(bin, syntheticPluginBin) || byName[searchPlugin].Path != filepath.Join(bin, searchPluginBin) {
		t.Errorf("plugins = %+v", cfg.Plugins)
	}
	if !strings.Contains(string(raw), "documents: 1234") {
		t.Errorf("the synthetic plugin's documents are not set:\n%s", raw)
	}
	if got := searchIndexDir(data); got != filepath.Join(data, "plugins", "search", "index") {
		t.Errorf("index dir = %s", got)
	}
}

func TestLastItem(t *testing.T) {
	if id, word := lastItem(100_000); id != "item-099999" || word != "99999" {
		t.Errorf("lastItem = %s, %s", id, word)
	}
}

func TestRowKeys(t *testing.T) {
	if got := rowKeys([]string{keyCapgate, keySearch}); !slices.Equal(got, []string{keyCapgate, keySearch, keySearchFloor, keySearch1, keySearchFloor1}) {
		t.Errorf("rowKeys = %v", got)
	}
}

func TestParseSearchFlags(t *testing.T) {
	o, err := parseFlags([]string{"-only", "search", "-search-documents", "5000", "-search-ready-timeout", "1m"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.only, []string{keySearch}) || o.searchDocuments != 5000 || o.searchTimeout != time.Minute {
		t.Errorf("options = %+v", o)
	}
	for _, bad := range [][]string{{"-search-documents", "0"}, {"-search-documents", "1000001"}, {"-search-ready-timeout", "0s"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// floorOutput is what the floor's test binary prints for one run.
const floorOutput = `goos: linux
goarch: amd64
pkg: github.com/capgate/capgate/plugins/search/internal/index
cpu: Intel(R) Xeon(R) Processor
BenchmarkFloor/goroutines=64-2         	    2000	   5000000 ns/op	        19.00 cpu-s	    100000 docs	         0 empty	         0 errors	    310500 p50-µs	    900000 p99-µs	       200.0 req/s	        10.00 s
PASS
`

func TestParseFloor(t *testing.T) {
	r, err := parseFloor([]byte(floorOutput), 64, 3*time.Second, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 2000 || r.rps != 200 || r.p50 != 310500*time.Microsecond || r.p99 != 900*time.Millisecond || !r.valid() {
		t.Errorf("result %+v", r)
	}
	if r.cpu.server != 1.9 || r.cpu.others != 0.2 {
		t.Errorf("cpu %+v", r.cpu)
	}
	bad := strings.NewReplacer("0 empty", "2 empty", "0 errors", "1 errors").Replace(floorOutput)
	r, err = parseFloor([]byte(bad), 64, -time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.valid() || r.bad != 3 || r.cpu.others != 0 {
		t.Errorf("a run with errors: %+v", r)
	}
	for name, out := range map[string]string{
		"empty":              "",
		"another goroutines": floorOutput,
		"failed":             "--- FAIL: BenchmarkFloor\nFAIL\n",
		"no req/s":           strings.Replace(floorOutput, "req/s", "x/s", 1),
		"odd fields":         strings.Replace(floorOutput, " 0 errors", "", 1) + "BenchmarkFloor/goroutines=64-2 1 2\n",
	} {
		g := 64
		if name == "another goroutines" {
			g = 1
		}
		if _, err := parseFloor([]byte(out), g, 0, time.Second); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestMismatches(t *testing.T) {
	a := map[string][]string{"x": {"e/1", "e/2"}, "y": {"e/3"}, "z": {"e/4"}}
	b := map[string][]string{"x": {"e/1", "e/2"}, "y": {"e/5"}}
	if got := mismatches([]string{"x", "y", "z"}, a, b); !slices.Equal(got, []string{"y", "z"}) {
		t.Errorf("mismatches = %v", got)
	}
}

func TestMedianDuration(t *testing.T) {
	if medianDuration(nil) != 0 || medianDuration([]time.Duration{3, 1, 2}) != 2 || medianDuration([]time.Duration{4, 1, 3, 2}) != 2 {
		t.Error("wrong medians")
	}
}

func measuredAt(rps float64, p50 time.Duration) *row {
	return &row{runs: []*result{{rps: rps, requests: 100, checked: 100, p50: p50, p99: 3 * p50}}}
}

func TestSearchTargetLines(t *testing.T) {
	ms := time.Millisecond
	loaded := func(c, f *row) map[string]*row {
		return map[string]*row{keySearch: c, keySearchFloor: f, keySearch1: measuredAt(200, 5*ms), keySearchFloor1: measuredAt(210, 5*ms-100*time.Microsecond)}
	}
	single := func(c, f *row) map[string]*row {
		return map[string]*row{keySearch: measuredAt(90, 300*ms), keySearchFloor: measuredAt(100, 250*ms), keySearch1: c, keySearchFloor1: f}
	}
	for name, tc := range map[string]struct {
		rows map[string]*row
		want [2]string
	}{
		"both pass":         {loaded(measuredAt(90, 300*ms), measuredAt(100, 250*ms)), [2]string{"PASS", "PASS"}},
		"slower than 0.8×":  {loaded(measuredAt(79, 300*ms), measuredAt(100, 250*ms)), [2]string{"FAIL", "PASS"}},
		"faster than floor": {loaded(measuredAt(120, 200*ms), measuredAt(100, 250*ms)), [2]string{"PASS", "PASS"}},
		"p50 added":         {single(measuredAt(200, 5*ms), measuredAt(210, 4*ms)), [2]string{"PASS", "FAIL"}},
		"p50 just within":   {single(measuredAt(200, 5*ms), measuredAt(210, 4700*time.Microsecond)), [2]string{"PASS", "PASS"}},
		"floor failed":      {loaded(measuredAt(100, ms), &row{err: errTest}), [2]string{"FAIL", "PASS"}},
		"capgate invalid":   {single(&row{runs: []*result{{rps: 1, requests: 2, checked: 2, bad: 1}}}, measuredAt(100, ms)), [2]string{"PASS", "FAIL"}},
		"not run":           {map[string]*row{}, [2]string{"FAIL", "FAIL"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := searchTargetLines(tc.rows, 64)
			if len(got) < 2 || !strings.HasPrefix(got[0], tc.want[0]+" ") || !strings.HasPrefix(got[1], tc.want[1]+" ") {
				t.Errorf("got %q, want %v", got, tc.want)
			}
		})
	}
	got := searchTargetLines(loaded(measuredAt(120, 8*ms), measuredAt(100, 10*ms)), 64)
	if len(got) != 3 || !strings.Contains(got[0], "= 1.20×") || !strings.Contains(got[1], "= 100µs") ||
		!strings.Contains(got[2], "at 64 connections: capgate p50 8.00ms − floor p50 10.00ms = −2.00ms (not judged") {
		t.Errorf("figures: %q", got)
	}
}

func TestSearchReport(t *testing.T) {
	rows := map[string]*row{
		keySearch:       measuredAt(180, 350*time.Millisecond),
		keySearchFloor:  measuredAt(200, 330*time.Millisecond),
		keySearch1:      measuredAt(250, 4*time.Millisecond),
		keySearchFloor1: measuredAt(260, 3800*time.Microsecond),
	}
	rounds := []searchRound{{build: 42500 * time.Millisecond, sync: 40 * time.Second, size: 85_300_000, mismatched: []string{"piano"}}}
	env := environment{wrk: "wrk x", threads: 2, connections: 64, warmup: "2s", duration: "10s", rounds: 1}
	var b bytes.Buffer
	report(&b, env, rows, []string{keySearch})
	searchReport(&b, env, rows, rounds, 100_000)
	out := b.String()
	for _, want := range []string{
		"100,000 documents", "platform.search (capgate)", "bleve direct (floor)", "the same, 1 connection", "180", "0.90×", "0.96×", "1.00×",
		"searchable 42.5 s after capgate started", "the search plugin's sync itself 40.0 s", "85.3 MB on disk", "different hits for 1 queries (piano)",
		"PASS  platform.search ≥ 0.8× bleve direct (64 connections)", "PASS  added p50 ≤ 300µs (1 connection): capgate p50 4.00ms − floor p50 3.80ms = 200µs",
		"at 64 connections: capgate p50 350ms − floor p50 330ms = 20.00ms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, greetTool) {
		t.Errorf("the hello.greet table is printed though only search was selected:\n%s", out)
	}

	b.Reset()
	rows[keySearchFloor] = &row{err: errTest}
	searchReport(&b, env, rows, nil, 100_000)
	for _, want := range []string{"FAILED", "bleve direct (floor), index.Search in-process FAILED: test failure", "FAIL  platform.search ≥ 0.8× bleve direct (64 connections): bleve direct (floor) index.Search in-process was not measured"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// fakeSearch answers platform.search like capgate: nothing until the index
// holds the last item, after ready calls.
func fakeSearch(t *testing.T, ready int64, lastID string) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req struct {
			Params struct {
				Name      string   `json:"name"`
				Arguments searchIn `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.Params.Name != searchTool {
			t.Errorf("unexpected request %s", raw)
		}
		hits := `{"entity":"synthetic.item","id":"item-000001"}`
		if calls.Add(1) > ready {
			hits += `,{"entity":"synthetic.item","id":"` + lastID + `"}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"hits":[%s]}}}`, hits)
	})), &calls
}

func TestWaitSearchReady(t *testing.T) {
	srv, calls := fakeSearch(t, 3, "item-000999")
	defer srv.Close()
	logPath := filepath.Join(t.TempDir(), "capgate.log")
	if err := os.WriteFile(logPath, []byte("starting\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &capgateProc{base: srv.URL, logPath: logPath, started: time.Now(), exited: make(chan struct{})}
	// mcpURL appends the MCP path; the fake answers on every path.
	build, err := waitSearchReady(context.Background(), p, 1000, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 4 || build < 500*time.Millisecond {
		t.Errorf("ready after %d calls, %s", calls.Load(), build)
	}

	// Logged ready but the last item is missing: an error, at once.
	srv2, _ := fakeSearch(t, 1<<40, "item-000999")
	defer srv2.Close()
	if err := os.WriteFile(logPath, []byte("level=INFO msg=\"search index ready\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p2 := &capgateProc{base: srv2.URL, logPath: logPath, started: time.Now(), exited: make(chan struct{})}
	if _, err := waitSearchReady(context.Background(), p2, 1000, 10*time.Second); err == nil || !strings.Contains(err.Error(), "does not find item-000999") {
		t.Errorf("err = %v", err)
	}

	// Never ready: the timeout says what was last seen.
	if err := os.WriteFile(logPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := waitSearchReady(context.Background(), p2, 1000, 600*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("err = %v", err)
	}
}

func TestPluginSyncTime(t *testing.T) {
	dir := t.TempDir()
	for line, want := range map[string]time.Duration{
		`time=2026-11-30T10:24:17.616Z level=INFO msg="search index ready" plugin=search documents=100000 entities=[synthetic.item] resumed=false cursor=0 duration=41.25s`: 41250 * time.Millisecond,
		`level=INFO msg="search index ready" plugin=search duration=1m2.5s`:                                                                                                 62500 * time.Millisecond,
		`level=INFO msg="search index ready" plugin=search documents=3`:                                                                                                     0,
		`level=INFO msg="plugin started" duration=3s`:                                                                                                                       0,
	} {
		path := filepath.Join(dir, "log")
		if err := os.WriteFile(path, []byte("before\n"+line+"\nafter duration=9s\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := pluginSyncTime(path); got != want {
			t.Errorf("pluginSyncTime(%s) = %v, want %v", line, got, want)
		}
	}
	if pluginSyncTime(filepath.Join(dir, "missing")) != 0 {
		t.Error("a missing log gives a time")
	}
}

func TestSearchHitsRefusesEmptyQueries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		hits := `{"entity":"synthetic.item","id":"item-000001"}`
		if bytes.Contains(raw, []byte(`"query":"piano"`)) {
			hits = ""
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"hits":[%s]}}}`, hits)
	}))
	defer srv.Close()
	got, err := searchHits(context.Background(), srv.URL, []string{"whiteboard", "squash"})
	if err != nil || !slices.Equal(got["squash"], []string{"synthetic.item/item-000001"}) {
		t.Fatalf("searchHits = %v, %v", got, err)
	}
	if _, err := searchHits(context.Background(), srv.URL, []string{"whiteboard", "piano"}); err == nil || !strings.Contains(err.Error(), `"piano" finds nothing`) {
		t.Errorf("err = %v", err)
	}
}

// TestLoadRotatesBodies runs wrk against a server that records the bodies
// it receives: with several bodies, every one is sent, and the counts add
// up.
func TestLoadRotatesBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wrk")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk not installed")
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if int64(len(raw)) != r.ContentLength {
			t.Errorf("body of %d bytes, Content-Length %d", len(raw), r.ContentLength)
		}
		mu.Lock()
		seen[string(raw)]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"hits":[{"entity":"synthetic.item","id":"item-000001"}]}}}`))
	}))
	defer srv.Close()
	qs := []string{"a", "bb", "ccc dddd", "piano"}
	bodies, err := searchBodies(qs)
	if err != nil {
		t.Fatal(err)
	}
	l := &load{wrk: wrk, threads: 2, connections: 4, duration: time.Second, workDir: t.TempDir()}
	res, err := l.run(context.Background(), job{name: "rotate", url: srv.URL, bodies: bodies, marker: searchEntity, cpu: selfCPU})
	if err != nil {
		t.Fatal(err)
	}
	if !res.valid() {
		t.Errorf("invalid run: %s", res.problem())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range bodies {
		if seen[string(b)] == 0 {
			t.Errorf("body %s never sent (seen %v)", b, seen)
		}
	}
	if len(seen) != len(bodies) {
		t.Errorf("%d distinct bodies sent, want %d", len(seen), len(bodies))
	}
}

// The floor's test binary, on an index of its own making, writes the hits
// of every query and measures a run the bench can read.
func TestFloorBinary(t *testing.T) {
	bin := buildBinaries(t, searchFloorBin)
	dir := t.TempDir()
	qf := filepath.Join(dir, "queries")
	queries := []string{"whiteboard", "tennis court", "premium annual"}
	if err := os.WriteFile(qf, []byte(strings.Join(queries, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fl := &floorRun{bin: filepath.Join(bin, searchFloorBin), queries: qf, concurrency: 2, duration: time.Second, hits: filepath.Join(dir, "hits")}
	ctx := context.Background()
	hits, err := fl.check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if len(hits[q]) == 0 || len(hits[q]) > searchLimit {
			t.Errorf("%q: %d hits", q, len(hits[q]))
		}
	}
	r, err := fl.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !r.valid() || r.requests == 0 || r.rps <= 0 || r.p50 <= 0 || r.p99 < r.p50 || r.cpu.server <= 0 {
		t.Errorf("result %+v: %s", r, r.problem())
	}
}
