package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The replicas rows: booking.get and booking.create on SQLite with one
// capgate, and on PostgreSQL with one and with two capgates sharing the
// database and one JetStream stream. They are opt-in (-only replicas): they
// need a PostgreSQL and a NATS server.
//
// Two replicas are loaded by two wrk processes at once, each with half of
// the connections on its own replica; the row sums their requests/s and
// shows the worse of their two p50s and p99s. No load balancer sits in
// between, so the two-replica rows carry no balancer overhead that the
// one-replica rows lack.
const keyReplicas = "replicas"

// Default servers of the replicas rows.
const (
	defaultPGDSN   = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	defaultNATSURL = "nats://127.0.0.1:4222"
)

// replicaAdminToken is the admin token of the replicas config: it adds the
// resources booking.create books.
const replicaAdminToken = "bench-token-admin"

// replicaSetup is one deployment the replicas rows measure.
type replicaSetup struct {
	store    string // "sqlite" or "postgres"
	replicas int
}

var replicaSetups = []replicaSetup{{"sqlite", 1}, {"postgres", 1}, {"postgres", 2}}

// replicaTools are the tools measured on every setup.
var replicaTools = []string{"booking.get", "booking.create"}

// replicaKey is the row key of tool on setup s, e.g. "replicas/booking.get/postgres/2".
func replicaKey(tool string, s replicaSetup) string {
	return fmt.Sprintf("%s/%s/%s/%d", keyReplicas, tool, s.store, s.replicas)
}

// replicaKeys are every replicas row, in report order.
func replicaKeys() []string {
	var out []string
	for _, tool := range replicaTools {
		for _, s := range replicaSetups {
			out = append(out, replicaKey(tool, s))
		}
	}
	return out
}

// replicaOptions are the replicas rows' flags.
type replicaOptions struct {
	pgDSN   string // an existing database to connect to; the bench creates its own next to it
	natsURL string
	// poolMaxConns, when positive, is set as pool_max_conns on the booking
	// plugin's DSN; 0 leaves pgx's default, max(4, CPUs) per replica.
	poolMaxConns int
}

// addReplicaFlags registers the replicas rows' flags.
func addReplicaFlags(fs *flag.FlagSet, o *replicaOptions) {
	fs.StringVar(&o.pgDSN, "pg-dsn", defaultPGDSN, "replicas rows: PostgreSQL to connect to; the bench creates a fresh database there per setup and drops it after")
	fs.IntVar(&o.poolMaxConns, "pg-pool-max-conns", 0, "replicas rows: the booking plugin's PostgreSQL pool size per replica (pool_max_conns on its dsn); 0 keeps pgx's default, max(4, CPUs)")
	fs.StringVar(&o.natsURL, "nats-url", defaultNATSURL, "replicas rows: NATS JetStream server; the bench's stream is created and deleted per setup")
}

// replicaConfig is the capgate config of one replica: the hello and booking
// plugins (no seed), the bench customer and an admin token. dsn empty means
// SQLite in the data dir; natsURL empty means the in-process event bus.
func replicaConfig(binDir, dataDir, listen, dsn, natsURL, stream string) capgateConfig {
	booking := map[string]any{}
	if dsn != "" {
		booking["dsn"] = dsn
	}
	c := capgateConfig{
		Enabled: true,
		Listen:  listen,
		DataDir: dataDir,
		Tokens: []tokenConfig{
			{Token: benchToken, Role: "customer", Scope: "action", UserID: benchUser},
			{Token: replicaAdminToken, Role: "admin", Scope: "admin", UserID: "ops"},
		},
		Roles: map[string][]string{
			"customer": {"booking.read", "booking.write", "catalogue.read", "hello.greet"},
			"admin":    {"*"},
		},
		Packs: map[string]bool{"booking": true, "hello": true},
		Plugins: []pluginConfig{
			{Name: "hello", Path: filepath.Join(binDir, helloPluginBin)},
			{Name: "booking", Path: filepath.Join(binDir, bookingPluginBin), Config: booking},
		},
	}
	if natsURL != "" {
		c.Events = &eventsConfig{NATSURL: natsURL, Stream: stream}
	}
	return c
}

