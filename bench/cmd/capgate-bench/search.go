package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// The search rows: capgate's platform.search over a generated catalogue,
// and the same queries on the same index called in-process (the floor).
const (
	// keySearch selects both rows with -only; it is the capgate row's key.
	keySearch = "search"
	// keySearchFloor is the floor row's key; it is run with keySearch.
	keySearchFloor = "search-floor"
	// keySearch1 and keySearchFloor1 are the same at one connection and
	// one goroutine: no queueing, so p50 is the time of one search.
	keySearch1      = "search-c1"
	keySearchFloor1 = "search-floor-c1"
)

// searchKeys are the search rows' keys: capgate, floor at the bench's
// connections, then at one.
var searchKeys = []string{keySearch, keySearchFloor, keySearch1, keySearchFloor1}

// Binaries of the search rows, in the bin directory.
const (
	syntheticPluginBin = "capgate-plugin-synthetic"
	searchPluginBin    = "capgate-plugin-search"
	// searchFloorBin is the floor, BenchmarkFloor's test binary.
	searchFloorBin = "capgate-search-floor.test"
)

const (
	searchTool = "platform.search"
	// searchEntity is the synthetic plugin's entity type; every hit of
	// every bench query is one.
	searchEntity = "synthetic.item"
	// searchPlugin is the search plugin's name in the bench config; its
	// index lives in <data_dir>/plugins/<name>/index.
	searchPlugin = "search"
	// searchLimit is the limit of every bench search.
	searchLimit = 10
	// searchReadyLog is what the search plugin logs once its first full
	// sync is done.
	searchReadyLog = "search index ready"
	// searchRole is the bench token's role in the search config.
	searchRole = "reader"
)

// searchRequestTimeout replaces wrk's 2 s timeout in the search row: with
// 64 searches in flight on a small machine, a broad query's answer can
// queue for longer, and a slow answer is a latency to report, not a
// failure. The floor has no timeout.
const searchRequestTimeout = 30 * time.Second

// Targets of the search rows: capgate's platform.search keeps at least
// searchMinRatio of the floor's throughput and adds at most searchMaxAddedP50
// to its median latency.
const (
	searchMinRatio    = 0.8
	searchMaxAddedP50 = 300 * time.Microsecond
)

// searchQueries are the bench queries: one- and two-word match queries in
// the synthetic catalogue's vocabulary (features, sports, plan tiers and
// perks, classes and levels, coaches, names and wings), each matching from
// a few hundred to tens of thousands of the 100 000 documents, as a
// catalogue search would.
var searchQueries = []string{
	"whiteboard", "floodlights", "natural light", "blackout blinds", "coffee machine",
	"standing desk", "second monitor", "desk lamp", "docking station", "sprung floor",
	"showers", "lockers", "spectator seating", "racket hire", "mirrors",
	"sound system", "yoga mats", "piano", "tennis court", "squash",
	"badminton", "basketball court", "volleyball", "padel", "premium annual",
	"student monthly", "family plan", "business weekly", "guest passes", "priority support",
	"towel service", "off-peak access", "class credits", "yoga beginners", "pilates",
	"spinning advanced", "boxing", "zumba", "rowing", "climbing intermediate",
	"swimming", "circuit training", "anna", "dmitri", "greta",
	"cedar room", "maple studio", "willow desk", "north wing", "quiet room",
}

// searchIn is platform.search's input.
type searchIn struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

// searchOut is the part of platform.search's output the bench reads.
type searchOut struct {
	Hits []struct {
		Entity string `json:"entity"`
		ID     string `json:"id"`
	} `json:"hits"`
}

// searchBodies are the tools/call bodies of the bench queries, in order.
func searchBodies(queries []string) ([][]byte, error) {
	out := make([][]byte, len(queries))
	for i, q := range queries {
		b, err := toolCallBody(searchTool, searchIn{Query: q, Limit: searchLimit})
		if err != nil {
			return nil, err
		}
		out[i] = b
	}
	return out, nil
}

