// Command search-floor measures the search index called directly,
// in-process: the floor under platform.search, which adds the HTTP server,
// the MCP adapter, the gate and the gRPC hop to the plugin on top of the
// same index.Search call.
//
// It opens an index directory the search plugin built (the plugin must not
// be running: the index is locked while open), runs the queries of a file
// (one a line) from -concurrency goroutines, each rotating through the list
// from its own offset, first for -warmup (discarded), then for -duration,
// and prints one JSON object: requests, req/s, p50, p99, the CPU it used
// during the measured run, and how many searches failed or found nothing.
//
//	search-floor -index DIR -queries FILE [-concurrency 64] [-duration 10s] [-warmup 2s] [-limit 10]
//
// With -check it runs every query once instead and prints the ids of its
// hits, one JSON object per query.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capgate/capgate/plugins/search/internal/index"
)

// Result is what a measured run prints.
type Result struct {
	Documents   uint64  `json:"documents"`
	Concurrency int     `json:"concurrency"`
	Requests    int64   `json:"requests"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"rps"`
	P50Micros   int64   `json:"p50_us"`
	P99Micros   int64   `json:"p99_us"`
	CPUSeconds  float64 `json:"cpu_seconds"` // user+system during the measured run
	Errors      int64   `json:"errors"`
	Empty       int64   `json:"empty"` // searches that found nothing
	FirstError  string  `json:"first_error,omitempty"`
}

// Check is one query's hits in -check mode.
type Check struct {
	Query string   `json:"query"`
	IDs   []string `json:"ids"`
}

func main() {
	// The same runtime tuning as the search plugin: the floor differs from
	// it only by the path a query takes.
	index.TuneGC()
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "search-floor:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("search-floor", flag.ContinueOnError)
	dir := fs.String("index", "", "index directory (required)")
	queriesPath := fs.String("queries", "", "file of queries, one a line (required)")
	concurrency := fs.Int("concurrency", 64, "goroutines searching at once")
	duration := fs.Duration("duration", 10*time.Second, "measured run")
	warmup := fs.Duration("warmup", 2*time.Second, "discarded run before the measured one")
	limit := fs.Int("limit", 10, "hits per search")
	entity := fs.String("entity", "", "restrict hits to this entity type")
	check := fs.Bool("check", false, "run each query once and print its hit ids instead of measuring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *dir == "" || *queriesPath == "":
		return errors.New("-index and -queries are required")
	case *concurrency < 1:
		return errors.New("-concurrency must be at least 1")
	case *duration <= 0:
		return errors.New("-duration must be positive")
	}
	queries, err := readQueries(*queriesPath)
	if err != nil {
		return err
	}
	if _, err := os.Stat(*dir); err != nil {
		// index.Open would create an empty index: refuse a missing one.
		return fmt.Errorf("index: %w", err)
	}
	x, err := index.Open(*dir)
	if err != nil {
		return err
	}
	defer x.Close()
	ctx := context.Background()
	mk := func(q string) index.Query { return index.Query{Text: q, Entity: *entity, Limit: *limit} }

	if *check {
		enc := json.NewEncoder(stdout)
		for _, q := range queries {
			hits, err := x.Search(ctx, mk(q))
			if err != nil {
				return err
			}
			c := Check{Query: q, IDs: make([]string, len(hits))}
			for i, h := range hits {
				c.IDs[i] = h.Entity + "/" + h.ID
			}
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}

	count, err := x.Count()
	if err != nil {
		return err
	}
	search := func(q string) (int, error) {
		hits, err := x.Search(ctx, mk(q))
		return len(hits), err
	}
	if *warmup > 0 {
		load(search, queries, *concurrency, *warmup)
	}
	cpu0 := cpuTime()
	res := load(search, queries, *concurrency, *duration)
	res.CPUSeconds = (cpuTime() - cpu0).Seconds()
	res.Documents = count
	return json.NewEncoder(stdout).Encode(res)
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

// load runs search from n goroutines for d, goroutine g starting at query
// g and going round the list, and returns the counts and the latency
// percentiles of the searches that completed within d.
func load(search func(string) (int, error), queries []string, n int, d time.Duration) Result {
	type worker struct {
		lat           []time.Duration
		errors, empty int64
		firstErr      error
	}
	ws := make([]worker, n)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for g := range ws {
		wg.Add(1)
		go func(w *worker, next int) {
			defer wg.Done()
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
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
	elapsed := time.Since(start)
	res := Result{Concurrency: n, Seconds: elapsed.Seconds()}
	var all []time.Duration
	for _, w := range ws {
		all = append(all, w.lat...)
		res.Errors += w.errors
		res.Empty += w.empty
		if w.firstErr != nil && res.FirstError == "" {
			res.FirstError = w.firstErr.Error()
		}
	}
	res.Requests = int64(len(all))
	res.RPS = float64(res.Requests) / elapsed.Seconds()
	res.P50Micros = percentile(all, 50).Microseconds()
	res.P99Micros = percentile(all, 99).Microseconds()
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

// cpuTime is the user and system CPU this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
