package index

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFloor is the floor under platform.search: Search called
// directly, in-process, from a fixed number of goroutines, with nothing of
// the HTTP server, the MCP adapter, the gate or the gRPC hop to the plugin
// that platform.search adds on top of the same call. It runs with the
// search plugin's runtime tuning (TuneGC), so that the two differ only by
// the path a query takes.
//
// Goroutine g starts at query g and goes round the list; each of the b.N
// searches is taken by whichever goroutine is free. Besides ns/op it
// reports req/s, p50-µs and p99-µs (over the searches of the measured
// run), cpu-s (the CPU this process used during it), s (its wall time),
// docs (documents in the index), and errors and empty (searches that failed
// or found nothing: wrong answers).
//
// It is set through the environment; capgate-bench (bench/) sets all of it
// to measure the very index the search plugin built, with the bench's
// queries, after capgate stopped:
//
//	CAPGATE_FLOOR_INDEX       an index directory (its plugin stopped: the index is
//	                          locked while open); unset: a generated 20 000-document one
//	CAPGATE_FLOOR_QUERIES     a file of queries, one a line; unset: floorQueries
//	CAPGATE_FLOOR_GOROUTINES  comma-separated goroutine counts, one sub-benchmark
//	                          each (default 64,1)
//	CAPGATE_FLOOR_LIMIT       hits per search (default 10)
//	CAPGATE_FLOOR_WARMUP      a discarded run before the first measured one, as a
//	                          Go duration (default none)
//	CAPGATE_FLOOR_HITS        a file to write each query's hits to before measuring,
//	                          one JSON object a line: {"query": ..., "ids": ["entity/id", ...]}
//
// For example, on an index of the search plugin's:
//
//	CAPGATE_FLOOR_INDEX=data/plugins/search/index go test -run '^$' \
//	    -bench '^BenchmarkFloor$' -benchtime 10s ./plugins/search/internal/index
func BenchmarkFloor(b *testing.B) {
	cfg, err := floorConfigFromEnv()
	if err != nil {
		b.Fatal(err)
	}
	gc := debug.SetGCPercent(100)
	debug.SetGCPercent(gc)
	TuneGC()
	defer debug.SetGCPercent(gc)

	ctx := context.Background()
	x := openFloorIndex(b, cfg.index)
	defer x.Close()
	docs, err := x.Count()
	if err != nil {
		b.Fatal(err)
	}
	mk := func(q string) Query { return Query{Text: q, Limit: cfg.limit} }
	if cfg.hits != "" {
		if err := writeFloorHits(ctx, x, cfg.hits, cfg.queries, mk); err != nil {
			b.Fatal(err)
		}
	}
	search := func(q string) (int, error) {
		hits, err := x.Search(ctx, mk(q))
		return len(hits), err
	}
	for _, g := range cfg.goroutines {
		warmup := cfg.warmup
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			// The framework calls this with a growing b.N; the warm-up
			// runs before the first call only.
			if warmup > 0 {
				floorLoad(search, cfg.queries, g, 0, warmup)
				warmup = 0
			}
			b.ResetTimer()
			cpu0 := processCPU()
			res := floorLoad(search, cfg.queries, g, b.N, 0)
			cpu := processCPU() - cpu0
			b.StopTimer()
			if res.firstErr != nil {
				b.Logf("%d of %d searches failed, the first: %v", res.errors, res.requests, res.firstErr)
			}
			b.ReportMetric(float64(res.requests)/res.wall.Seconds(), "req/s")
			b.ReportMetric(float64(percentile(res.lat, 50))/1e3, "p50-µs")
			b.ReportMetric(float64(percentile(res.lat, 99))/1e3, "p99-µs")
			b.ReportMetric(cpu.Seconds(), "cpu-s")
			b.ReportMetric(res.wall.Seconds(), "s")
			b.ReportMetric(float64(docs), "docs")
			b.ReportMetric(float64(res.errors), "errors")
			b.ReportMetric(float64(res.empty), "empty")
		})
	}
}

// floorQueries are BenchmarkFloor's queries without CAPGATE_FLOOR_QUERIES:
// one- and two-word queries in the generated catalogue's vocabulary.
var floorQueries = []string{
	"whiteboard", "floodlights", "natural light", "blackout blinds", "coffee machine",
	"air conditioning", "round table", "sprung floor", "lockers", "showers",
	"spectator seating", "racket hire", "tennis court", "squash", "padel",
	"premium annual", "student monthly", "guest passes", "priority support", "class credits",
	"yoga beginners", "pilates", "boxing", "rowing", "anna",
	"greta", "cedar room", "maple studio", "north wing", "quiet room",
}