// searchConfig is the configuration of the search rows: the synthetic
// catalogue of documents items and the search plugin, the search pack on,
// and the bench token reading the catalogue.
func searchConfig(binDir, dataDir, listen string, documents int) capgateConfig {
	return capgateConfig{
		Enabled: true,
		Listen:  listen,
		DataDir: dataDir,
		Tokens:  []tokenConfig{{Token: benchToken, Role: searchRole, Scope: "read"}},
		Roles:   map[string][]string{searchRole: {"catalogue.read"}},
		Packs:   map[string]bool{"search": true},
		Plugins: []pluginConfig{
			{Name: "synthetic", Path: filepath.Join(binDir, syntheticPluginBin), Config: map[string]any{"documents": documents}},
			{Name: searchPlugin, Path: filepath.Join(binDir, searchPluginBin)},
		},
	}
}

// searchIndexDir is where the search plugin of a capgate with dataDir keeps
// its index.
func searchIndexDir(dataDir string) string {
	return filepath.Join(dataDir, "plugins", searchPlugin, "index")
}

// lastItem is the id of the last synthetic item and the number its title
// ends with, a word no other document holds.
func lastItem(documents int) (id, word string) {
	return fmt.Sprintf("item-%06d", documents-1), strconv.Itoa(documents - 1)
}

// searchRound is what one round learnt about the index.
type searchRound struct {
	build time.Duration // capgate start → every document searchable
	sync  time.Duration // the search plugin's own sync time, from its log; 0 if not logged
	size  int64         // bytes on disk once capgate stopped
	// mismatched are the queries whose hits differ between capgate and
	// the floor.
	mismatched []string
}

// measureSearch runs the search rows once: it starts capgate with the
// synthetic catalogue and the search plugin, waits for the index, measures
// platform.search at the bench's connections and at one, stops capgate,
// and measures the floor, the same two ways, on the index capgate's search
// plugin built.
func (b *bench) measureSearch(ctx context.Context) {
	// The other rows come with the search row; a failure of one ends them
	// all for the later rounds.
	if !b.selected(keySearch) {
		return
	}
	for _, k := range searchKeys {
		if b.rows[k] != nil && b.rows[k].err != nil {
			return
		}
	}
	failAll := func(err error) {
		for _, k := range searchKeys {
			b.fail(k, err)
		}
	}
	failFloor := func(err error) {
		b.fail(keySearchFloor, err)
		b.fail(keySearchFloor1, err)
	}
	floor, err := filepath.Abs(filepath.Join(b.opts.bin, searchFloorBin))
	if err == nil {
		if _, err = os.Stat(floor); err != nil {
			err = fmt.Errorf("%s not found (make bench builds it: go test -c -o %s ./plugins/search/internal/index): %w", searchFloorBin, floor, err)
		}
	}
	if err != nil {
		failAll(err)
		return
	}
	bodies, err := searchBodies(searchQueries)
	if err != nil {
		failAll(err)
		return
	}
	docs := b.opts.searchDocuments
	p, err := startCapgateWith(ctx, b.opts.bin, b.workDir,
		[]string{capgateBin, syntheticPluginBin, searchPluginBin},
		func(abs, dataDir, listen string) capgateConfig { return searchConfig(abs, dataDir, listen, docs) },
		// capgate starts its plugins before it serves, and the search
		// plugin's start is its first full sync: /healthz answers once
		// the index is built.
		b.opts.startTimeout+b.opts.searchTimeout)
	if err != nil {
		failAll(fmt.Errorf("start capgate: %w", err))
		return
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := p.stop(); err != nil {
			slog.Warn("stop capgate", "err", err)
		}
	}
	defer stop()

	slog.Info("waiting for the search index", "documents", docs, "timeout", b.opts.searchTimeout)
	build, err := waitSearchReady(ctx, p, docs, b.opts.searchTimeout)
	if err != nil {
		failAll(fmt.Errorf("%w\ncapgate log (%s):\n%s", err, p.logPath, tailFile(p.logPath, 40)))
		return
	}
	round := searchRound{build: build, sync: pluginSyncTime(p.logPath)}
	slog.Info("search index ready", "documents", docs, "build", build.Round(time.Millisecond), "plugin_sync", round.sync)
	// A freshly built index goes on merging its segments in the
	// background for a while; measuring meanwhile would charge capgate
	// for work the floor, opening the settled index later, never sees.
	idle, err := waitProcessIdle(ctx, p.cpu, b.opts.searchTimeout)
	if err != nil {
		failAll(fmt.Errorf("wait for the index to settle: %w", err))
		return
	}
	slog.Info("search index settled", "after", idle.Round(time.Second))
	capgateHits, err := searchHits(ctx, p.mcpURL(), searchQueries)
	if err != nil {
		failAll(err)
		return
	}
	one := *b.load
	one.threads, one.connections = 1, 1
	j := job{name: keySearch, url: p.mcpURL(), bodies: bodies, marker: searchEntity, cpu: p.cpu, timeout: searchRequestTimeout}
	b.measure(ctx, keySearch, j)
	if ctx.Err() == nil {
		j.name = keySearch1
		b.measureWith(ctx, &one, keySearch1, j)
	}
	stop()
	if ctx.Err() != nil {
		return
	}

	dir := searchIndexDir(p.dataDir)
	if round.size, err = dirSize(dir); err != nil {
		failFloor(err)
		return
	}
	qf := filepath.Join(b.workDir, "search-queries.txt")
	if err := os.WriteFile(qf, []byte(strings.Join(searchQueries, "\n")+"\n"), 0o600); err != nil {
		failFloor(fmt.Errorf("write queries: %w", err))
		return
	}
	fl := &floorRun{bin: floor, index: dir, queries: qf, concurrency: b.load.connections, warmup: b.load.warmup, duration: b.load.duration,
		hits: filepath.Join(b.workDir, "search-floor-hits.jsonl")}
	floorHits, err := fl.check(ctx)
	if err != nil {
		failFloor(err)
		return
	}
	round.mismatched = mismatches(searchQueries, capgateHits, floorHits)
	if len(round.mismatched) > 0 {
		slog.Warn("capgate and the floor answer some queries differently", "queries", round.mismatched)
	}
	b.search = append(b.search, round)
	b.measureFloor(ctx, keySearchFloor, fl)
	if ctx.Err() == nil {
		fl1 := *fl
		fl1.concurrency = 1
		b.measureFloor(ctx, keySearchFloor1, &fl1)
	}
}

