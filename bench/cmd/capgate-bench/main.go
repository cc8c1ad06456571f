package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Server keys, as accepted by -only, in report order.
const (
	keyCapgate = "capgate"
	keyEcho    = "echo"
	keyGoSDK   = "go-sdk"
	keyMCPGo   = "mcp-go"
	keyBooking = "booking"
	// keyGoverned is hello.greet from a capgate that audits every call and
	// counts it against a rate limit, next to keyCapgate's, which does
	// neither.
	keyGoverned = "governed"
	// keyMetrics is hello.greet from a capgate counting it in its metrics,
	// keyTraced from one tracing it.
	keyMetrics = "metrics"
	keyTraced  = "traced"
	// keySearch (search.go) selects the search rows.
)

// allKeys are the servers -only accepts.
var allKeys = []string{keyCapgate, keyGoverned, keyMetrics, keyTraced, keyEcho, keyGoSDK, keyMCPGo, keyBooking, keySearch, keyReplicas}

// defaultKeys are the servers run without -only: the replicas rows
// (replicas.go) need PostgreSQL and NATS, so they are opt-in.
var defaultKeys = []string{keyCapgate, keyGoverned, keyMetrics, keyTraced, keyEcho, keyGoSDK, keyMCPGo, keyBooking, keySearch}

// greetKeys are the rows of the main table.
var greetKeys = []string{keyCapgate, keyGoverned, keyMetrics, keyTraced, keyEcho, keyGoSDK, keyMCPGo, keyBooking}

// rowKeys are the rows the selected servers produce: keySearch has two.
func rowKeys(selected []string) []string {
	var out []string
	for _, k := range selected {
		if k == keyReplicas {
			out = append(out, replicaKeys()...)
			continue
		}
		out = append(out, k)
		if k == keySearch {
			out = append(out, keySearchFloor, keySearch1, keySearchFloor1)
		}
	}
	return out
}

// options are the command-line settings.
type options struct {
	bin          string
	duration     time.Duration
	warmup       time.Duration
	connections  int
	threads      int
	only         []string
	rounds       int
	settle       time.Duration
	startTimeout time.Duration
	// The governance check's bursts: how many pairs, how long each burst.
	pairs     int
	pairBurst time.Duration
	// The search rows' catalogue size and how long its index may take.
	searchDocuments int
	searchTimeout   time.Duration
	// The replicas rows' PostgreSQL and NATS.
	replica replicaOptions
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit: 0 when every selected server was measured
// (whether or not the targets were met), 1 when one could not be, 2 on bad
// usage.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "capgate-bench:", err)
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))

	wrk, err := findWrk()
	if err != nil {
		fmt.Fprintln(stderr, "capgate-bench:", err)
		return 1
	}
	workDir, err := os.MkdirTemp("", "capgate-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "capgate-bench: create work dir:", err)
		return 1
	}
	defer os.RemoveAll(workDir)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	l := &load{
		wrk:         wrk,
		threads:     opts.threads,
		connections: opts.connections,
		warmup:      opts.warmup,
		duration:    opts.duration,
		workDir:     workDir,
	}
	b := &bench{opts: opts, load: l, workDir: workDir, rows: map[string]*row{}, pairs: map[string][]burstPair{}, pairsErr: map[string]error{}}
	for round := 1; round <= opts.rounds && ctx.Err() == nil; round++ {
		if opts.rounds > 1 {
			slog.Info("round", "n", round, "of", opts.rounds)
		}
		// The plain capgate and its variants are judged round by round;
		// the plain one goes first in odd rounds and last in even ones,
		// so that a drift of the machine within a round (a run that
		// follows another runs warmer) favours neither.
		if round%2 == 1 {
			b.measureCapgate(ctx)
		}
		for _, v := range variants {
			if ctx.Err() == nil {
				b.measureVariant(ctx, v)
			}
		}
		if round%2 == 0 && ctx.Err() == nil {
			b.measureCapgate(ctx)
		}
		if ctx.Err() == nil {
			b.measureReplicas(ctx)
		}
		for _, k := range []string{keyEcho, keyGoSDK, keyMCPGo} {
			if ctx.Err() != nil {
				break
			}
			b.measureInproc(ctx, k)
		}
		// Last: building the index is the heaviest setup, and what is
		// left of its merging must not disturb the other servers.
		if ctx.Err() == nil {
			b.measureSearch(ctx)
		}
	}
	for _, v := range variants {
		if ctx.Err() == nil {
			b.measurePairs(ctx, v)
		}
	}

	env := environment{
		wrk:         wrkVersion(ctx, wrk),
		threads:     l.threads,
		connections: l.connections,
		warmup:      wrkSeconds(l.warmup),
		duration:    wrkSeconds(l.duration),
		rounds:      opts.rounds,
	}
	if l.warmup <= 0 {
		env.warmup = "none"
	}
	env.pairs, env.pairsErr, env.pairBurst = b.pairs, b.pairsErr, wrkSeconds(opts.pairBurst)
	report(stdout, env, b.rows, opts.only)
	if slices.Contains(opts.only, keySearch) {
		searchReport(stdout, env, b.rows, b.search, opts.searchDocuments)
	}
	if replicasSelected(opts.only) {
		replicasReport(stdout, env, b.rows, opts.replica)
	}

	failed := false
	for _, k := range rowKeys(opts.only) {
		if !b.rows[k].ok() {
			failed = true
		}
	}
	if ctx.Err() != nil || failed {
		return 1
	}
	return 0
}