// floorConfig is BenchmarkFloor's environment, read.
type floorConfig struct {
	index, hits string
	queries     []string
	goroutines  []int
	limit       int
	warmup      time.Duration
}

func floorConfigFromEnv() (floorConfig, error) {
	cfg := floorConfig{
		index:      os.Getenv("CAPGATE_FLOOR_INDEX"),
		hits:       os.Getenv("CAPGATE_FLOOR_HITS"),
		queries:    floorQueries,
		goroutines: []int{64, 1},
		limit:      10,
	}
	if path := os.Getenv("CAPGATE_FLOOR_QUERIES"); path != "" {
		q, err := readQueries(path)
		if err != nil {
			return cfg, err
		}
		cfg.queries = q
	}
	if s := os.Getenv("CAPGATE_FLOOR_GOROUTINES"); s != "" {
		cfg.goroutines = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return cfg, fmt.Errorf("CAPGATE_FLOOR_GOROUTINES=%q: want positive counts separated by commas", s)
			}
			cfg.goroutines = append(cfg.goroutines, n)
		}
	}
	if s := os.Getenv("CAPGATE_FLOOR_LIMIT"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("CAPGATE_FLOOR_LIMIT=%q: want a positive count", s)
		}
		cfg.limit = n
	}
	if s := os.Getenv("CAPGATE_FLOOR_WARMUP"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return cfg, fmt.Errorf("CAPGATE_FLOOR_WARMUP=%q: want a duration such as 2s", s)
		}
		cfg.warmup = d
	}
	return cfg, nil
}

// openFloorIndex opens dir, which must hold an index (Open would create an
// empty one), or, for an empty dir, a generated 20 000-document index that
// has finished merging.
func openFloorIndex(b *testing.B, dir string) *Index {
	if dir != "" {
		if _, err := os.Stat(dir); err != nil {
			b.Fatalf("CAPGATE_FLOOR_INDEX: %v", err)
		}
		x, err := Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		return x
	}
	x, err := Open(filepath.Join(b.TempDir(), "idx"))
	if err != nil {
		b.Fatal(err)
	}
	if err := x.Upsert(context.Background(), generate(20_000, 42)...); err != nil {
		b.Fatal(err)
	}
	settle(b, x)
	return x
}

// readQueries reads the non-empty lines of path.
func readQueries(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if q := strings.TrimSpace(sc.Text()); q != "" {
			out = append(out, q)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no query", path)
	}
	return out, nil
}

// writeFloorHits runs every query once and writes its hits to path.
func writeFloorHits(ctx context.Context, x *Index, path string, queries []string, mk func(string) Query) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, q := range queries {
		hits, err := x.Search(ctx, mk(q))
		if err != nil {
			f.Close()
			return fmt.Errorf("search %q: %w", q, err)
		}
		if err := enc.Encode(struct {
			Query string   `json:"query"`
			IDs   []string `json:"ids"`
		}{q, ids(hits)}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// floorResult is what one floorLoad run counted.
type floorResult struct {
	requests      int
	wall          time.Duration
	lat           []time.Duration
	errors, empty int
	firstErr      error
}

// floorLoad runs search from n goroutines, goroutine g starting at query g
// and going round the list: ops searches in all when ops > 0, else for d.
func floorLoad(search func(string) (int, error), queries []string, n, ops int, d time.Duration) floorResult {
	type worker struct {
		lat           []time.Duration
		errors, empty int
		firstErr      error
	}
	ws := make([]worker, n)
	var taken atomic.Int64
	start := time.Now()
	deadline := start.Add(d)
	more := func(t time.Time) bool {
		if ops > 0 {
			return taken.Add(1) <= int64(ops)
		}
		return t.Before(deadline)
	}
	var wg sync.WaitGroup
	for g := range ws {
		wg.Add(1)
		go func(w *worker, next int) {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !more(t0) {
					return
				}
				hits, err := search(queries[next%len(queries)])
				w.lat = append(w.lat, time.Since(t0))
				switch {
				case err != nil:
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
				case hits == 0:
					w.empty++
				}
				next++
			}
		}(&ws[g], g)
	}
	wg.Wait()
	res := floorResult{wall: time.Since(start)}
	for _, w := range ws {
		res.lat = append(res.lat, w.lat...)
		res.errors += w.errors
		res.empty += w.empty
		if res.firstErr == nil {
			res.firstErr = w.firstErr
		}
	}
	res.requests = len(res.lat)
	return res
}

// percentile returns the p-th percentile of lat (nearest rank), sorting it.
func percentile(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	// Nearest rank: the smallest value with at least p% of the values at
	// or below it.
	k := (len(lat)*p + 99) / 100
	return lat[max(k, 1)-1]
}

// processCPU is the user and system CPU this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestFloorPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(lat, 50); got != 50*time.Millisecond {
		t.Errorf("p50 = %v", got)
	}
	if got := percentile(lat, 99); got != 99*time.Millisecond {
		t.Errorf("p99 = %v", got)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Errorf("p99 of one = %v", got)
	}
	if percentile(nil, 50) != 0 {
		t.Error("p50 of none")
	}
}