// measureFloor runs the floor program once and records the result as key.
func (b *bench) measureFloor(ctx context.Context, key string, fl *floorRun) {
	if b.opts.settle > 0 {
		busy, err := waitQuiet(ctx, b.opts.settle)
		if err != nil {
			b.fail(key, fmt.Errorf("wait for a quiet machine: %w", err))
			return
		}
		if busy >= busyOthers {
			slog.Warn("machine still busy; measuring anyway", "server", key, "busy_cores", fmt.Sprintf("%.2f", busy), "waited", b.opts.settle)
		}
	}
	slog.Info("measuring", "server", key, "index", fl.index, "concurrency", fl.concurrency, "warmup", wrkSeconds(fl.warmup), "duration", wrkSeconds(fl.duration))
	res, err := fl.run(ctx)
	if err != nil {
		b.fail(key, err)
		return
	}
	b.row(key).runs = append(b.row(key).runs, res)
	if !res.valid() {
		slog.Error("invalid run", "server", key, "problem", res.problem())
	}
	slog.Info("measured", "server", key, "rps", fmt.Sprintf("%.0f", res.rps), "p50", res.p50, "p99", res.p99,
		"server_cpu", fmt.Sprintf("%.2f", res.cpu.server), "others_cpu", fmt.Sprintf("%.2f", res.cpu.others))
}

// waitSearchReady waits until every synthetic document is searchable
// through capgate and returns how long after capgate's start that was. The
// index is ready when the search plugin logs that it is, or when the last
// document (synced last, as documents are listed in id order) is found.
func waitSearchReady(ctx context.Context, p *capgateProc, documents int, timeout time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lastID, word := lastItem(documents)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		logged := logContains(p.logPath, searchReadyLog)
		found, err := searchFinds(ctx, p.mcpURL(), word, lastID)
		at := time.Since(p.started)
		switch {
		case found:
			return at, nil
		case logged && err == nil:
			return 0, fmt.Errorf("the search plugin logged %q but %s does not find %s (query %q)", searchReadyLog, searchTool, lastID, word)
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("%s %q does not find %s yet", searchTool, word, lastID)
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("capgate exited while the index was being built: %v", p.waitErr)
		case <-ctx.Done():
			return 0, fmt.Errorf("search index not ready %s after capgate started: %w", timeout, last)
		case <-tick.C:
		}
	}
}