// parseFlags reads the command line.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("capgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var only string
	fs.StringVar(&o.bin, "bin", "../bin", "directory holding the binaries make bench builds (the default is the checkout's bin/ seen from bench/): capgate, capgate-plugin-hello, (for the booking row) capgate-plugin-booking and (for the search rows) capgate-plugin-synthetic, capgate-plugin-search and capgate-search-floor.test")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured run per server (whole seconds)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "discarded warm-up run per server before the measured one (whole seconds; 0 for none)")
	fs.IntVar(&o.connections, "connections", 64, "keep-alive connections held open by wrk")
	fs.IntVar(&o.threads, "threads", 2, "wrk threads (at most -connections)")
	fs.IntVar(&o.rounds, "rounds", 1, "times to run the whole sequence; the report shows each server's median over its undisturbed runs")
	fs.StringVar(&only, "only", strings.Join(defaultKeys, ","), "comma-separated servers to run: "+strings.Join(allKeys, ", ")+" ("+keyReplicas+", which needs PostgreSQL and NATS, only when named)")
	fs.DurationVar(&o.settle, "settle", 30*time.Second, "before each server, wait up to this long for other processes to leave the CPU idle (0: don't wait)")
	fs.IntVar(&o.pairs, "pairs", 40, "the variants' checks (governed, metrics): pairs of back-to-back bursts on the plain capgate and the variant, both running (0: judge each variant's row by round instead)")
	fs.DurationVar(&o.pairBurst, "pair-burst", time.Second, "the variants' checks: the length of one burst (whole seconds)")
	fs.DurationVar(&o.startTimeout, "start-timeout", 30*time.Second, "how long capgate may take to answer /healthz")
	fs.IntVar(&o.searchDocuments, "search-documents", 100_000, "documents in the search rows' generated catalogue (1 to 1000000)")
	fs.DurationVar(&o.searchTimeout, "search-ready-timeout", 15*time.Minute, "how long the search rows' index may take to build after capgate starts")
	addReplicaFlags(fs, &o.replica)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: capgate-bench [flags]\n\nMeasures capgate's MCP endpoint against reference servers with wrk.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.duration < time.Second {
		return nil, fmt.Errorf("-duration %s: must be at least 1s", o.duration)
	}
	if o.warmup < 0 {
		return nil, fmt.Errorf("-warmup %s: must not be negative", o.warmup)
	}
	if o.connections < 1 {
		return nil, fmt.Errorf("-connections %d: must be at least 1", o.connections)
	}
	if o.threads < 1 {
		return nil, fmt.Errorf("-threads %d: must be at least 1", o.threads)
	}
	if o.searchDocuments < 1 || o.searchDocuments > 1_000_000 {
		return nil, fmt.Errorf("-search-documents %d: must be between 1 and 1000000", o.searchDocuments)
	}
	if o.searchTimeout <= 0 {
		return nil, fmt.Errorf("-search-ready-timeout %s: must be positive", o.searchTimeout)
	}
	if o.rounds < 1 {
		return nil, fmt.Errorf("-rounds %d: must be at least 1", o.rounds)
	}
	if o.pairs < 0 || o.pairs > 1000 {
		return nil, fmt.Errorf("-pairs %d: must be between 0 and 1000", o.pairs)
	}
	if o.pairBurst < time.Second {
		return nil, fmt.Errorf("-pair-burst %s: must be at least 1s", o.pairBurst)
	}
	o.threads = min(o.threads, o.connections)
	for _, k := range strings.Split(only, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !slices.Contains(allKeys, k) {
			return nil, fmt.Errorf("-only: unknown server %q (known: %s)", k, strings.Join(allKeys, ", "))
		}
		if !slices.Contains(o.only, k) {
			o.only = append(o.only, k)
		}
	}
	if len(o.only) == 0 {
		return nil, errors.New("-only: no server selected")
	}
	return o, nil
}

// bench runs the servers one at a time.
type bench struct {
	opts    *options
	load    *load
	workDir string
	rows    map[string]*row
	search  []searchRound // one per round of the search rows
	// pairs are each variant's interleaved bursts; pairsErr why they
	// stopped.
	pairs    map[string][]burstPair
	pairsErr map[string]error
}

func (b *bench) selected(k string) bool { return slices.Contains(b.opts.only, k) }

// row returns key's row, creating it.
func (b *bench) row(key string) *row {
	r := b.rows[key]
	if r == nil {
		r = &row{}
		b.rows[key] = r
	}
	return r
}

