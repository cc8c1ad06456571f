package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func measured(rps float64) *row {
	return &row{runs: []*result{{rps: rps, requests: 100, checked: 100, p50: time.Millisecond, p99: 3 * time.Millisecond}}}
}

func TestTargetLine(t *testing.T) {
	all := allKeys
	for name, tc := range map[string]struct {
		rows     map[string]*row
		selected []string
		tgt      target
		want     string
	}{
		"pass":         {map[string]*row{keyCapgate: measured(300), keyGoSDK: measured(100)}, all, target{keyGoSDK, 3}, "PASS"},
		"fail":         {map[string]*row{keyCapgate: measured(299), keyGoSDK: measured(100)}, all, target{keyGoSDK, 3}, "FAIL"},
		"equal passes": {map[string]*row{keyCapgate: measured(100), keyMCPGo: measured(100)}, all, target{keyMCPGo, 1}, "PASS"},
		"skipped":      {map[string]*row{keyCapgate: measured(100)}, []string{keyCapgate}, target{keyMCPGo, 1}, "SKIP"},
		"not measured": {map[string]*row{keyMCPGo: measured(100), keyCapgate: {err: errTest}}, all, target{keyMCPGo, 1}, "FAIL"},
		"invalid run":  {map[string]*row{keyMCPGo: measured(100), keyCapgate: {runs: []*result{{rps: 1e6, requests: 10, checked: 10, bad: 1}}}}, all, target{keyMCPGo, 1}, "FAIL"},
	} {
		t.Run(name, func(t *testing.T) {
			got := targetLine(tc.tgt, tc.rows, tc.selected)
			if !strings.HasPrefix(got, tc.want+" ") {
				t.Errorf("got %q, want %s", got, tc.want)
			}
		})
	}
}