// idleCores is the CPU use below which capgate counts as idle: the index
// has stopped merging.
const idleCores = 0.05

// waitProcessIdle waits until probe's process uses less than idleCores over
// a second, and returns how long that took.
func waitProcessIdle(ctx context.Context, probe cpuProbe, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < limit {
		a, err := probe()
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		b, err := probe()
		if err != nil {
			return 0, err
		}
		if (b-a).Seconds()/time.Since(t0).Seconds() < idleCores {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("capgate still busy %s after the index was ready", limit)
}

// reSyncDuration finds the duration in the search plugin's ready line.
var reSyncDuration = regexp.MustCompile(searchReadyLog + `".*? duration=([0-9][0-9.a-zµ]*)`)

// pluginSyncTime is the sync duration the search plugin logged with its
// ready line, or 0.
func pluginSyncTime(logPath string) time.Duration {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return 0
	}
	m := reSyncDuration.FindSubmatch(b)
	if m == nil {
		return 0
	}
	d, _ := time.ParseDuration(string(m[1]))
	return d
}

// searchFinds reports whether platform.search for query finds the
// synthetic item id among its hits.
func searchFinds(ctx context.Context, url, query, id string) (bool, error) {
	hits, err := searchOnce(ctx, url, query)
	if err != nil {
		return false, err
	}
	return slices.Contains(hits, searchEntity+"/"+id), nil
}

// searchOnce calls platform.search and returns its hits as entity/id.
func searchOnce(ctx context.Context, url, query string) ([]string, error) {
	out, err := callTool(ctx, url, searchTool, searchIn{Query: query, Limit: searchLimit})
	if err != nil {
		return nil, err
	}
	var res searchOut
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("%s output %s: %w", searchTool, snippet(out), err)
	}
	ids := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		ids[i] = h.Entity + "/" + h.ID
	}
	return ids, nil
}

// searchHits runs every query once through capgate and returns the hits of
// each; a query that finds nothing is an error, as the load run would count
// every one of its answers wrong.
func searchHits(ctx context.Context, url string, queries []string) (map[string][]string, error) {
	out := make(map[string][]string, len(queries))
	for _, q := range queries {
		hits, err := searchOnce(ctx, url, q)
		if err != nil {
			return nil, err
		}
		if len(hits) == 0 {
			return nil, fmt.Errorf("%s %q finds nothing in the synthetic catalogue", searchTool, q)
		}
		out[q] = hits
	}
	return out, nil
}

// mismatches lists the queries whose hits differ between a and b.
func mismatches(queries []string, a, b map[string][]string) []string {
	var out []string
	for _, q := range queries {
		if !slices.Equal(a[q], b[q]) {
			out = append(out, q)
		}
	}
	return out
}

// logContains reports whether the file at path contains s.
func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of the index %s: %w", dir, err)
	}
	return total, nil
}

// floorRun runs the floor: BenchmarkFloor of the search plugin's index
// package (plugins/search/internal/index), compiled into a test binary (make
// bench: go test -c -o bin/capgate-search-floor.test
// ./plugins/search/internal/index), which calls index.Search in-process on an
// index directory with the search plugin's runtime tuning.
type floorRun struct {
	bin string
	// index is the directory of the index the search plugin built; empty
	// lets the benchmark generate one of its own (the tests do).
	index            string
	queries          string // a file of queries, one a line
	concurrency      int
	warmup, duration time.Duration
	// hits is where check has the benchmark write each query's hits.
	hits string
}

