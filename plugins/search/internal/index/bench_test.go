package index

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSearch builds a 100 000-document catalogue index once and measures
// queries against it. Run it with a short -benchtime, e.g.
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 2000x ./plugins/search/internal/index
func BenchmarkSearch(b *testing.B) {
	if testing.Short() {
		b.Skip("building the 100 000-document index takes a while; not in -short")
	}
	const n = 100_000
	ctx := context.Background()
	dir := filepath.Join(b.TempDir(), "idx")
	x, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	docs := generate(n, 42)
	start := time.Now()
	if err := x.Upsert(ctx, docs...); err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	if c, err := x.Count(); err != nil || c != n {
		b.Fatalf("Count = %d, %v; want %d", c, err, n)
	}
	// Let the background persister and merger settle so that they do not
	// compete with the measured queries for the CPU.
	settleStart := time.Now()
	segments := settle(b, x)
	settleTime := time.Since(settleStart)
	size := dirSize(b, dir)
	b.Logf("built %d documents in %s (%.0f docs/s); merges settled %s later at %d segments; index size %.1f MB",
		n, build.Round(time.Millisecond), float64(n)/build.Seconds(), settleTime.Round(time.Millisecond), segments, float64(size)/1e6)

	groups := []struct {
		name    string
		queries []string
	}{
		{"match", []string{"whiteboard", "quiet room", "tennis court", "yoga beginners", "premium annual", "floodlights"}},
		{"typo", []string{"whitebord", "floodlihgts", "pilatse"}},
		{"prefix", []string{"white", "flood", "pil"}},
		{"phrase", []string{`"natural light"`, `"guest passes"`}},
		// Title numbers occur in one document each: the cost of the engine
		// when the words are selective, not the size of the result set.
		{"selective", []string{"12345", "67890", "maple 40001"}},
	}
	for _, g := range groups {
		b.Run(g.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				hits, err := x.Search(ctx, Query{Text: g.queries[i%len(g.queries)]})
				lat = append(lat, time.Since(t0))
				if err != nil || len(hits) == 0 {
					b.Fatalf("Search(%q) = %d hits, %v", g.queries[i%len(g.queries)], len(hits), err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(build.Seconds(), "build-s")
			b.ReportMetric(float64(size)/1e6, "index-MB")
		})
	}
}

// settle waits (at most a minute) until no segment is in memory and the
// number of file segments has not changed for a second, and returns it.
func settle(b *testing.B, x *Index) uint64 {
	stat := func(key string) uint64 {
		m, _ := x.bi.StatsMap()["index"].(map[string]interface{})
		v, _ := m[key].(uint64)
		return v
	}
	deadline := time.Now().Add(time.Minute)
	last, since := stat("num_root_filesegments"), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		cur := stat("num_root_filesegments")
		if cur != last || stat("num_root_memorysegments") != 0 {
			last, since = cur, time.Now()
			continue
		}
		if time.Since(since) >= time.Second {
			return cur
		}
	}
	b.Logf("index still merging after a minute (%d file segments)", last)
	return last
}

func dirSize(b *testing.B, dir string) int64 {
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
		b.Fatalf("size of %s: %v", dir, err)
	}
	return total
}

// BenchmarkBoundedQueries sets the costliest queries within the limits
// (worstQueries) beside ordinary ones, over the fixture and 20 000
// generated documents, and an unbounded 300 KB query, which is refused
// before any work. Compare ns/op and B/op within one run:
//
//	go test -run '^$' -bench BenchmarkBoundedQueries -benchmem ./plugins/search/internal/index
func BenchmarkBoundedQueries(b *testing.B) {
	if testing.Short() {
		b.Skip("building the 20 000-document index takes a while; not in -short")
	}
	x := openHostile(b, 20_000)
	ctx := context.Background()
	worst := worstQueries(b, x)
	names := make([]string, 0, len(worst))
	for name := range worst {
		names = append(names, name)
	}
	slices.Sort(names)
	cases := []struct{ name, text string }{
		{"normal/one word", "whiteboard"},
		{"normal/typo and prefix", "quiet whitebord flood"},
		{"normal/phrase", `"natural light" room`},
	}
	for _, n := range names {
		cases = append(cases, struct{ name, text string }{"worst/" + n, worst[n]})
	}
	cases = append(cases, struct{ name, text string }{"unbounded 300 KB, refused", strings.Repeat("whiteboard ", 300_000/11)})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, err := x.Search(ctx, Query{Text: c.text})
				if err != nil && !errors.Is(err, ErrQueryTooLong) {
					b.Fatal(err)
				}
			}
		})
	}
}
