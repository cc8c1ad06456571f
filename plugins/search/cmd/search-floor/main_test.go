package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/search/internal/index"
)

func TestPercentile(t *testing.T) {
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

func TestLoadRotatesAndCounts(t *testing.T) {
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
			return 0, errors.New("boom")
		}
		return 3, nil
	}
	res := load(search, []string{"a", "none", "bad", "b"}, 4, 200*time.Millisecond)
	if res.Requests < 20 || res.RPS <= 0 || res.P50Micros < 1000 || res.P99Micros < res.P50Micros {
		t.Errorf("implausible %+v", res)
	}
	if res.Empty == 0 || res.Errors == 0 || res.FirstError != "boom" {
		t.Errorf("empty %d, errors %d, first %q", res.Empty, res.Errors, res.FirstError)
	}
	if len(seen) != 4 {
		t.Errorf("queries run: %v", seen)
	}
}

// A run over a small real index answers every query.
func TestRunOnIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	x, err := index.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = x.Upsert(context.Background(),
		index.Document{Entity: "synthetic.item", ID: "item-000001", Title: "Maple room 1", Body: "Quiet room with a whiteboard."},
		index.Document{Entity: "synthetic.item", ID: "item-000002", Title: "Cedar tennis court 2", Body: "Court with floodlights."})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	qf := filepath.Join(t.TempDir(), "queries")
	if err := os.WriteFile(qf, []byte("whiteboard\n\ntennis court\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-index", dir, "-queries", qf, "-concurrency", "2", "-duration", "300ms", "-warmup", "0"}, &out); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if res.Documents != 2 || res.Requests == 0 || res.Errors != 0 || res.Empty != 0 || res.Concurrency != 2 {
		t.Errorf("result %+v", res)
	}

	out.Reset()
	if err := run([]string{"-index", dir, "-queries", qf, "-check"}, &out); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var checks []Check
	for dec.More() {
		var c Check
		if err := dec.Decode(&c); err != nil {
			t.Fatal(err)
		}
		checks = append(checks, c)
	}
	if len(checks) != 2 || len(checks[0].IDs) == 0 || checks[0].IDs[0] != "synthetic.item/item-000001" || checks[1].IDs[0] != "synthetic.item/item-000002" {
		t.Errorf("checks = %+v", checks)
	}

	if err := run([]string{"-index", filepath.Join(t.TempDir(), "missing"), "-queries", qf}, &out); err == nil {
		t.Error("a missing index was accepted")
	}
}
