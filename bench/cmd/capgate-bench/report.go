package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// environment is what the report states about how it was measured.
type environment struct {
	wrk         string
	threads     int
	connections int
	warmup      string
	duration    string
	rounds      int
	// pairs are each variant's interleaved bursts (measurePairs), each
	// pairBurst long; pairsErr says why they stopped short.
	pairs     map[string][]burstPair
	pairsErr  map[string]error
	pairBurst string
}

// describe says what each server is, with the module versions this binary
// was built with.
func describe(key string) (name, what string) {
	if v, ok := variantOf(key); ok {
		return v.name, v.what
	}
	switch key {
	case keyCapgate:
		return "capgate", "hello.greet: HTTP → adapter → gate → gRPC plugin (SDK)"
	case keyEcho:
		return "echo " + modVersion("github.com/labstack/echo/v4"), "bare handler, fixed JSON body (floor)"
	case keyGoSDK:
		return "go-sdk " + modVersion("github.com/modelcontextprotocol/go-sdk"), "in-process, stateless, JSON responses"
	case keyMCPGo:
		return "mcp-go " + modVersion("github.com/mark3labs/mcp-go"), "in-process, stateless, JSON responses"
	case keyBooking:
		return "capgate booking.get", "HTTP → adapter → gate → gRPC plugin → SQLite"
	}
	return key, ""
}

// modVersion is the version of a module linked into this binary.
func modVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version
		}
	}
	return "(unknown)"
}

// target is a throughput goal for capgate relative to another server.
type target struct {
	other  string  // server key
	factor float64 // capgate must reach factor × other's req/s
}

var targets = []target{
	{other: keyMCPGo, factor: 1},
	{other: keyGoSDK, factor: 3},
}

// busyOthers is the CPU, in cores, that other processes may use during a
// run before the report says the run was disturbed.
const busyOthers = 0.2

