//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fault is one way a dependency fails.
type fault struct {
	dep   string // postgres, nats or redis
	kind  string // restart, slow, cut or away
	short bool   // part of the short run (CHAOS_SHORT=1 or -short)
}

func (f fault) String() string {
	return map[string]string{"postgres": "PostgreSQL", "nats": "NATS", "redis": "Redis"}[f.dep] + " " +
		map[string]string{"restart": "restart", "slow": "2 s latency", "cut": "cut off", "away": "stopped"}[f.kind]
}

var faults = []fault{
	{"postgres", "restart", true},
	{"postgres", "slow", false},
	{"postgres", "cut", true},
	{"nats", "restart", true},
	{"nats", "slow", false},
	{"nats", "cut", true},
	{"redis", "away", true},
	{"redis", "slow", false},
	{"redis", "cut", false},
}

// Words that name each dependency in an error: what an operator or agent
// needs to see to know which one is away.
var depWords = map[string][]string{
	"postgres": {"postgres", "database"},
	"nats":     {"nats", "event bus", "events", "jetstream"},
	"redis":    {"redis"},
}

const (
	// recoveryBound is how soon after a dependency is back every call must
	// succeed again.
	recoveryBound = 5 * time.Second
	workers       = 4
	pause         = 40 * time.Millisecond
	settle        = 3 * time.Second  // load before each fault
	observe       = 10 * time.Second // load after it, at least
)

// TestChaos runs two replicas over one PostgreSQL, one NATS JetStream and
// one Redis, each behind a fault proxy, under steady load, and fails each
// dependency in turn: a restart, 2 s latency and a cut (or a stop, for
// Redis) for 30 s (5 s, and fewer faults, in the short run). It fails when
// an acknowledged booking, approval, audit record or event is lost, when
// calls do not all succeed again within 5 s of the dependency's return,
// when the kill switch stops working while NATS or Redis is away, or when
// rate-limited calls are not refused while Redis is away. It writes a
// markdown table of what it measured to CHAOS_REPORT (default
// ../../bin/chaos-report.md).
func TestChaos(t *testing.T) {
	short := testing.Short() || os.Getenv("CHAOS_SHORT") == "1"
	hold := 30 * time.Second
	if short {
		hold = 5 * time.Second
	}
	var only *regexp.Regexp
	if o := os.Getenv("CHAOS_ONLY"); o != "" {
		only = regexp.MustCompile("(?i)" + o)
	}
	began := time.Now()

	pg, nats, redis := startPostgres(t), startNATS(t), startRedis(t)
	proxies := map[string]*faultProxy{"postgres": newFaultProxy(t, pg), "nats": newFaultProxy(t, nats), "redis": newFaultProxy(t, redis)}
	d := deps{
		pgDSN:    fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", proxies["postgres"].addr),
		natsURL:  "nats://" + proxies["nats"].addr,
		redisURL: "redis://" + proxies["redis"].addr + "/0",
		stream:   "CHAOS",
	}
	r1 := startReplica(t, "replica-1", d)
	r2 := startReplica(t, "replica-2", d)
	c := &client{http: &http.Client{Timeout: 40 * time.Second}}
	l := &load{c: c, replicas: []*replica{r1, r2}}

	var res struct {
		Resources []struct {
			ID string `json:"id"`
		} `json:"resources"`
	}
	if o := c.call(r1, tokenAdmin, "booking.resources", map[string]any{}); !o.ok() || json.Unmarshal(o.structured, &res) != nil || len(res.Resources) < workers {
		t.Fatalf("booking.resources: %+v", o)
	}
	var resources []string
	for _, r := range res.Resources[:workers] {
		resources = append(resources, r.ID)
	}

	ctx, stop := context.WithCancel(context.Background())
	l.setScenario("warm-up")
	wait := l.run(ctx, resources, pause)
	defer func() { stop(); wait() }()
	time.Sleep(settle)

	var results []*result
	for _, f := range faults {
		if (short && !f.short) || (only != nil && !only.MatchString(f.String())) {
			continue
		}
		r := runFault(t, l, f, pg, nats, redis, proxies[f.dep], hold)
		results = append(results, r)
		t.Logf("%s: %s", f, r.summary())
	}
	stop()
	wait()
	l.setScenario("after")

	// Every dependency is back: what was acknowledged must all be there.
	time.Sleep(2 * time.Second) // the audit trail's batches reach the database within about 200 ms
	lost := verify(t, l.snapshot(), pg, nats, d.stream, c, r1, began, results)

	report := renderReport(results, lost, hold, short, time.Since(began))
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		path = filepath.Join("..", "..", "bin", "chaos-report.md")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			t.Errorf("writing the report: %v", err)
		}
	}
	t.Logf("report (%s):\n%s", path, report)
}

