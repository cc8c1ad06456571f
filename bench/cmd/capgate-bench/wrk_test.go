package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wrkOutput is wrk 4.1.0's output shape for a run with --latency and the
// bench script.
const wrkOutput = `Running 10s test @ http://127.0.0.1:40000/mcp
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.10ms    1.20ms  40.00ms   90.00%
    Req/Sec    15.00k     1.00k   17.00k    70.00%
  Latency Distribution
     50%    1.87ms
     75%    2.50ms
     90%    3.10ms
     99%  812.00us
  300000 requests in 10.00s, 60.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 5
Requests/sec:  29998.52
Transfer/sec:      6.00MB
capgate-bench: requests=300000 bad=7 checked=300000
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if r.rps != 29998.52 {
		t.Errorf("rps = %v", r.rps)
	}
	if r.p50 != 1870*time.Microsecond || r.p99 != 812*time.Microsecond {
		t.Errorf("p50, p99 = %v, %v", r.p50, r.p99)
	}
	if r.non2xx != 5 || r.sockErrs != 3 || r.bad != 7 || r.requests != 300000 || r.checked != 300000 {
		t.Errorf("counts = %+v", r)
	}
	if r.valid() {
		t.Error("a run with errors is valid")
	}
	for _, want := range []string{"5 non-2xx", "3 socket errors", "7 wrong response bodies"} {
		if !strings.Contains(r.problem(), want) {
			t.Errorf("problem %q lacks %q", r.problem(), want)
		}
	}
}

func TestParseWrkMissingLines(t *testing.T) {
	for _, drop := range []string{"Requests/sec:", "     50%", "     99%", "capgate-bench:"} {
		var kept []string
		for _, l := range strings.Split(wrkOutput, "\n") {
			if !strings.HasPrefix(l, drop) {
				kept = append(kept, l)
			}
		}
		if _, err := parseWrk(strings.Join(kept, "\n")); err == nil {
			t.Errorf("output without %q parsed", drop)
		}
	}
}

func TestWrkSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1s", 500 * time.Millisecond: "1s", 2 * time.Second: "2s", 2100 * time.Millisecond: "3s"} {
		if got := wrkSeconds(d); got != want {
			t.Errorf("wrkSeconds(%v) = %s, want %s", d, got, want)
		}
	}
}

func TestLuaQuote(t *testing.T) {
	got := luaQuote("a\"b\\c\nd]]é")
	want := `"a\"b\\c\010d]]\195\169"`
	if got != want {
		t.Errorf("luaQuote = %s, want %s", got, want)
	}
}

// TestLoadChecksBodies runs wrk for a second against a server that answers
// every other request wrongly: the run must be reported invalid.
func TestLoadChecksBodies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wrk")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk not installed")
	}
	for _, tc := range []struct {
		name  string
		wrong bool
	}{{"right", false}, {"wrong", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if tc.wrong && n.Add(1)%2 == 0 {
					w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"no"}],"isError":true}}`))
					return
				}
				w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"greeting":"hello, bench"}}}`))
			}))
			defer srv.Close()
			l := &load{wrk: wrk, threads: 1, connections: 1, duration: time.Second, workDir: t.TempDir()}
			body, err := toolCallBody(greetTool, greetIn{Name: greetName})
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.run(context.Background(), job{name: tc.name, url: srv.URL, body: body, marker: "hello, bench", cpu: selfCPU})
			if err != nil {
				t.Fatal(err)
			}
			if res.requests == 0 || res.rps <= 0 || res.p50 <= 0 || res.p99 < res.p50 {
				t.Errorf("implausible result %+v", res)
			}
			if res.valid() == tc.wrong {
				t.Errorf("valid = %v with wrong answers = %v (%s)", res.valid(), tc.wrong, res.problem())
			}
		})
	}
}