// eventsConfig is capgate's events section.
type eventsConfig struct {
	NATSURL string `yaml:"nats_url"`
	Stream  string `yaml:"stream"`
}

// Slots the create rows book: resources open all day with 5-minute slots,
// booked from the start of the day after tomorrow (UTC) for createDays days,
// which keeps every slot in the future and inside the plugin's 365-day
// horizon for the whole run.
const (
	createSlotMinutes = 5
	createDays        = 360
	slotsPerDay       = 24 * 60 / createSlotMinutes
	// createResources are the resources each wrk process books per phase
	// (warm-up, measured): 4 × 103 680 slots, more than any run books.
	createResources = 4
)

// createBase is the first slot start the create rows book.
func createBase(now time.Time) time.Time {
	return now.UTC().Truncate(24 * time.Hour).Add(48 * time.Hour)
}

// createSlot is the n-th (from 0) slot the create script books: n runs over
// the resources first, then over the slots, so consecutive requests hit
// different resources. It returns the resource index and the start.
func createSlot(base time.Time, n int64) (resource int, start time.Time) {
	resource = int(n % createResources)
	s := (n / createResources) % (createDays * slotsPerDay)
	return resource, base.Add(time.Duration(s) * createSlotMinutes * time.Minute)
}

// createResourceID is the id of a create resource.
func createResourceID(replica int, phase string, i int) string {
	return fmt.Sprintf("bench-r%d-%s-%d", replica, phase, i)
}

// createScript is the wrk script of a create run: each request books the
// next slot of this thread's share (thread k of threads takes the slots
// k-1, k-1+threads, …, as createSlot numbers them), so no two requests of
// the run ask for the same slot. It counts created bookings, "already
// booked" refusals and other errors, and reports them with the bench's
// summary line (bad = refusals + errors).
func createScript(resources []string, base time.Time, threads int) string {
	var b strings.Builder
	b.WriteString("wrk.method = \"POST\"\n")
	for _, k := range sortedKeys(headers()) {
		fmt.Fprintf(&b, "wrk.headers[%s] = %s\n", luaQuote(k), luaQuote(headers()[k]))
	}
	b.WriteString("local resources = {")
	for i, r := range resources {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(luaQuote(r))
	}
	b.WriteString("}\n")
	fmt.Fprintf(&b, "local base = %d\nlocal threads = %d\nlocal slot_seconds = %d\nlocal slots = %d\n",
		base.Unix(), threads, createSlotMinutes*60, createDays*slotsPerDay)
	b.WriteString(`local all = {}
function setup(thread)
  table.insert(all, thread)
  thread:set("thread_no", #all)
end
function init(args)
  created, taken, errors, checked = 0, 0, 0, 0
  n = (thread_no or 1) - 1
end
function request()
  local r = n % #resources
  local s = math.floor(n / #resources) % slots
  n = n + threads
  local start = os.date("!%Y-%m-%dT%H:%M:%SZ", base + s * slot_seconds)
  local body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"booking.create","arguments":{"resource_id":"' ..
    resources[r + 1] .. '","start":"' .. start .. '"}}}'
  local h = {}
  for k, v in pairs(wrk.headers) do h[k] = v end
  return wrk.format(nil, nil, h, body)
end
function response(status, headers, body)
  checked = checked + 1
  if status == 200 and string.find(body, '"isError":true', 1, true) then
    if string.find(body, "already booked", 1, true) then taken = taken + 1 else errors = errors + 1 end
  elseif status == 200 and string.find(body, '"status":"active"', 1, true) then
    created = created + 1
  else
    errors = errors + 1
  end
end
function done(summary, latency, requests)
  local c, t, e, k = 0, 0, 0, 0
  for _, th in ipairs(all) do
    c = c + th:get("created")
    t = t + th:get("taken")
    e = e + th:get("errors")
    k = k + th:get("checked")
  end
  io.write(string.format("capgate-bench: requests=%d bad=%d checked=%d\n", summary.requests, t + e, k))
  io.write(string.format("capgate-bench-create: created=%d taken=%d errors=%d\n", c, t, e))
end
`)
	return b.String()
}