// pending reports whether key is selected and has not failed to set up.
func (b *bench) pending(key string) bool {
	return b.selected(key) && (b.rows[key] == nil || b.rows[key].err == nil)
}

// fail records a setup failure of key.
func (b *bench) fail(key string, err error) {
	b.row(key).fail(err)
	slog.Error("setup failed", "server", key, "err", err)
}

// measure runs the load for j (already validated) and records the result.
func (b *bench) measure(ctx context.Context, key string, j job) {
	b.measureWith(ctx, b.load, key, j)
}

// measureWith is measure with another load setting.
func (b *bench) measureWith(ctx context.Context, l *load, key string, j job) {
	if b.opts.settle > 0 {
		busy, err := waitQuiet(ctx, b.opts.settle)
		if err != nil {
			b.fail(key, fmt.Errorf("wait for a quiet machine: %w", err))
			return
		}
		if busy >= busyOthers {
			slog.Warn("machine still busy; measuring anyway", "server", key, "busy_cores", fmt.Sprintf("%.2f", busy), "waited", b.opts.settle)
		}
	}
	slog.Info("measuring", "server", key, "url", j.url, "warmup", wrkSeconds(l.warmup), "duration", wrkSeconds(l.duration))
	res, err := l.run(ctx, j)
	if err != nil {
		b.fail(key, fmt.Errorf("load %s: %w", key, err))
		return
	}
	b.row(key).runs = append(b.row(key).runs, res)
	if !res.valid() {
		slog.Error("invalid run", "server", key, "problem", res.problem())
	}
	slog.Info("measured", "server", key, "rps", fmt.Sprintf("%.0f", res.rps), "p50", res.p50, "p99", res.p99,
		"server_cpu", fmt.Sprintf("%.2f", res.cpu.server), "wrk_cpu", fmt.Sprintf("%.2f", res.cpu.wrk), "others_cpu", fmt.Sprintf("%.2f", res.cpu.others))
}

// measureCapgate starts capgate once and measures hello.greet, then
// booking.get, through it.
func (b *bench) measureCapgate(ctx context.Context) {
	wantHello, wantBooking := b.pending(keyCapgate), b.pending(keyBooking)
	if !wantHello && !wantBooking {
		return
	}
	p, err := startCapgate(ctx, b.opts.bin, b.workDir, wantBooking, nil, b.opts.startTimeout)
	if err != nil {
		for _, k := range []string{keyCapgate, keyBooking} {
			if b.pending(k) {
				b.fail(k, fmt.Errorf("start capgate: %w", err))
			}
		}
		return
	}
	defer func() {
		if err := p.stop(); err != nil {
			slog.Warn("stop capgate", "err", err)
		}
	}()
	if wantHello {
		if j, err := greetJob(ctx, keyCapgate, p); err != nil {
			b.fail(keyCapgate, err)
		} else {
			b.measure(ctx, keyCapgate, j)
		}
	}
	if wantBooking && ctx.Err() == nil {
		j, err := bookingJob(ctx, p.mcpURL())
		if err != nil {
			b.fail(keyBooking, fmt.Errorf("prepare booking.get: %w", err))
			return
		}
		j.cpu = p.cpu
		b.measure(ctx, keyBooking, j)
	}
}

// greetJob checks that the capgate p answers hello.greet and returns the
// job that loads it with that call.
func greetJob(ctx context.Context, name string, p *capgateProc) (job, error) {
	url := p.mcpURL()
	if err := validateGreet(ctx, url); err != nil {
		return job{}, fmt.Errorf("validate capgate: %w", err)
	}
	body, err := toolCallBody(greetTool, greetIn{Name: greetName})
	if err != nil {
		return job{}, err
	}
	return job{name: name, url: url, body: body, marker: greet(greetIn{Name: greetName}).Greeting, cpu: p.cpu}, nil
}

// measureInproc starts one in-process server, validates and measures it,
// then stops it.
func (b *bench) measureInproc(ctx context.Context, key string) {
	if !b.pending(key) {
		return
	}
	var h http.Handler
	switch key {
	case keyEcho:
		var err error
		if h, err = echoHandler(); err != nil {
			b.fail(key, err)
			return
		}
	case keyGoSDK:
		h = goSDKHandler()
	case keyMCPGo:
		h = mcpGoHandler()
	}
	s, err := startInproc(key, h)
	if err != nil {
		b.fail(key, err)
		return
	}
	defer func() {
		if err := s.stop(); err != nil {
			slog.Warn("stop", "server", key, "err", err)
		}
		// Leave no garbage of this server for the next one to collect.
		runtime.GC()
	}()
	if err := validateGreet(ctx, s.url); err != nil {
		b.fail(key, fmt.Errorf("validate %s: %w", key, err))
		return
	}
	body, err := toolCallBody(greetTool, greetIn{Name: greetName})
	if err != nil {
		b.fail(key, err)
		return
	}
	b.measure(ctx, key, job{name: key, url: s.url, body: body, marker: greet(greetIn{Name: greetName}).Greeting, cpu: selfCPU})
}