// command is the benchmark at goroutines for benchtime, after warmup.
func (f *floorRun) command(ctx context.Context, goroutines int, benchtime string, warmup time.Duration, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, f.bin, "-test.run", "^$", "-test.bench", "^"+floorBenchmark+"$", "-test.benchtime", benchtime, "-test.count", "1")
	cmd.Env = append(childEnv(os.Environ()),
		"CAPGATE_FLOOR_QUERIES="+f.queries,
		"CAPGATE_FLOOR_LIMIT="+strconv.Itoa(searchLimit),
		"CAPGATE_FLOOR_GOROUTINES="+strconv.Itoa(goroutines),
		"CAPGATE_FLOOR_WARMUP="+warmup.String())
	if f.index != "" {
		cmd.Env = append(cmd.Env, "CAPGATE_FLOOR_INDEX="+f.index)
	}
	cmd.Env = append(cmd.Env, extra...)
	return cmd
}

// floorBenchmark is the benchmark the floor binary runs.
const floorBenchmark = "BenchmarkFloor"

// check runs every query once on the index and returns the hits of each.
func (f *floorRun) check(ctx context.Context) (map[string][]string, error) {
	cmd := f.command(ctx, 1, "1x", 0, "CAPGATE_FLOOR_HITS="+f.hits)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s (writing the hits of every query): %w: %s", f.bin, err, tailOf(out))
	}
	raw, err := os.ReadFile(f.hits)
	if err != nil {
		return nil, fmt.Errorf("the floor's hits: %w", err)
	}
	out := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var c struct {
			Query string   `json:"query"`
			IDs   []string `json:"ids"`
		}
		if err := dec.Decode(&c); err != nil {
			return nil, fmt.Errorf("the floor's hits %s: %w", f.hits, err)
		}
		out[c.Query] = c.IDs
	}
	return out, nil
}

// run measures the floor: a warm-up and a measured run, as wrk does for
// the servers. Other processes' CPU is the machine's busy time over the
// whole program less the program's own.
func (f *floorRun) run(ctx context.Context) (*result, error) {
	cmd := f.command(ctx, f.concurrency, wrkSeconds(f.duration), f.warmup)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	busy0, err := machineBusy()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", f.bin, err, tailOf(append(stdout.Bytes(), stderr.Bytes()...)))
	}
	wall := time.Since(t0)
	busy1, err := machineBusy()
	if err != nil {
		return nil, err
	}
	own := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return parseFloor(stdout.Bytes(), f.concurrency, busy1-busy0-own, wall)
}

// parseFloor turns the benchmark's result line for goroutines into a
// result; others is the CPU other processes used over wall. The line is
// the testing package's: name, iterations, then value–unit pairs, here
// ns/op and BenchmarkFloor's own (req/s, p50-µs, p99-µs, cpu-s, s, docs,
// errors, empty).
func parseFloor(out []byte, goroutines int, others, wall time.Duration) (*result, error) {
	name := fmt.Sprintf("%s/goroutines=%d", floorBenchmark, goroutines)
	var fields []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == name || strings.HasPrefix(f[0], name+"-")) {
			fields = f
		}
	}
	if len(fields) < 4 || len(fields)%2 != 0 {
		return nil, fmt.Errorf("no %s result in the floor's output %q", name, snippet(out))
	}
	n, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("floor output %q: iterations: %w", fields[1], err)
	}
	m := map[string]float64{}
	for i := 2; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, fmt.Errorf("floor output: %s %s: %w", fields[i], fields[i+1], err)
		}
		m[fields[i+1]] = v
	}
	for _, unit := range []string{"req/s", "p50-µs", "p99-µs", "cpu-s", "s", "errors", "empty"} {
		if _, ok := m[unit]; !ok {
			return nil, fmt.Errorf("floor output %q: no %s", strings.Join(fields, " "), unit)
		}
	}
	if m["s"] <= 0 {
		return nil, fmt.Errorf("floor output %q: no measured time", strings.Join(fields, " "))
	}
	if m["errors"] > 0 {
		slog.Error("searches failed in the floor", "errors", m["errors"], "output", tailOf(out))
	}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	r := &result{
		requests: n,
		rps:      m["req/s"],
		p50:      us(m["p50-µs"]),
		p99:      us(m["p99-µs"]),
		checked:  n,
		// An error or an empty result is a wrong answer, as the wrk
		// script counts them for capgate.
		bad: int64(m["errors"] + m["empty"]),
		cpu: cpuUse{server: m["cpu-s"] / m["s"]},
	}
	if wall > 0 {
		r.cpu.others = max(0, others.Seconds()/wall.Seconds())
	}
	return r, nil
}