// report writes the table and the target lines.
func report(w io.Writer, env environment, rows map[string]*row, selected []string) {
	rounds := "one run per server"
	if env.rounds > 1 {
		rounds = fmt.Sprintf("%d rounds, each figure the median of the server's undisturbed runs (of all its runs when none was)", env.rounds)
	}
	fmt.Fprintf(w, "\ncapgate bench: %s, -t%d -c%d keep-alive, warm-up %s, measured %s per server, one server at a time, %s; GOMAXPROCS=%d, %d CPUs, %s\n",
		env.wrk, env.threads, env.connections, env.warmup, env.duration, rounds, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())
	if !slices.ContainsFunc(selected, func(k string) bool { return slices.Contains(greetKeys, k) }) {
		return // only the search rows, which searchReport writes
	}
	fmt.Fprintf(w, "every server answers tools/call %s {name: %q}; every response body is checked; CPU columns are in cores\n\n", greetTool, greetName)

	var baseRPS float64
	if base := rows[keyCapgate]; base.ok() {
		baseRPS = base.rps()
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The text columns are padded here so that they read left-aligned in a
	// right-aligned table.
	var nameW, whatW int
	for _, k := range greetKeys {
		n, w := describe(k)
		nameW, whatW = max(nameW, utf8.RuneCountInString(n)), max(whatW, utf8.RuneCountInString(w))
	}
	pad := func(s string, w int) string { return s + strings.Repeat(" ", w-utf8.RuneCountInString(s)) }
	head := pad("server", nameW) + "\t" + pad("", whatW) + "\treq/s\tp50\tp99\t÷ capgate\tserver CPU\tothers' CPU\t"
	if env.rounds > 1 {
		head += "undisturbed\treq/s range (all)\t"
	}
	fmt.Fprintln(tw, head)
	line := func(key string) {
		name, what := describe(key)
		name, what = pad(name, nameW), pad(what, whatW)
		r := rows[key]
		if !slices.Contains(selected, key) {
			return
		}
		writeRow(tw, env, name, what, r, baseRPS)
	}
	for _, k := range []string{keyCapgate, keyGoverned, keyMetrics, keyTraced, keyEcho, keyGoSDK, keyMCPGo} {
		line(k)
	}
	if slices.Contains(selected, keyBooking) {
		// A row of empty cells, not an empty line, which would end the
		// column block and unalign the booking row.
		fmt.Fprintln(tw, strings.Repeat("\t", strings.Count(head, "\t")))
		line(keyBooking)
	}
	tw.Flush()

	// Why a row failed, below the table so the table stays readable.
	var notes []string
	disturbed := false
	for _, k := range greetKeys {
		r := rows[k]
		if r == nil || !slices.Contains(selected, k) {
			continue
		}
		name, _ := describe(k)
		switch {
		case r.err != nil:
			notes = append(notes, fmt.Sprintf("%s FAILED: %v", name, r.err))
		case len(r.runs) > 0 && !r.ok():
			notes = append(notes, fmt.Sprintf("%s INVALID (not a measurement): %s", name, r.problem()))
		}
		if r.othersCPU() > busyOthers {
			disturbed = true
		}
	}
	if disturbed {
		notes = append(notes, fmt.Sprintf("! other processes used more than %.1f cores during that server's run: its numbers are lower than on a quiet machine", busyOthers))
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}

	fmt.Fprintln(w)
	for _, t := range targets {
		fmt.Fprintln(w, targetLine(t, rows, selected))
	}
	if slices.Contains(selected, keyBooking) {
		fmt.Fprintln(w, bookingLine(rows, selected))
	}
	for _, v := range variants {
		if slices.Contains(selected, v.key) {
			fmt.Fprintln(w, variantLine(v, rows, selected, env))
		}
	}
}

// bookingTarget is what owner-guarded booking.get must reach of the no-op
// tool's throughput.
const bookingTarget = 0.75

// bookingLine judges booking.get against hello.greet by round: each ratio
// is of two runs minutes apart on the same capgate, so a round the machine
// ran slow for both (a neighbour's load moves whole rounds by a quarter
// here) does not count as a change in the ratio. The verdict is on the
// median of those ratios.
func bookingLine(rows map[string]*row, selected []string) string {
	goal := fmt.Sprintf("booking.get ≥ %.2f× capgate's hello.greet, by round", bookingTarget)
	return pairedLine(rows, selected, keyBooking, keyCapgate, bookingTarget, goal)
}

// pairedLine judges row key against row base, run against run of the same
// round: PASS when the median of the ratios reaches factor.
func pairedLine(rows map[string]*row, selected []string, key, base string, factor float64, goal string) string {
	for _, k := range []string{key, base} {
		if !slices.Contains(selected, k) {
			return fmt.Sprintf("SKIP  %s: %s not run (-only)", goal, k)
		}
	}
	b, r := rows[base], rows[key]
	if !b.ok() || !r.ok() {
		return fmt.Sprintf("FAIL  %s: not both measured validly", goal)
	}
	n := min(len(b.runs), len(r.runs))
	ratios := make([]float64, n)
	shown := make([]string, n)
	for i := range n {
		ratios[i] = r.runs[i].rps / b.runs[i].rps
		shown[i] = fmt.Sprintf("%.2f", ratios[i])
	}
	slices.Sort(ratios)
	m := ratios[n/2]
	if n%2 == 0 {
		m = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	verdict := "FAIL"
	if m >= factor {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s  %s: %s, median %.2f× (needs ≥ %.2f×)", verdict, goal, strings.Join(shown, ", "), m, factor)
}

// targetLine judges one target: PASS, FAIL, or SKIP when -only left a side
// out.
func targetLine(t target, rows map[string]*row, selected []string) string {
	otherName, _ := describe(t.other)
	goal := "capgate ≥ " + otherName
	if t.factor != 1 {
		goal = fmt.Sprintf("capgate ≥ %s× %s", strconv.FormatFloat(t.factor, 'f', -1, 64), otherName)
	}
	if !slices.Contains(selected, keyCapgate) || !slices.Contains(selected, t.other) {
		return fmt.Sprintf("SKIP  %s: not run (-only)", goal)
	}
	for _, k := range []string{keyCapgate, t.other} {
		r := rows[k]
		name, _ := describe(k)
		if r == nil || r.err != nil || len(r.runs) == 0 {
			return fmt.Sprintf("FAIL  %s: %s was not measured", goal, name)
		}
		if !r.ok() {
			return fmt.Sprintf("FAIL  %s: %s's run was invalid (%s)", goal, name, r.problem())
		}
	}
	c, o := rows[keyCapgate].rps(), rows[t.other].rps()
	verdict := "FAIL"
	if c >= t.factor*o {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s  %s: capgate %s req/s vs %s %s req/s = %.2f× (needs ≥ %.2f×)",
		verdict, goal, thousands(c), otherName, thousands(o), c/o, t.factor)
}

// writeRow writes r's line of a table: "not run", "FAILED", or its
// figures with its throughput as a ratio of base (a dash when base is 0).
func writeRow(tw io.Writer, env environment, name, what string, r *row, base float64) {
	switch {
	case r == nil || (r.err == nil && len(r.runs) == 0):
		fmt.Fprintf(tw, "%s\t%s\tnot run\t\t\t\t\t\t\n", name, what)
		return
	case r.err != nil:
		fmt.Fprintf(tw, "%s\t%s\tFAILED\t\t\t\t\t\t\n", name, what)
		return
	}
	ratio := "-"
	if base > 0 {
		ratio = fmt.Sprintf("%.2f×", r.rps()/base)
	}
	rps := thousands(r.rps())
	if !r.ok() {
		rps = "INVALID " + rps
	}
	others := fmt.Sprintf("%.2f", r.othersCPU())
	if r.othersCPU() > busyOthers {
		others += " !"
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t", name, what, rps, latency(r.p50()), latency(r.p99()), ratio, r.serverCPU(), others)
	if env.rounds > 1 {
		lo, hi := r.rpsRange()
		fmt.Fprintf(tw, "%d/%d\t%s–%s\t", r.quiet(), len(r.runs), thousands(lo), thousands(hi))
	}
	fmt.Fprintln(tw)
}

// thousands renders a rate rounded to a whole number with thousands
// separators.
func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// latency renders a latency with a precision that fits its size.
func latency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
}