var reCreate = regexp.MustCompile(`(?m)^capgate-bench-create: created=(\d+) taken=(\d+) errors=(\d+)\s*$`)

// parseCreate reads a create run's counts: the bench's summary from
// parseWrk, with bad narrowed to the errors other than "already booked".
func parseCreate(out string) (*result, error) {
	r, err := parseWrk(out)
	if err != nil {
		return nil, err
	}
	m := reCreate.FindStringSubmatch(out)
	if m == nil {
		return nil, errors.New("no capgate-bench-create line from the create script")
	}
	r.created, _ = strconv.ParseInt(m[1], 10, 64)
	r.taken, _ = strconv.ParseInt(m[2], 10, 64)
	r.bad, _ = strconv.ParseInt(m[3], 10, 64)
	r.creates = true
	return r, nil
}

// combine adds up the runs of wrk processes that loaded the replicas at the
// same time: requests and counts add up, requests/s too (each is over the
// same wall time), and the latencies are the worse of the parts', since
// percentiles of two separate histograms cannot be merged.
func combine(parts []*result) *result {
	if len(parts) == 1 {
		return parts[0]
	}
	c := &result{}
	for _, p := range parts {
		c.requests += p.requests
		c.rps += p.rps
		c.p50 = max(c.p50, p.p50)
		c.p99 = max(c.p99, p.p99)
		c.non2xx += p.non2xx
		c.sockErrs += p.sockErrs
		c.bad += p.bad
		c.checked += p.checked
		c.created += p.created
		c.taken += p.taken
		c.creates = c.creates || p.creates
	}
	return c
}

// createdRPS is the rate of bookings actually made: requests/s times the
// share of requests that created one.
func (r *result) createdRPS() float64 {
	if !r.creates {
		return r.rps
	}
	if r.requests == 0 {
		return 0
	}
	return r.rps * float64(r.created) / float64(r.requests)
}

// wrkPart is one wrk process of a run: its script, target and connections.
type wrkPart struct {
	script      string
	url         string
	connections int
	threads     int
}

// splitLoad divides connections and threads over n replicas: each gets an
// equal share (the first ones one more when it does not divide), at least
// one thread, and no more threads than connections.
func splitLoad(connections, threads, n int) (conns, thr []int) {
	for i := 0; i < n; i++ {
		c := connections / n
		if i < connections%n {
			c++
		}
		t := threads / n
		if i < threads%n {
			t++
		}
		conns = append(conns, c)
		thr = append(thr, max(1, min(t, c)))
	}
	return conns, thr
}

// runParts runs the parts' wrk processes at the same time for d and
// returns each one's output and their total CPU time.
func (l *load) runParts(ctx context.Context, parts []wrkPart, d time.Duration, timeout time.Duration) ([]string, time.Duration, error) {
	outs := make([]string, len(parts))
	cpus := make([]time.Duration, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl := *l
			pl.connections, pl.threads = p.connections, p.threads
			outs[i], cpus[i], errs[i] = pl.wrk1(ctx, p.script, job{url: p.url, timeout: timeout}, d)
		}()
	}
	wg.Wait()
	var total time.Duration
	for _, c := range cpus {
		total += c
	}
	return outs, total, errors.Join(errs...)
}