// tailOf is the end of a program's output, for error messages: where a
// test binary says what failed.
func tailOf(b []byte) string {
	const max = 1000
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}

// medianDuration is the median of d (the mean of the middle two for an
// even count).
func medianDuration(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// searchRowNames name the search rows in the report.
var searchRowNames = map[string][2]string{
	keySearch:       {"platform.search (capgate)", "HTTP → adapter → gate → gRPC plugin → bleve"},
	keySearchFloor:  {"bleve direct (floor)", "index.Search in-process"},
	keySearch1:      {"platform.search (capgate)", "the same, 1 connection"},
	keySearchFloor1: {"bleve direct (floor)", "the same, 1 goroutine"},
}

// floorOf is the floor row each row is compared with.
var floorOf = map[string]string{keySearch: keySearchFloor, keySearchFloor: keySearchFloor, keySearch1: keySearchFloor1, keySearchFloor1: keySearchFloor1}

// searchReport writes the search rows, the index's build time and size,
// and the two targets.
func searchReport(w io.Writer, env environment, rows map[string]*row, rounds []searchRound, documents int) {
	fmt.Fprintf(w, "\nsearch: %s on a generated catalogue of %s documents (%s), %d one- and two-word queries in turn, limit %d;\n",
		searchTool, thousands(float64(documents)), searchEntity, len(searchQueries), searchLimit)
	fmt.Fprintf(w, "the floor runs the same queries on the same index (the one capgate's search plugin built, after capgate stopped) in-process, no HTTP;\n")
	fmt.Fprintf(w, "first both at %d connections / goroutines (throughput), then both at 1 (no queueing: p50 is one search)\n\n", env.connections)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var nameW, whatW int
	for _, n := range searchRowNames {
		nameW, whatW = max(nameW, utf8.RuneCountInString(n[0])), max(whatW, utf8.RuneCountInString(n[1]))
	}
	pad := func(s string, n int) string { return s + strings.Repeat(" ", n-utf8.RuneCountInString(s)) }
	head := pad("search", nameW) + "\t" + pad("", whatW) + "\treq/s\tp50\tp99\t÷ floor\tCPU\tothers' CPU\t"
	if env.rounds > 1 {
		head += "undisturbed\treq/s range (all)\t"
	}
	fmt.Fprintln(tw, head)
	for i, k := range searchKeys {
		if i == 2 {
			fmt.Fprintln(tw, strings.Repeat("\t", strings.Count(head, "\t")))
		}
		r := rows[k]
		name, what := pad(searchRowNames[k][0], nameW), pad(searchRowNames[k][1], whatW)
		var floor float64
		if f := rows[floorOf[k]]; f.ok() {
			floor = f.rps()
		}
		writeRow(tw, env, name, what, r, floor)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if len(rounds) > 0 {
		builds, syncs, sizes := make([]time.Duration, len(rounds)), make([]time.Duration, 0, len(rounds)), make([]time.Duration, len(rounds))
		for i, r := range rounds {
			builds[i], sizes[i] = r.build, time.Duration(r.size)
			if r.sync > 0 {
				syncs = append(syncs, r.sync)
			}
		}
		fmt.Fprintf(w, "index: %s documents searchable %s after capgate started (full sync from the synthetic plugin through the host",
			thousands(float64(documents)), buildTime(medianDuration(builds)))
		if len(syncs) > 0 {
			fmt.Fprintf(w, "; the search plugin's sync itself %s", buildTime(medianDuration(syncs)))
		}
		fmt.Fprintf(w, "); %.1f MB on disk", float64(medianDuration(sizes))/1e6)
		if len(rounds) > 1 {
			fmt.Fprintf(w, " (medians of %d builds)", len(rounds))
		}
		fmt.Fprintln(w)
		var mism []string
		for _, r := range rounds {
			for _, q := range r.mismatched {
				if !slices.Contains(mism, q) {
					mism = append(mism, q)
				}
			}
		}
		if len(mism) > 0 {
			fmt.Fprintf(w, "! capgate and the floor returned different hits for %d queries (%s): they may not run the same search\n", len(mism), strings.Join(mism, ", "))
		}
	}
	for _, k := range searchKeys {
		r := rows[k]
		name := searchRowNames[k][0] + ", " + searchRowNames[k][1]
		switch {
		case r == nil:
		case r.err != nil:
			fmt.Fprintf(w, "%s FAILED: %v\n", name, r.err)
		case len(r.runs) > 0 && !r.ok():
			fmt.Fprintf(w, "%s INVALID (not a measurement): %s\n", name, r.problem())
		case r.othersCPU() > busyOthers:
			fmt.Fprintf(w, "! other processes used more than %.1f cores during the run of %s: its numbers are lower than on a quiet machine\n", busyOthers, name)
		}
	}
	for _, l := range searchTargetLines(rows, env.connections) {
		fmt.Fprintln(w, l)
	}
}

// searchTargetLines judges the search targets: throughput at the bench's
// connections against the floor at as many goroutines, and the p50 added
// to one search with nothing queued (1 connection against 1 goroutine).
// The p50 difference at full load is stated too, unjudged: there p50 is
// mostly time spent queued behind other searches, and follows throughput,
// which the first target judges.
func searchTargetLines(rows map[string]*row, connections int) []string {
	goalRatio := fmt.Sprintf("platform.search ≥ %s× bleve direct (%d connections)", strconv.FormatFloat(searchMinRatio, 'f', -1, 64), connections)
	goalP50 := fmt.Sprintf("added p50 ≤ %s (1 connection)", latency(searchMaxAddedP50))
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	// unmeasured says why a pair cannot be judged, or "".
	unmeasured := func(keys ...string) string {
		for _, k := range keys {
			r := rows[k]
			name := searchRowNames[k][0] + " " + searchRowNames[k][1]
			switch {
			case r == nil || r.err != nil || len(r.runs) == 0:
				return name + " was not measured"
			case !r.ok():
				return fmt.Sprintf("%s: run invalid (%s)", name, r.problem())
			}
		}
		return ""
	}
	var out []string
	if why := unmeasured(keySearch, keySearchFloor); why != "" {
		out = append(out, "FAIL  "+goalRatio+": "+why)
	} else {
		c, f := rows[keySearch].rps(), rows[keySearchFloor].rps()
		out = append(out, fmt.Sprintf("%s  %s: capgate %s req/s vs floor %s req/s = %.2f× (needs ≥ %.2f×)",
			verdict(c >= searchMinRatio*f), goalRatio, thousands(c), thousands(f), c/f, searchMinRatio))
	}
	if why := unmeasured(keySearch1, keySearchFloor1); why != "" {
		out = append(out, "FAIL  "+goalP50+": "+why)
	} else {
		c, f := rows[keySearch1].p50(), rows[keySearchFloor1].p50()
		out = append(out, fmt.Sprintf("%s  %s: capgate p50 %s − floor p50 %s = %s (needs ≤ %s)",
			verdict(c-f <= searchMaxAddedP50), goalP50, latency(c), latency(f), signedLatency(c-f), latency(searchMaxAddedP50)))
	}
	if unmeasured(keySearch, keySearchFloor) == "" {
		c, f := rows[keySearch].p50(), rows[keySearchFloor].p50()
		out = append(out, fmt.Sprintf("      at %d connections: capgate p50 %s − floor p50 %s = %s (not judged: under full load p50 is mostly queueing, and follows throughput)",
			connections, latency(c), latency(f), signedLatency(c-f)))
	}
	return out
}

// signedLatency is latency with a minus sign for a negative d.
func signedLatency(d time.Duration) string {
	if d < 0 {
		return "−" + latency(-d)
	}
	return latency(d)
}

// buildTime renders an index build time.
func buildTime(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return d.Round(time.Second).String()
}