func TestReportTable(t *testing.T) {
	rows := map[string]*row{keyCapgate: measured(20000), keyEcho: measured(60000), keyGoSDK: measured(5000), keyMCPGo: measured(25000), keyBooking: {err: errTest}}
	var b bytes.Buffer
	report(&b, environment{wrk: "wrk x", threads: 2, connections: 64, warmup: "2s", duration: "10s", rounds: 1}, rows, allKeys)
	out := b.String()
	for _, want := range []string{"20,000", "3.00×", "0.25×", "1.25×", "FAILED", "PASS  capgate ≥ 3× go-sdk", "FAIL  capgate ≥ mcp-go", "booking.get FAILED: test failure"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestBookingLine: the booking target is judged on the median of the
// ratios round by round, not on the ratio of the two medians.
func TestBookingLine(t *testing.T) {
	runs := func(rps ...float64) *row {
		r := &row{}
		for _, x := range rps {
			r.runs = append(r.runs, &result{rps: x, requests: 100, checked: 100})
		}
		return r
	}
	for name, tc := range map[string]struct {
		base, booking *row
		selected      []string
		want          string
	}{
		// The medians make 0.80×; round by round it is 0.80, 0.75, 0.70.
		"paired pass": {runs(20000, 16000, 24000), runs(16000, 12000, 16800), allKeys, "PASS  booking.get ≥ 0.75× capgate's hello.greet, by round: 0.80, 0.75, 0.70, median 0.75×"},
		"paired fail": {runs(20000, 16000), runs(14000, 12000), allKeys, "FAIL  booking.get ≥ 0.75× capgate's hello.greet, by round: 0.70, 0.75, median 0.72×"},
		"no capgate":  {nil, runs(1), []string{keyBooking}, "SKIP"},
		"invalid":     {runs(100), &row{err: errTest}, allKeys, "FAIL"},
	} {
		t.Run(name, func(t *testing.T) {
			got := bookingLine(map[string]*row{keyCapgate: tc.base, keyBooking: tc.booking}, tc.selected)
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want %q…", got, tc.want)
			}
		})
	}
}

// TestVariantLine: a variant's row against the plain one, by round,
// against its target, and on interleaved bursts when they ran.
func TestVariantLine(t *testing.T) {
	runs := func(rps ...float64) *row {
		r := &row{}
		for _, x := range rps {
			r.runs = append(r.runs, &result{rps: x, requests: 100, checked: 100})
		}
		return r
	}
	gov, _ := variantOf(keyGoverned)
	pass := variantLine(gov, map[string]*row{keyGoverned: runs(96, 95, 90), keyCapgate: runs(100, 100, 100)}, allKeys, environment{})
	fail := variantLine(gov, map[string]*row{keyGoverned: runs(94, 95, 90), keyCapgate: runs(100, 100, 100)}, allKeys, environment{})
	if !strings.HasPrefix(pass, "PASS  governance costs ≤ 5%") || !strings.Contains(pass, "0.96, 0.95, 0.90, median 0.95×") || !strings.HasPrefix(fail, "FAIL") {
		t.Errorf("lines:\n%s\n%s", pass, fail)
	}
	// With the interleaved bursts, they decide; the rounds are shown.
	rows := map[string]*row{keyGoverned: runs(80, 80, 80), keyMetrics: runs(99, 96, 98), keyCapgate: runs(100, 100, 100)}
	pairs := func(key string, ratios ...float64) environment {
		env := environment{pairBurst: "1s", pairs: map[string][]burstPair{}, pairsErr: map[string]error{}}
		for _, r := range ratios {
			env.pairs[key] = append(env.pairs[key], burstPair{plain: 1000, variant: 1000 * r})
		}
		return env
	}
	pass = variantLine(gov, rows, allKeys, pairs(keyGoverned, 0.9, 0.97, 1.1, 0.96))
	fail = variantLine(gov, rows, allKeys, pairs(keyGoverned, 0.9, 0.94, 1.1, 0.95))
	if !strings.HasPrefix(pass, "PASS") || !strings.Contains(pass, "4 interleaved pairs of 1s bursts: median 0.965× (range 0.90–1.10") ||
		!strings.Contains(pass, "by round (for reference): 0.80, 0.80, 0.80") || !strings.HasPrefix(fail, "FAIL") {
		t.Errorf("lines with pairs:\n%s\n%s", pass, fail)
	}
	// The metrics variant has its own target (3%) and its own pairs.
	met, _ := variantOf(keyMetrics)
	pass = variantLine(met, rows, allKeys, pairs(keyMetrics, 0.98, 0.97, 1.01))
	fail = variantLine(met, rows, allKeys, pairs(keyMetrics, 0.96, 0.95, 1.01))
	if !strings.HasPrefix(pass, "PASS  metrics cost ≤ 3%: capgate metrics ≥ 0.97× capgate") || !strings.HasPrefix(fail, "FAIL") {
		t.Errorf("metrics lines:\n%s\n%s", pass, fail)
	}
	// Another variant's pairs do not count for this one.
	if line := variantLine(met, rows, allKeys, pairs(keyGoverned, 2, 2, 2)); !strings.Contains(line, "by round: 0.99, 0.96, 0.98") {
		t.Errorf("metrics judged on the governed pairs: %s", line)
	}
	// The traced variant is reported, never judged.
	tr, _ := variantOf(keyTraced)
	rows[keyTraced] = runs(50, 50, 50)
	if line := variantLine(tr, rows, allKeys, pairs(keyTraced, 0.5, 0.6, 0.7)); !strings.HasPrefix(line, "INFO  tracing every call: capgate traced ÷ capgate, in 3 interleaved pairs") ||
		!strings.Contains(line, "median 0.600×") {
		t.Errorf("traced line: %s", line)
	}
	if line := variantLine(tr, rows, allKeys, environment{}); !strings.HasPrefix(line, "INFO") || strings.Contains(line, "needs") {
		t.Errorf("traced line by round: %s", line)
	}
	env := pairs(keyGoverned)
	env.pairsErr[keyGoverned] = errors.New("wrk: exit 1")
	broken := variantLine(gov, rows, allKeys, env)
	if !strings.HasPrefix(broken, "FAIL") || !strings.Contains(broken, "wrk: exit 1") {
		t.Errorf("line after failed bursts: %s", broken)
	}
}

func TestThousands(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 65432.6: "65,433", 1234567: "1,234,567"} {
		if got := thousands(f); got != want {
			t.Errorf("thousands(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-only", "mcp-go, capgate,mcp-go", "-connections", "1"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.only, ",") != "mcp-go,capgate" || o.threads != 1 {
		t.Errorf("only, threads = %v, %d", o.only, o.threads)
	}
	for _, bad := range [][]string{{"-only", "nginx"}, {"-duration", "10ms"}, {"-connections", "0"}, {"extra"}, {"-pairs", "-1"}, {"-pair-burst", "500ms"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

type testError struct{}

func (testError) Error() string { return "test failure" }

var errTest error = testError{}