// measureParts warms up with the warm-up parts, then measures with the
// measured ones, and records the combined result under key.
func (b *bench) measureParts(ctx context.Context, key string, warm, measured []wrkPart, parse func(string) (*result, error), cpu cpuProbe) {
	l := b.load
	if b.opts.settle > 0 {
		if busy, err := waitQuiet(ctx, b.opts.settle); err != nil {
			b.fail(key, fmt.Errorf("wait for a quiet machine: %w", err))
			return
		} else if busy >= busyOthers {
			slog.Warn("machine still busy; measuring anyway", "server", key, "busy_cores", fmt.Sprintf("%.2f", busy))
		}
	}
	slog.Info("measuring", "server", key, "wrk_processes", len(measured), "warmup", wrkSeconds(l.warmup), "duration", wrkSeconds(l.duration))
	if l.warmup > 0 {
		if _, _, err := l.runParts(ctx, warm, l.warmup, 0); err != nil {
			b.fail(key, fmt.Errorf("warm-up: %w", err))
			return
		}
	}
	before, err := sampleCPU(cpu)
	if err != nil {
		b.fail(key, fmt.Errorf("sample CPU: %w", err))
		return
	}
	outs, wrkCPU, err := l.runParts(ctx, measured, l.duration, 0)
	if err != nil {
		b.fail(key, fmt.Errorf("load %s: %w", key, err))
		return
	}
	after, err := sampleCPU(cpu)
	if err != nil {
		b.fail(key, fmt.Errorf("sample CPU: %w", err))
		return
	}
	var parts []*result
	for _, out := range outs {
		r, err := parse(out)
		if err != nil {
			b.fail(key, fmt.Errorf("parse wrk output: %w\n%s", err, out))
			return
		}
		parts = append(parts, r)
	}
	res := combine(parts)
	res.cpu = between(before, after, wrkCPU)
	b.row(key).runs = append(b.row(key).runs, res)
	if !res.valid() {
		slog.Error("invalid run", "server", key, "problem", res.problem())
	}
	slog.Info("measured", "server", key, "rps", fmt.Sprintf("%.0f", res.rps), "created_rps", fmt.Sprintf("%.0f", res.createdRPS()),
		"taken", res.taken, "p50", res.p50, "p99", res.p99, "server_cpu", fmt.Sprintf("%.2f", res.cpu.server), "others_cpu", fmt.Sprintf("%.2f", res.cpu.others))
}

