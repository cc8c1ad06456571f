// Command testreport turns the `go test -json` stream on its standard input
// into the log a person reads, and judges the run for CI.
//
// It prints what plain `go test` prints (build errors, one line per
// package, the output of every failed test), the whole output of the
// packages named with -verbose, the tests that skipped, and closes with
// "N passed, N failed, N skipped". It exits 1 when a test failed, a package
// failed (including a build failure), no test ran at all, or a test skipped
// in a package named with -no-skip: CI runs its end-to-end tests for real,
// and a skip there means something it needs is missing.
//
//	make test GOTESTFLAGS=-json | testreport -no-skip github.com/capgate/capgate/host/e2e
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var verbose, noSkip listFlag
	flag.Var(&verbose, "verbose", "print every output line of this package (repeatable)")
	flag.Var(&noSkip, "no-skip", "a skipped test in this package fails the run (repeatable)")
	flag.Parse()
	r := newReport(os.Stdout, verbose, noSkip)
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stdout, "testreport:", err)
		os.Exit(1)
	}
	if !r.summarize() {
		os.Exit(1)
	}
}

type report struct {
	out             io.Writer
	verbose, noSkip []string
	buf             map[string][]string // output of running tests, by package + test
	passed, failed  int
	failedTests     []string
	skipped         []string // "pkg Test: reason"
	forbiddenSkips  []string
	failedPackages  []string
}

func newReport(out io.Writer, verbose, noSkip []string) *report {
	return &report{out: out, verbose: verbose, noSkip: noSkip, buf: map[string][]string{}}
}

func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not part of the stream (make's own lines, a crash): show it.
			fmt.Fprintf(r.out, "%s\n", line)
			continue
		}
		r.handle(e)
	}
	return sc.Err()
}

func (r *report) handle(e event) {
	key := e.Package + " " + e.Test
	loud := slices.Contains(r.verbose, e.Package)
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.out, e.Output)
	case "output":
		switch {
		case loud:
			fmt.Fprint(r.out, e.Output)
		case e.Test == "":
			if e.Output != "PASS\n" {
				fmt.Fprint(r.out, e.Output)
			}
		default:
			r.buf[key] = append(r.buf[key], e.Output)
		}
	case "pass":
		if e.Test != "" {
			r.passed++
		}
		delete(r.buf, key)
	case "skip":
		if e.Test != "" {
			why := lastLine(r.buf[key])
			entry := fmt.Sprintf("%s %s: %s", e.Package, e.Test, why)
			r.skipped = append(r.skipped, entry)
			if slices.Contains(r.noSkip, e.Package) {
				r.forbiddenSkips = append(r.forbiddenSkips, entry)
			}
		}
		delete(r.buf, key)
	case "fail":
		if e.Test != "" {
			r.failed++
			r.failedTests = append(r.failedTests, e.Package+" "+e.Test)
			if !loud {
				fmt.Fprint(r.out, strings.Join(r.buf[key], ""))
			}
		} else {
			name := e.Package
			if e.FailedBuild != "" {
				name += " (build failed)"
			}
			r.failedPackages = append(r.failedPackages, name)
		}
		delete(r.buf, key)
	}
}

// lastLine is the reason a skipped test gave: its last output line that is
// not the "--- SKIP" line itself.
func lastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return "(no reason given)"
}

// summarize prints the closing part of the log and reports whether the run
// is acceptable.
func (r *report) summarize() bool {
	ok := true
	w := r.out
	fmt.Fprintln(w)
	if len(r.skipped) > 0 {
		fmt.Fprintf(w, "Skipped tests (%d):\n", len(r.skipped))
		for _, s := range r.skipped {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(r.forbiddenSkips) > 0 {
		ok = false
		fmt.Fprintf(w, "FAIL: %d tests skipped where CI must run them:\n", len(r.forbiddenSkips))
		for _, s := range r.forbiddenSkips {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(r.failedTests) > 0 {
		ok = false
		fmt.Fprintf(w, "Failed tests (%d):\n", len(r.failedTests))
		for _, s := range r.failedTests {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if len(r.failedPackages) > 0 {
		ok = false
		fmt.Fprintf(w, "Failed packages (%d):\n", len(r.failedPackages))
		for _, s := range r.failedPackages {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if r.passed+r.failed == 0 {
		ok = false
		fmt.Fprintln(w, "FAIL: no test ran")
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", r.passed, r.failed, len(r.skipped))
	return ok
}