// runFault injects f for hold (a restart takes as long as it takes) under
// the running load, then watches the replicas recover.
func runFault(t *testing.T, l *load, f fault, pg, nats, redis *dependency, p *faultProxy, hold time.Duration) *result {
	t.Helper()
	l.setScenario(f.String())
	time.Sleep(settle)
	dep := map[string]*dependency{"postgres": pg, "nats": nats, "redis": redis}[f.dep]
	r := &result{fault: f}
	ksDone := make(chan string, 1)
	r.start = time.Now()
	if f.dep != "postgres" && f.kind != "restart" {
		// The kill switch lives in PostgreSQL: it must work while NATS or
		// Redis is away.
		go func() { ksDone <- checkKillSwitch(l.c, l.replicas, r.start.Add(time.Second)) }()
	} else {
		ksDone <- ""
	}
	var err error
	switch f.kind {
	case "restart":
		if err = dep.stop(); err == nil {
			err = dep.start()
		}
	case "away":
		if err = dep.stop(); err == nil {
			time.Sleep(hold)
			err = dep.start()
		}
	case "slow":
		if err = p.slow(2000); err == nil {
			time.Sleep(hold)
			err = p.unslow()
		}
	case "cut":
		p.cut()
		time.Sleep(hold)
		err = p.mend()
	}
	r.end = time.Now()
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	r.killSwitch = <-ksDone
	// Watch for observe, and on until the last 2 s of calls all succeeded
	// (at most a minute): the next fault starts from a steady state.
	time.Sleep(observe)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if steady(l.snapshot(), f.String(), 2*time.Second) {
			break
		}
	}
	r.measure(l.snapshot())
	r.explain(l.replicas)
	if !r.recovered || r.recovery > recoveryBound {
		t.Errorf("%s: calls did not all succeed again within %v of the dependency's return (%s)", f, recoveryBound, r.recoveryText())
	}
	if strings.HasPrefix(r.killSwitch, "FAIL") {
		t.Errorf("%s: kill switch: %s", f, r.killSwitch)
	}
	if f.dep == "redis" && r.failed > 0 && r.rateLimited == 0 {
		t.Errorf("%s: no call was refused at rate_limit while Redis was away (on_redis_error: refuse)", f)
	}
	return r
}

// steady reports whether every call of scenario sent in the last window
// (and answered) succeeded, and there were some.
func steady(recs []record, scenario string, window time.Duration) bool {
	from := time.Now().Add(-window - 500*time.Millisecond)
	n := 0
	for _, rec := range recs {
		if rec.scenario != scenario || rec.sent.Before(from) {
			continue
		}
		if !rec.ok() && rec.step != "kill_switch" {
			return false
		}
		n++
	}
	return n > 0
}

// checkKillSwitch throws the kill switch on one replica at at, waits for
// both replicas to report actions off and to refuse an action, and turns
// it back on. It answers what it saw; "FAIL: …" when the switch did not
// work. A refusal at rate_limit counts: with on_redis_error refuse, a call
// the switch refuses is still charged to the token's limit, and a count
// that cannot be kept refuses it there.
func checkKillSwitch(c *client, replicas []*replica, at time.Time) string {
	time.Sleep(time.Until(at))
	put := time.Now()
	if _, err := c.admin(replicas[0], http.MethodPut, "/api/v1/admin/actions", map[string]any{"enabled": false}, nil); err != nil {
		return "FAIL: switching actions off: " + err.Error()
	}
	thrown := time.Now()
	defer func() {
		for i := 0; i < 20; i++ {
			if _, err := c.admin(replicas[0], http.MethodPut, "/api/v1/admin/actions", map[string]any{"enabled": true}, nil); err == nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	seen := []string{fmt.Sprintf("off in %.2f s", thrown.Sub(put).Seconds())}
	for _, r := range replicas {
		for {
			var st struct {
				Enabled *bool `json:"enabled"`
			}
			_, err := c.admin(r, http.MethodGet, "/api/v1/admin/actions", nil, &st)
			if err == nil && st.Enabled != nil && !*st.Enabled {
				break
			}
			if time.Since(thrown) > 5*time.Second {
				return fmt.Sprintf("FAIL: %s does not report actions off 5 s after the switch (%v)", r.name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A slot in the past: were the call admitted, the plugin would
		// refuse it and book nothing.
		o := c.call(r, tokenAlice, string(opCreate), map[string]any{"resource_id": "room-aurora", "start": "2001-01-01T09:00:00Z"})
		if o.step == "" {
			return fmt.Sprintf("FAIL: %s admitted an action with actions off: %.200s", r.name, o.err)
		}
		seen = append(seen, fmt.Sprintf("%s off after %.2f s, refused at %s", r.name, time.Since(thrown).Seconds(), o.step))
	}
	return strings.Join(seen, "; ")
}