// measureReplicas runs every pending replicas setup once.
func (b *bench) measureReplicas(ctx context.Context) {
	if !b.selected(keyReplicas) {
		return
	}
	for _, s := range replicaSetups {
		if ctx.Err() != nil {
			return
		}
		var keys []string
		for _, tool := range replicaTools {
			if k := replicaKey(tool, s); b.replicaPending(k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			continue
		}
		if err := b.measureReplicaSetup(ctx, s); err != nil {
			for _, k := range keys {
				b.fail(k, err)
			}
		}
	}
}

// replicaPending reports whether the replicas row key has not failed: the
// rows are selected together, by keyReplicas.
func (b *bench) replicaPending(key string) bool {
	return b.selected(keyReplicas) && (b.rows[key] == nil || b.rows[key].err == nil)
}

// measureReplicaSetup prepares one setup (database, stream, replicas),
// measures its rows and tears it down.
func (b *bench) measureReplicaSetup(ctx context.Context, s replicaSetup) (err error) {
	var dsn, natsURL, stream string
	if s.store == "postgres" {
		var drop func()
		dsn, drop, err = createDatabase(ctx, b.opts.replica.pgDSN)
		if err != nil {
			return err
		}
		defer drop()
		dsn = withPoolSize(dsn, b.opts.replica.poolMaxConns)
		natsURL = b.opts.replica.natsURL
		stream = "CAPGATE_BENCH_" + randomHex(6)
		del, err := checkStream(ctx, natsURL, stream)
		if err != nil {
			return err
		}
		defer del()
	}
	var procs []*capgateProc
	defer func() {
		for _, p := range procs {
			if err := p.stop(); err != nil {
				slog.Warn("stop capgate", "err", err)
			}
		}
	}()
	procs, err = startReplicas(ctx, b, s, dsn, natsURL, stream)
	if err != nil {
		return err
	}
	cpu := func() (time.Duration, error) {
		var sum time.Duration
		for _, p := range procs {
			c, err := p.cpu()
			if err != nil {
				return 0, err
			}
			sum += c
		}
		return sum, nil
	}
	urls := make([]string, len(procs))
	for i, p := range procs {
		urls[i] = p.mcpURL()
	}
	conns, threads := splitLoad(b.load.connections, b.load.threads, len(urls))

	if k := replicaKey("booking.get", s); b.replicaPending(k) && ctx.Err() == nil {
		if err := b.measureReplicaGet(ctx, k, urls, conns, threads, cpu); err != nil {
			b.fail(k, err)
		}
	}
	if k := replicaKey("booking.create", s); b.replicaPending(k) && ctx.Err() == nil {
		if err := b.measureReplicaCreate(ctx, k, urls, conns, threads, cpu); err != nil {
			b.fail(k, err)
		}
	}
	return nil
}

// startReplicas starts s.replicas capgates, each with its own data dir,
// on the same database and stream.
func startReplicas(ctx context.Context, b *bench, s replicaSetup, dsn, natsURL, stream string) ([]*capgateProc, error) {
	var procs []*capgateProc
	for i := 0; i < s.replicas; i++ {
		p, err := startCapgateWith(ctx, b.opts.bin, b.workDir, []string{capgateBin, helloPluginBin, bookingPluginBin},
			func(abs, dataDir, listen string) capgateConfig {
				return replicaConfig(abs, dataDir, listen, dsn, natsURL, stream)
			}, b.opts.startTimeout)
		if err != nil {
			for _, q := range procs {
				_ = q.stop()
			}
			return nil, fmt.Errorf("start replica %d of %d: %w", i+1, s.replicas, err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// createDatabase creates a fresh database on the server of baseDSN and
// returns its DSN and a function that drops it.
func createDatabase(ctx context.Context, baseDSN string) (string, func(), error) {
	u, err := url.Parse(baseDSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("-pg-dsn must be a postgres:// URL, got %q", redact(baseDSN))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(cctx, baseDSN)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL unreachable at %s (start it, or pass -pg-dsn): %w", redact(baseDSN), err)
	}
	defer admin.Close(context.Background())
	name := "capgate_bench_" + randomHex(6)
	if _, err := admin.Exec(cctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("CREATE DATABASE %s on %s: %w", name, redact(baseDSN), err)
	}
	slog.Info("created database", "name", name)
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, baseDSN)
		if err == nil {
			_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
		if err != nil {
			slog.Warn("drop bench database", "name", name, "err", err)
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// withPoolSize sets pool_max_conns on dsn when n is positive.
func withPoolSize(dsn string, n int) string {
	if n <= 0 {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// poolNote says what PostgreSQL pool the rows ran with.
func poolNote(n int) string {
	if n > 0 {
		return fmt.Sprintf("%d per replica (-pg-pool-max-conns)", n)
	}
	return fmt.Sprintf("pgx's default, max(4, CPUs) = %d per replica", max(4, runtime.NumCPU()))
}

// redact hides a DSN's password.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable DSN)"
}

// checkStream makes sure JetStream answers at natsURL, for the stream the
// replicas will share (capgate creates it when the first one starts), and
// returns a function that deletes the stream and its consumers.
func checkStream(ctx context.Context, natsURL, stream string) (func(), error) {
	connect := func(ctx context.Context) (*nats.Conn, jetstream.JetStream, error) {
		nc, err := nats.Connect(natsURL, nats.Name("capgate-bench"), nats.Timeout(5*time.Second))
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.AccountInfo(ctx)
		}
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return nc, js, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, _, err := connect(cctx)
	if err != nil {
		return nil, fmt.Errorf("NATS JetStream unreachable at %s (start nats-server -js, or pass -nats-url): %w", natsURL, err)
	}
	nc.Close()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nc, js, err := connect(ctx)
		if err == nil {
			err = js.DeleteStream(ctx, stream)
			nc.Close()
		}
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			slog.Warn("delete bench stream", "name", stream, "err", err)
			return
		}
		slog.Info("deleted stream", "name", stream)
	}, nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// callToolAs is callTool with another bearer token.
func callToolAs(ctx context.Context, url, token, tool string, args any) (json.RawMessage, error) {
	body, err := toolCallBody(tool, args)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range headers() {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: read: %w", tool, err)
	}
	var out struct {
		Result *toolResult `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil || out.Error != nil || out.Result == nil || out.Result.IsError {
		return nil, fmt.Errorf("tools/call %s: HTTP %d: %s", tool, resp.StatusCode, snippet(raw))
	}
	return out.Result.payload()
}

// measureReplicaGet creates a booking of the bench user on the first
// replica, checks every replica reads it, and measures booking.get of it.
func (b *bench) measureReplicaGet(ctx context.Context, key string, urls []string, conns, threads []int, cpu cpuProbe) error {
	if _, err := callToolAs(ctx, urls[0], replicaAdminToken, "booking.add_resource", createResourceIn("bench-get")); err != nil {
		return fmt.Errorf("prepare booking.get: %w", err)
	}
	out, err := callTool(ctx, urls[0], "booking.create", map[string]any{"resource_id": "bench-get", "start": createBase(time.Now()).Format(time.RFC3339)})
	if err != nil {
		return fmt.Errorf("prepare booking.get: %w", err)
	}
	var bk struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &bk); err != nil || bk.ID == "" {
		return fmt.Errorf("prepare booking.get: booking.create answered %s", snippet(out))
	}
	args := map[string]any{"id": bk.ID}
	for i, u := range urls {
		got, err := callTool(ctx, u, "booking.get", args)
		if err != nil || !bytes.Contains(got, []byte(bk.ID)) {
			return fmt.Errorf("prepare booking.get: replica %d does not read booking %s: %v %s", i+1, bk.ID, err, snippet(got))
		}
	}
	body, err := toolCallBody("booking.get", args)
	if err != nil {
		return err
	}
	script := filepath.Join(b.workDir, strings.NewReplacer("/", "-", ".", "-").Replace(key)+".lua")
	if err := os.WriteFile(script, []byte(luaScript([][]byte{body}, bk.ID)), 0o600); err != nil {
		return fmt.Errorf("write wrk script: %w", err)
	}
	var parts []wrkPart
	for i, u := range urls {
		parts = append(parts, wrkPart{script: script, url: u, connections: conns[i], threads: threads[i]})
	}
	b.measureParts(ctx, key, parts, parts, parseWrk, cpu)
	return nil
}

// createResourceIn is booking.add_resource's input for a create resource.
func createResourceIn(id string) map[string]any {
	return map[string]any{
		"id": id, "name": "Bench " + id, "kind": "desk", "capacity": 1,
		"slot_minutes": createSlotMinutes, "opens": "00:00", "closes": "24:00",
	}
}

// measureReplicaCreate adds, per replica and phase, createResources fresh
// resources, and measures booking.create over their slots: every wrk
// process books its own resources, every thread its own slots.
func (b *bench) measureReplicaCreate(ctx context.Context, key string, urls []string, conns, threads []int, cpu cpuProbe) error {
	base := createBase(time.Now())
	phases := map[string][]wrkPart{}
	for _, phase := range []string{"warm", "run"} {
		for i, u := range urls {
			var ids []string
			for r := 0; r < createResources; r++ {
				id := createResourceID(i+1, phase, r)
				if _, err := callToolAs(ctx, urls[0], replicaAdminToken, "booking.add_resource", createResourceIn(id)); err != nil {
					return fmt.Errorf("prepare booking.create: %w", err)
				}
				ids = append(ids, id)
			}
			script := filepath.Join(b.workDir, fmt.Sprintf("%s-%s-%d.lua", strings.NewReplacer("/", "-", ".", "-").Replace(key), phase, i+1))
			if err := os.WriteFile(script, []byte(createScript(ids, base, threads[i])), 0o600); err != nil {
				return fmt.Errorf("write wrk script: %w", err)
			}
			phases[phase] = append(phases[phase], wrkPart{script: script, url: u, connections: conns[i], threads: threads[i]})
		}
	}
	b.measureParts(ctx, key, phases["warm"], phases["run"], parseCreate, cpu)
	return nil
}

// describeReplica names a replicas row's store and replica count.
func describeReplica(s replicaSetup) string {
	switch {
	case s.store == "sqlite":
		return "SQLite, 1 replica, in-process events"
	case s.replicas == 1:
		return "PostgreSQL, 1 replica, JetStream events"
	default:
		return fmt.Sprintf("PostgreSQL, %d replicas, one JetStream stream", s.replicas)
	}
}

// replicasReport writes the replicas table.
func replicasReport(w io.Writer, env environment, rows map[string]*row, o replicaOptions) {
	fmt.Fprintf(w, "\nreplicas: booking.get and booking.create, %d connections in total. One replica: one wrk (-t%d -c%d). "+
		"Two replicas: two wrk processes at once, each with half the connections on its own replica, no load balancer; "+
		"req/s is their sum, p50 and p99 the worse of the two (percentiles of separate runs do not merge). "+
		"PostgreSQL rows: a fresh database and JetStream stream per setup, dropped after. "+
		"booking.create books distinct 5-minute slots of fresh resources (no two requests ask for the same slot); "+
		"\"created/s\" counts only the bookings made, \"taken\" the \"already booked\" refusals, \"errors\" every other failure. "+
		"PostgreSQL pool: %s. Server CPU is capgate and its plugins only; PostgreSQL and NATS count in others' CPU.\n\n",
		env.connections, env.threads, env.connections, poolNote(o.poolMaxConns))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	setupW := 0
	for _, s := range replicaSetups {
		setupW = max(setupW, len(describeReplica(s)))
	}
	fmt.Fprintf(tw, "%-15s\t%-*s\treq/s\tcreated/s\tp50\tp99\ttaken\terrors\tserver CPU\tothers' CPU\t\n", "tool", setupW, "setup")
	var notes []string
	for _, tool := range replicaTools {
		for _, s := range replicaSetups {
			k := replicaKey(tool, s)
			name := fmt.Sprintf("%-15s\t%-*s", tool, setupW, describeReplica(s))
			r := rows[k]
			switch {
			case r == nil || (r.err == nil && len(r.runs) == 0):
				fmt.Fprintf(tw, "%s\tnot run\t\t\t\t\t\t\t\t\n", name)
				continue
			case r.err != nil:
				fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t\t\t\t\t\n", name)
				notes = append(notes, fmt.Sprintf("%s on %s FAILED: %v", tool, describeReplica(s), r.err))
				continue
			}
			rps := thousands(r.rps())
			if !r.ok() {
				rps = "INVALID " + rps
				notes = append(notes, fmt.Sprintf("%s on %s INVALID: %s", tool, describeReplica(s), r.problem()))
			}
			created, taken, errs := "-", "-", fmt.Sprint(sumRuns(r, func(x *result) int64 { return x.bad + x.non2xx + x.sockErrs }))
			if tool == "booking.create" {
				created = thousands(median(r.used(), func(x *result) float64 { return x.createdRPS() }))
				taken = shareOf(sumRuns(r, func(x *result) int64 { return x.taken }), sumRuns(r, func(x *result) int64 { return x.requests }))
			}
			others := fmt.Sprintf("%.2f", r.othersCPU())
			if r.othersCPU() > busyOthers {
				others += " !"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t\n", name, rps, created, latency(r.p50()), latency(r.p99()), taken, errs, r.serverCPU(), others)
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
}

// sumRuns adds f over all of r's runs.
func sumRuns(r *row, f func(*result) int64) int64 {
	var n int64
	for _, x := range r.runs {
		n += f(x)
	}
	return n
}

// shareOf renders n of total as a count and a percentage.
func shareOf(n, total int64) string {
	if total == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(total))
}

// replicasSelected reports whether -only picked the replicas rows.
func replicasSelected(only []string) bool { return slices.Contains(only, keyReplicas) }
