package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// wrkInstallHint tells how to get the load generator.
const wrkInstallHint = "wrk is required: install it with `apt-get install -y wrk` (Debian/Ubuntu) and make sure it is on PATH"

// load is one load-generator setting, the same for every server.
type load struct {
	wrk         string // path of the wrk binary
	threads     int
	connections int
	warmup      time.Duration
	duration    time.Duration
	workDir     string // where the Lua scripts are written
}

// job is what one measured run sends and expects.
type job struct {
	name string // for file names and messages
	url  string
	body []byte
	// bodies, when set, are sent in turn instead of body: each wrk thread
	// goes round the list from its own starting point.
	bodies [][]byte
	marker string   // every correct response body contains it
	cpu    cpuProbe // the server's cumulative CPU time
	// timeout, when set, replaces wrk's 2 s request timeout, for servers
	// whose answers queue for longer under the load.
	timeout time.Duration
}

// result is one measured run.
type result struct {
	requests int64         // completed requests in the measured run
	rps      float64       // requests per second
	p50, p99 time.Duration // latency percentiles
	non2xx   int64         // responses with a non-2xx/3xx status
	sockErrs int64         // connect, read, write and timeout errors
	bad      int64         // responses whose body was not the right answer
	checked  int64         // responses whose body was checked
	cpu      cpuUse        // where the machine's CPU went during the run
	// Set by the replicas rows' booking.create runs (replicas.go): bad
	// then counts only the errors other than "already booked".
	creates        bool
	created, taken int64
}

// valid reports whether every response in the run was a correct answer.
func (r *result) valid() bool {
	return r.non2xx == 0 && r.sockErrs == 0 && r.bad == 0 && r.checked == r.requests && r.requests > 0
}

// problem describes why a run is not valid.
func (r *result) problem() string {
	var p []string
	if r.requests == 0 {
		p = append(p, "no request completed")
	}
	if r.non2xx > 0 {
		p = append(p, fmt.Sprintf("%d non-2xx/3xx responses", r.non2xx))
	}
	if r.sockErrs > 0 {
		p = append(p, fmt.Sprintf("%d socket errors", r.sockErrs))
	}
	if r.bad > 0 {
		p = append(p, fmt.Sprintf("%d wrong response bodies", r.bad))
	}
	if r.checked != r.requests {
		p = append(p, fmt.Sprintf("%d of %d responses checked", r.checked, r.requests))
	}
	return strings.Join(p, ", ")
}

// findWrk locates wrk on PATH.
func findWrk() (string, error) {
	p, err := exec.LookPath("wrk")
	if err != nil {
		return "", fmt.Errorf("%s: %w", wrkInstallHint, err)
	}
	return p, nil
}

// wrkVersion returns wrk's first version line.
func wrkVersion(ctx context.Context, wrk string) string {
	// "wrk -v" prints its version and usage, then exits non-zero.
	out, _ := exec.CommandContext(ctx, wrk, "-v").CombinedOutput()
	// "wrk debian/4.1.0-3+b2 [epoll] Copyright (C) 2012 Will Glozer": keep
	// the name and version.
	line, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(line); len(f) >= 2 {
		return f[0] + " " + f[1]
	}
	return strings.TrimSpace(line)
}

// script writes j's wrk script and returns its path.
func (l *load) script(j job) (string, error) {
	script := filepath.Join(l.workDir, j.name+".lua")
	bodies := j.bodies
	if len(bodies) == 0 {
		bodies = [][]byte{j.body}
	}
	if err := os.WriteFile(script, []byte(luaScript(bodies, j.marker)), 0o600); err != nil {
		return "", fmt.Errorf("write wrk script: %w", err)
	}
	return script, nil
}

