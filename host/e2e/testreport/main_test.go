package main

import (
	"strings"
	"testing"
)

const stream = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"quiet line\n"}
{"Action":"pass","Package":"a","Test":"TestOK"}
{"Action":"run","Package":"a","Test":"TestBad"}
{"Action":"output","Package":"a","Test":"TestBad","Output":"    a_test.go:9: broken\n"}
{"Action":"output","Package":"a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"a","Test":"TestBad"}
{"Action":"output","Package":"a","Output":"PASS\n"}
{"Action":"output","Package":"a","Output":"FAIL\ta\t0.1s\n"}
{"Action":"fail","Package":"a"}
{"Action":"run","Package":"e2e","Test":"TestNode"}
{"Action":"output","Package":"e2e","Test":"TestNode","Output":"    x_test.go:1: node missing: run npm ci\n"}
{"Action":"output","Package":"e2e","Test":"TestNode","Output":"--- SKIP: TestNode (0.00s)\n"}
{"Action":"skip","Package":"e2e","Test":"TestNode"}
{"Action":"run","Package":"b","Test":"TestLater"}
{"Action":"output","Package":"b","Test":"TestLater","Output":"    b_test.go:1: needs a database\n"}
{"Action":"skip","Package":"b","Test":"TestLater"}
{"Action":"output","Package":"b","Output":"ok  \tb\t0.1s\n"}
{"Action":"pass","Package":"b"}
{"ImportPath":"c [c.test]","Action":"build-output","Output":"c.go:1: syntax error\n"}
{"Action":"fail","Package":"c","FailedBuild":"c [c.test]"}
make: something not JSON
`

func run(t *testing.T, in string, verbose, noSkip []string) (string, bool) {
	t.Helper()
	var out strings.Builder
	r := newReport(&out, verbose, noSkip)
	if err := r.read(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	ok := r.summarize()
	return out.String(), ok
}

func TestReport(t *testing.T) {
	out, ok := run(t, stream, nil, []string{"e2e"})
	if ok {
		t.Errorf("a run with a failed test, a build failure and a forbidden skip was accepted")
	}
	for _, want := range []string{
		"broken\n--- FAIL: TestBad",                           // a failed test's output is shown
		"FAIL\ta\t0.1s\n",                                     // package lines are shown
		"ok  \tb\t0.1s\n",                                     //
		"c.go:1: syntax error\n",                              // build errors are shown
		"make: something not JSON\n",                          // stray lines are shown
		"e2e TestNode: x_test.go:1: node missing: run npm ci", // skips list their reason
		"FAIL: 1 tests skipped where CI must run them:\n  e2e TestNode",
		"Failed tests (1):\n  a TestBad\n",
		"Failed packages (2):\n  a\n  c (build failed)\n",
		"\n1 passed, 1 failed, 2 skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"quiet line", "PASS\n"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("report shows %q, which plain go test would not:\n%s", unwanted, out)
		}
	}
}

func TestReportVerbosePackage(t *testing.T) {
	out, _ := run(t, stream, []string{"a"}, nil)
	if !strings.Contains(out, "quiet line") {
		t.Errorf("-verbose a did not show a's passing output:\n%s", out)
	}
	if strings.Count(out, "broken") != 1 {
		t.Errorf("a failed test's output of a -verbose package should show once:\n%s", out)
	}
}

func TestReportVerdicts(t *testing.T) {
	pass := `{"Action":"pass","Package":"a","Test":"TestOK"}` + "\n"
	skipE2E := `{"Action":"skip","Package":"e2e","Test":"TestX"}` + "\n"
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{"one pass", pass, true},
		{"nothing ran", "", false},
		{"only skips", skipE2E, false},
		{"allowed skip", pass + skipE2E, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := run(t, tc.in, nil, nil); ok != tc.want {
				t.Errorf("accepted = %v, want %v", ok, tc.want)
			}
		})
	}
	if _, ok := run(t, pass+skipE2E, nil, []string{"e2e"}); ok {
		t.Errorf("a skip in a -no-skip package was accepted")
	}
}