// floorLoad runs exactly ops searches, or searches for a duration, every
// goroutine going round the list, and counts failures and empty answers.
func TestFloorLoadRotatesAndCounts(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	search := func(q string) (int, error) {
		mu.Lock()
		seen[q]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		switch q {
		case "none":
			return 0, nil
		case "bad":
			return 0, fmt.Errorf("boom")
		}
		return 3, nil
	}
	queries := []string{"a", "none", "bad", "b"}
	res := floorLoad(search, queries, 4, 40, 0)
	total := 0
	for _, q := range queries {
		if seen[q] == 0 {
			t.Errorf("query %q never ran: %v", q, seen)
		}
		total += seen[q]
	}
	if total != 40 || res.requests != 40 || len(res.lat) != 40 || res.empty != seen["none"] || res.errors != seen["bad"] || res.firstErr == nil || res.firstErr.Error() != "boom" {
		t.Errorf("40 searches: ran %d, requests %d, empty %d, errors %d, first %v", total, res.requests, res.empty, res.errors, res.firstErr)
	}
	res = floorLoad(search, queries, 2, 0, 100*time.Millisecond)
	if res.requests < 10 || res.wall < 100*time.Millisecond || percentile(res.lat, 50) < time.Millisecond {
		t.Errorf("timed run: requests %d, wall %v, p50 %v", res.requests, res.wall, percentile(res.lat, 50))
	}
}

// The hits file holds every query's hits in order, as entity/id.
func TestFloorHits(t *testing.T) {
	x := openFixture(t)
	dir := t.TempDir()
	qf := filepath.Join(dir, "queries")
	if err := os.WriteFile(qf, []byte("aurora\n\n  zephyr  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	queries, err := readQueries(qf)
	if err != nil || !slices.Equal(queries, []string{"aurora", "zephyr"}) {
		t.Fatalf("readQueries = %q, %v", queries, err)
	}
	hf := filepath.Join(dir, "hits")
	if err := writeFloorHits(context.Background(), x, hf, queries, func(q string) Query { return Query{Text: q, Limit: 10} }); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(hf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		t.Fatalf("hits file:\n%s", raw)
	}
	for i, want := range []string{docAurora.DocID(), docZephyr.DocID()} {
		var got struct {
			Query string   `json:"query"`
			IDs   []string `json:"ids"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if got.Query != queries[i] || len(got.IDs) == 0 || got.IDs[0] != want {
			t.Errorf("line %d = %+v, want %q first for %q", i, got, want, queries[i])
		}
	}
	if _, err := readQueries(filepath.Join(dir, "hits-missing")); err == nil {
		t.Error("a missing queries file is read")
	}
}

func TestFloorConfigFromEnv(t *testing.T) {
	for _, k := range []string{"CAPGATE_FLOOR_INDEX", "CAPGATE_FLOOR_QUERIES", "CAPGATE_FLOOR_HITS", "CAPGATE_FLOOR_GOROUTINES", "CAPGATE_FLOOR_LIMIT", "CAPGATE_FLOOR_WARMUP"} {
		t.Setenv(k, "")
	}
	cfg, err := floorConfigFromEnv()
	if err != nil || !slices.Equal(cfg.goroutines, []int{64, 1}) || cfg.limit != 10 || cfg.warmup != 0 || len(cfg.queries) != len(floorQueries) {
		t.Errorf("defaults = %+v, %v", cfg, err)
	}
	t.Setenv("CAPGATE_FLOOR_GOROUTINES", "32")
	t.Setenv("CAPGATE_FLOOR_WARMUP", "2s")
	t.Setenv("CAPGATE_FLOOR_LIMIT", "5")
	cfg, err = floorConfigFromEnv()
	if err != nil || !slices.Equal(cfg.goroutines, []int{32}) || cfg.limit != 5 || cfg.warmup != 2*time.Second {
		t.Errorf("set = %+v, %v", cfg, err)
	}
	for k, bad := range map[string]string{"CAPGATE_FLOOR_GOROUTINES": "64,0", "CAPGATE_FLOOR_LIMIT": "x", "CAPGATE_FLOOR_WARMUP": "-1s"} {
		t.Run(k, func(t *testing.T) {
			t.Setenv(k, bad)
			if _, err := floorConfigFromEnv(); err == nil {
				t.Errorf("%s=%s accepted", k, bad)
			}
		})
	}
}