// run warms the server up with a discarded run, then measures it.
func (l *load) run(ctx context.Context, j job) (*result, error) {
	script, err := l.script(j)
	if err != nil {
		return nil, err
	}
	if l.warmup > 0 {
		if _, _, err := l.wrk1(ctx, script, j, l.warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	before, err := sampleCPU(j.cpu)
	if err != nil {
		return nil, fmt.Errorf("sample CPU: %w", err)
	}
	out, wrkCPU, err := l.wrk1(ctx, script, j, l.duration)
	if err != nil {
		return nil, err
	}
	after, err := sampleCPU(j.cpu)
	if err != nil {
		return nil, fmt.Errorf("sample CPU: %w", err)
	}
	res, err := parseWrk(out)
	if err != nil {
		return nil, fmt.Errorf("parse wrk output: %w\n%s", err, out)
	}
	res.cpu = between(before, after, wrkCPU)
	return res, nil
}

// wrk1 runs wrk once and returns its standard output and the CPU time it
// used.
func (l *load) wrk1(ctx context.Context, script string, j job, d time.Duration) (string, time.Duration, error) {
	args := []string{
		"-t" + strconv.Itoa(l.threads),
		"-c" + strconv.Itoa(l.connections),
		"-d" + wrkSeconds(d),
		"--latency",
		"-s", script,
	}
	if j.timeout > 0 {
		args = append(args, "--timeout", wrkSeconds(j.timeout))
	}
	args = append(args, j.url)
	cmd := exec.CommandContext(ctx, l.wrk, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("wrk %s: %w: %s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// wrkSeconds renders d as whole seconds (wrk's smallest unit), at least 1.
func wrkSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10) + "s"
}

// luaScript returns the wrk script: it POSTs the bodies with the bench
// headers (one body: the same on every request; several: each thread goes
// round them from its own starting point), checks every response (status
// 200, body contains marker, no tool error) and reports the counts when the
// run ends.
func luaScript(bodies [][]byte, marker string) string {
	var b strings.Builder
	b.WriteString("wrk.method = \"POST\"\n")
	b.WriteString("wrk.body = " + luaQuote(string(bodies[0])) + "\n")
	keys := make([]string, 0, 4)
	h := headers()
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "wrk.headers[%s] = %s\n", luaQuote(k), luaQuote(h[k]))
	}
	b.WriteString("local marker = " + luaQuote(marker) + "\n")
	b.WriteString(`local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("thread_no", #threads)
end
`)
	if len(bodies) > 1 {
		b.WriteString("local bodies = {\n")
		for _, body := range bodies {
			b.WriteString("  " + luaQuote(string(body)) + ",\n")
		}
		b.WriteString(`}
local requests = {}
local next_request = 1
function request()
  local r = requests[next_request]
  next_request = next_request % #requests + 1
  return r
end
`)
	}
	b.WriteString(`function init(args)
  bad = 0
  checked = 0
`)
	if len(bodies) > 1 {
		// wrk.format sets Content-Length in the headers table it is given,
		// so each request gets its own copy of wrk.headers (which holds
		// Host by now).
		b.WriteString(`  for i, body in ipairs(bodies) do
    local h = {}
    for k, v in pairs(wrk.headers) do h[k] = v end
    requests[i] = wrk.format(nil, nil, h, body)
  end
  next_request = ((thread_no or 1) - 1) * 7 % #requests + 1
`)
	}
	b.WriteString(`end
function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 or not string.find(body, marker, 1, true) or string.find(body, '"isError":true', 1, true) then
    bad = bad + 1
  end
end
function done(summary, latency, requests)
  local bad, checked = 0, 0
  for _, t in ipairs(threads) do
    bad = bad + t:get("bad")
    checked = checked + t:get("checked")
  end
  io.write(string.format("capgate-bench: requests=%d bad=%d checked=%d\n", summary.requests, bad, checked))
end
`)
	return b.String()
}

// luaQuote renders s as a Lua string literal.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03d", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var (
	reRPS      = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)\s*$`)
	reP50      = regexp.MustCompile(`(?m)^\s+50%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
	reP99      = regexp.MustCompile(`(?m)^\s+99%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
	reNon2xx   = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses:\s+(\d+)\s*$`)
	reSockErrs = regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)\s*$`)
	reSummary  = regexp.MustCompile(`(?m)^capgate-bench: requests=(\d+) bad=(\d+) checked=(\d+)\s*$`)
)

// parseWrk reads requests/s, p50, p99 and error counts from wrk's output
// (run with --latency and the script from luaScript).
func parseWrk(out string) (*result, error) {
	r := &result{}
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return nil, errors.New("no Requests/sec line")
	}
	rps, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return nil, fmt.Errorf("Requests/sec %q: %w", m[1], err)
	}
	r.rps = rps
	if r.p50, err = parseLatency(reP50, out, "50%"); err != nil {
		return nil, err
	}
	if r.p99, err = parseLatency(reP99, out, "99%"); err != nil {
		return nil, err
	}
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reSockErrs.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.sockErrs += n
		}
	}
	m = reSummary.FindStringSubmatch(out)
	if m == nil {
		return nil, errors.New("no capgate-bench summary line from the wrk script")
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.bad, _ = strconv.ParseInt(m[2], 10, 64)
	r.checked, _ = strconv.ParseInt(m[3], 10, 64)
	return r, nil
}

// parseLatency reads one latency percentile line.
func parseLatency(re *regexp.Regexp, out, name string) (time.Duration, error) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no %s latency line (was wrk run with --latency?)", name)
	}
	d, err := time.ParseDuration(m[1] + m[2])
	if err != nil {
		return 0, fmt.Errorf("%s latency %q: %w", name, m[1]+m[2], err)
	}
	return d, nil
}
