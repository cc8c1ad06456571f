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
)

// environment is what the report states about how it was measured.
type environment struct {
	wrk         string
	threads     int
	connections int
	warmup      string
	duration    string
}

// describe says what each server is, with the module versions this binary
// was built with.
func describe(key string) (name, what string) {
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

// report writes the table and the target lines.
func report(w io.Writer, env environment, rows map[string]*row, selected []string) {
	fmt.Fprintf(w, "\ncapgate bench: %s, -t%d -c%d keep-alive, warm-up %s, measured %s per server, one server at a time; GOMAXPROCS=%d, %d CPUs, %s\n",
		env.wrk, env.threads, env.connections, env.warmup, env.duration, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "every server answers tools/call %s {name: %q}; every response body is checked\n\n", greetTool, greetName)

	base := rows[keyCapgate]
	var baseRPS float64
	if base != nil && base.err == nil && base.res.valid() {
		baseRPS = base.res.rps
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\t\treq/s\tp50\tp99\t÷ capgate\t")
	line := func(key string) {
		name, what := describe(key)
		r := rows[key]
		switch {
		case !slices.Contains(selected, key):
			return
		case r == nil:
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t\n", name, what)
		case r.err != nil:
			fmt.Fprintf(tw, "%s\t%s\tFAILED\t-\t-\t-\t\n", name, what)
		default:
			ratio := "-"
			if baseRPS > 0 {
				ratio = fmt.Sprintf("%.2f×", r.res.rps/baseRPS)
			}
			rps := thousands(r.res.rps)
			if !r.res.valid() {
				rps = "INVALID " + rps
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name, what, rps, latency(r.res.p50), latency(r.res.p99), ratio)
		}
	}
	for _, k := range []string{keyCapgate, keyEcho, keyGoSDK, keyMCPGo} {
		line(k)
	}
	if slices.Contains(selected, keyBooking) {
		fmt.Fprintln(tw, "\t\t\t\t\t\t")
		line(keyBooking)
	}
	tw.Flush()

	// Why a row failed, below the table so the table stays readable.
	var notes []string
	for _, k := range allKeys {
		r := rows[k]
		if r == nil || !slices.Contains(selected, k) {
			continue
		}
		name, _ := describe(k)
		if r.err != nil {
			notes = append(notes, fmt.Sprintf("%s FAILED: %v", name, r.err))
		} else if !r.res.valid() {
			notes = append(notes, fmt.Sprintf("%s INVALID (not a measurement): %s", name, r.res.problem()))
		}
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
		if r == nil || r.err != nil {
			return fmt.Sprintf("FAIL  %s: %s was not measured", goal, name)
		}
		if !r.res.valid() {
			return fmt.Sprintf("FAIL  %s: %s's run was invalid (%s)", goal, name, r.res.problem())
		}
	}
	c, o := rows[keyCapgate].res.rps, rows[t.other].res.rps
	verdict := "FAIL"
	if c >= t.factor*o {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s  %s: capgate %s req/s vs %s %s req/s = %.2f× (needs ≥ %.2f×)",
		verdict, goal, thousands(c), otherName, thousands(o), c/o, t.factor)
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
