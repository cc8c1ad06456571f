package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
)

// adminActions calls the kill switch of h's admin API: GET, or PUT with
// body; it returns the status and the decoded answer.
func adminActions(t *testing.T, h *host, token, method, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, h.base+"/api/v1/admin/actions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// refusedAt reports whether o is a gate refusal at step.
func refusedAt(o dsOutcome, step string) bool {
	var e struct {
		Code int `json:"code"`
		Data struct {
			Step string `json:"step"`
		} `json:"data"`
	}
	return o.rpcErr != nil && json.Unmarshal(o.rpcErr, &e) == nil && e.Code == -32003 && e.Data.Step == step
}

// TestKillSwitchAcrossReplicas: the kill switch thrown through one
// replica's admin API stops actions on the other within about a second,
// while reads carry on; `capgate actions on` against the shared database
// brings them back on both.
func TestKillSwitchAcrossReplicas(t *testing.T) {
	r1, r2 := replicaPair(t)
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
	create := func(r *host) dsOutcome {
		return c.call(r, tokenAlice, "booking.create", map[string]any{"resource_id": "room-aurora", "start": freeSlot(t, c, r, "room-aurora")})
	}
	// probe is an action that changes nothing when admitted (no such
	// booking: a tool error), so polling with it books no slots.
	probe := func(r *host) dsOutcome {
		return c.call(r, tokenAlice, "booking.cancel", map[string]any{"id": "bk_aaaaaaaaaaaa"})
	}
	admitted := func(o dsOutcome) bool { return o.err == nil && o.rpcErr == nil && o.isError }
	if o := create(r2); o.rpcErr != nil || o.isError || o.err != nil {
		t.Fatalf("booking.create before the switch: %s", o)
	}

	// Only an admin token may throw it; without a token the API is not
	// there at all; a bad body changes nothing.
	if code, _ := adminActions(t, r1, "no-such-token-1", http.MethodGet, ""); code != http.StatusNotFound {
		t.Fatalf("an unknown token: %d, want the 404 of a path that does not exist", code)
	}
	if code, _ := adminActions(t, r1, tokenAlice, http.MethodPut, `{"enabled":false}`); code != http.StatusForbidden {
		t.Fatalf("a customer token threw the switch: %d", code)
	}
	if code, out := adminActions(t, r1, tokenAdmin, http.MethodPut, `{"enabled":"no"}`); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d %v", code, out)
	}
	code, out := adminActions(t, r1, tokenAdmin, http.MethodPut, `{"enabled":false}`)
	if code != http.StatusOK || out["enabled"] != false || out["changed_by"] != "tokens-5" {
		t.Fatalf("PUT: %d %v", code, out)
	}
	thrown := time.Now()
	if o := create(r1); !refusedAt(o, "kill_switch") {
		t.Fatalf("the replica that threw it still admits actions: %s", o)
	}
	var took time.Duration
	for {
		if o := probe(r2); refusedAt(o, "kill_switch") {
			took = time.Since(thrown)
			break
		}
		if time.Since(thrown) > 5*time.Second {
			t.Fatal("the other replica admits actions 5 s after the switch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the other replica refused actions %s after the switch", took.Round(time.Millisecond))
	if took > 2500*time.Millisecond {
		t.Errorf("the other replica took %s; the switch is polled every second", took)
	}
	if _, err := c.mustCall(t, r2, tokenAlice, "booking.list", map[string]any{}); err != nil {
		t.Errorf("a read with actions off: %v", err)
	}
	if code, out := adminActions(t, r2, tokenAdmin, http.MethodGet, ""); code != http.StatusOK || out["enabled"] != false || out["switch_enabled"] != false || out["config_enabled"] != true {
		t.Errorf("GET on the other replica: %d %v", code, out)
	}

	// The switch is a record of the shared audit trail, read from either
	// replica's admin API.
	req, _ := http.NewRequest(http.MethodGet, r2.base+"/api/v1/admin/audit?capability=capgate.actions", nil)
	req.Header.Set("Authorization", "Bearer "+tokenAdmin)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var page struct {
			Records []struct {
				TokenLabel string `json:"token_label"`
				Reason     string `json:"reason"`
			} `json:"records"`
		}
		err := json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(page.Records) != 1 || page.Records[0].TokenLabel != "tokens-5" || page.Records[0].Reason != "actions off" {
			t.Errorf("the audit trail of the switch: %d %+v (%v)", resp.StatusCode, page, err)
		}
	}

	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binaries(t).host, "actions", "on", "-c", r2.config)
	cmd.Env, cmd.Stdout, cmd.Stderr = hostEnv(), &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "actions are on") {
		t.Fatalf("capgate actions on: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	released := time.Now()
	for _, r := range []*host{r1, r2} {
		for {
			o := probe(r)
			if admitted(o) {
				break
			}
			if time.Since(released) > 5*time.Second {
				t.Fatalf("actions still refused 5 s after capgate actions on: %s", o)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if o := create(r1); o.rpcErr != nil || o.isError || o.err != nil {
		t.Errorf("booking.create after the switch was released: %s", o)
	}
}

// waitLog waits until h's log holds want n times in all.
func waitLog(t *testing.T, h *host, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for strings.Count(h.fullLog(), want) < n {
		if time.Now().After(deadline) {
			var lines []string
			for _, l := range strings.Split(h.fullLog(), "\n") {
				if strings.Contains(l, "config") || strings.Contains(l, "SIGHUP") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("no %d× %q in the log within 15s; its lines about the config:\n%s", n, want, strings.Join(lines, "\n"))
		}
		select {
		case <-h.done:
			t.Fatalf("the host ended (%v)", h.werr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestConfigReload: SIGHUP and a changed file reload tokens, roles and
// switches while serving: a changed role takes effect on the next call, a
// broken file changes nothing and has every problem logged with its key
// path, a start-up-only change is named and not applied, and no request
// of an unaffected caller fails meanwhile.
func TestConfigReload(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	original, err := os.ReadFile(h.config)
	if err != nil {
		t.Fatal(err)
	}
	write := func(text string) {
		t.Helper()
		// Through a rename, as editors and ConfigMap updates replace files.
		tmp := h.config + ".new"
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, h.config); err != nil {
			t.Fatal(err)
		}
	}
	hup := func() {
		t.Helper()
		if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}

	// The admin's calls go on throughout; its role never changes.
	var (
		stop   = make(chan struct{})
		wg     sync.WaitGroup
		calls  atomic.Int64
		failed atomic.Int64
		first  atomic.Value
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := c.call(h, tokenAdmin, "booking.resources", map[string]any{})
				calls.Add(1)
				if o.err != nil || o.rpcErr != nil || o.isError {
					failed.Add(1)
					first.CompareAndSwap(nil, o.String())
				}
			}
		}()
	}

	// 1. A role loses a permission: refused from the next call on.
	if _, err := c.mustCall(t, h, tokenAlice, "booking.list", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	narrowed := strings.Replace(string(original), "customer: [booking.read, booking.write, catalogue.read]", "customer: [booking.write, catalogue.read]", 1)
	write(narrowed)
	hup()
	waitLog(t, h, "config reloaded", 1)
	if o := c.call(h, tokenAlice, "booking.list", map[string]any{}); !refusedAt(o, "permission") {
		t.Fatalf("after the reload: %s, want a refusal at permission", o)
	}

	// 2. A broken file changes nothing, and says everything wrong with it.
	write(narrowed + "max_results: ten\nlimits: {default: {rate: 10/d}}\n")
	hup()
	waitLog(t, h, "config reload refused", 1)
	logText := h.fullLog()
	for _, want := range []string{`max_results: must be an integer`, `limits.default.rate: rate \"10/d\": the unit must be s, m or h`} {
		if !strings.Contains(logText, want) {
			t.Errorf("the refused reload does not log %q", want)
		}
	}
	if o := c.call(h, tokenAlice, "booking.list", map[string]any{}); !refusedAt(o, "permission") {
		t.Fatalf("after a broken file: %s, want the last good policy", o)
	}

	// 3. No signal: the file watcher sees the original back, with a new
	// token, a changed port (start-up only) and actions switched off.
	const newToken = "reload-test-token-1"
	restored := strings.Replace(string(original), "tokens:\n", "tokens:\n  - {token: "+newToken+", label: late, role: customer, scope: action, user_id: carol}\n", 1)
	restored = strings.Replace(restored, "listen: 127.0.0.1:", "listen: 127.0.0.2:", 1) + "actions_enabled: false\n"
	write(restored)
	waitLog(t, h, "config reloaded", 2)
	if log := h.fullLog(); !strings.Contains(log, "apply only at start") || !strings.Contains(log, "settings=[listen]") {
		t.Errorf("the changed listen address was not named as start-up only")
	}
	if _, err := c.mustCall(t, h, tokenAlice, "booking.list", map[string]any{}); err != nil {
		t.Errorf("the restored role: %v", err)
	}
	if _, err := c.mustCall(t, h, newToken, "booking.list", map[string]any{}); err != nil {
		t.Errorf("the token added by the reload: %v", err)
	}
	if o := c.call(h, newToken, "booking.cancel", map[string]any{"id": "bk_aaaaaaaaaaaa"}); !refusedAt(o, "kill_switch") {
		t.Errorf("actions_enabled: false from the file: %s", o)
	}

	// Each reload is one record of the audit trail: applied, refused,
	// applied; the file SIGHUP reloaded is not reloaded again by the
	// watcher.
	type reloadRecord struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	reloads := func() []reloadRecord {
		req, _ := http.NewRequest(http.MethodGet, h.base+"/api/v1/admin/audit?capability=capgate.config_reload&order=oldest", nil)
		req.Header.Set("Authorization", "Bearer "+tokenAdmin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page struct{ Records []reloadRecord }
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		return page.Records
	}
	// The last record reaches the database within the flush window.
	var recs []reloadRecord
	for deadline := time.Now().Add(5 * auditFlushWindow); ; time.Sleep(50 * time.Millisecond) {
		if recs = reloads(); len(recs) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Decision)
	}
	if strings.Join(got, ",") != "admitted,refused,admitted" || !strings.Contains(recs[0].Reason, "roles") || !strings.Contains(recs[1].Reason, "max_results") {
		t.Errorf("reload records: %+v", recs)
	}

	close(stop)
	wg.Wait()
	t.Logf("%d calls of an unaffected caller during the reloads, %d failed", calls.Load(), failed.Load())
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of the admin's calls failed during the reloads; the first: %v", n, first.Load())
	}
}

// TestRateLimitAcrossReplicas: two hosts counting in one Redis hold one
// limit between them: five calls an hour to booking.list, spent on either,
// and the sixth is refused on both with a retry time.
func TestRateLimitAcrossReplicas(t *testing.T) {
	needE2E(t)
	redisURL := os.Getenv("CAPGATE_TEST_REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	// A label of this run's own: the count lives in Redis for an hour.
	label := fmt.Sprintf("alice-%d", time.Now().UnixNano())
	edit := func(cfg string) string {
		cfg = strings.Replace(cfg, "user_id: alice}", "user_id: alice, label: "+label+"}", 1)
		return cfg + fmt.Sprintf("limits:\n  redis_url: %s\n  capabilities:\n    booking.list: {rate: 5/h}\n", redisURL)
	}
	r1 := startHostWith(t, t.TempDir(), "{seed: demo}", edit)
	if strings.Contains(r1.fullLog(), "Redis does not answer") {
		if inCI() {
			t.Fatalf("Redis at %s does not answer", redisURL)
		}
		t.Skipf("Redis at %s does not answer", redisURL)
	}
	r2 := startHostWith(t, t.TempDir(), "{seed: demo}", edit)
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
	for i, r := range []*host{r1, r2, r1, r2, r2} {
		if _, err := c.mustCall(t, r, tokenAlice, "booking.list", map[string]any{}); err != nil {
			t.Fatalf("call %d within the limit: %v", i+1, err)
		}
	}
	for _, r := range []*host{r1, r2} {
		o := c.call(r, tokenAlice, "booking.list", map[string]any{})
		var e struct {
			Data struct {
				Step         string  `json:"step"`
				RetryAfterMS float64 `json:"retry_after_ms"`
			} `json:"data"`
		}
		if o.rpcErr == nil || json.Unmarshal(o.rpcErr, &e) != nil || e.Data.Step != "rate_limit" || e.Data.RetryAfterMS < 60_000 {
			t.Errorf("sixth call: %s, want a rate_limit refusal with a retry time of minutes", o)
		}
	}
	// Another token is counted apart, and other capabilities are not limited.
	if _, err := c.mustCall(t, r1, tokenBob, "booking.list", map[string]any{}); err != nil {
		t.Errorf("another token: %v", err)
	}
	if _, err := c.mustCall(t, r2, tokenAlice, "booking.resources", map[string]any{}); err != nil {
		t.Errorf("an unlimited capability: %v", err)
	}
}

// auditFlushWindow is the most time from a call's answer to its audit
// record being in the database, as the audit package documents it on a
// database that accepts writes (flush interval 200 ms), with a margin.
const auditFlushWindow = 600 * time.Millisecond

// TestAuditSurvivesKill9: every call answered more than the flush window
// before the host is killed with SIGKILL has its audit record in the
// database, on SQLite and on PostgreSQL.
func TestAuditSurvivesKill9(t *testing.T) {
	needE2E(t)
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			dsn := ""
			var edit func(string) string
			if engine == "postgres" {
				dsn = postgresBackend(t).dsn
				edit = func(cfg string) string { return cfg + fmt.Sprintf("database: {dsn: %q}\n", dsn) }
			}
			dir := t.TempDir()
			h := startHostWith(t, dir, "{seed: demo}", edit)
			c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
			const calls = 60
			for i := range calls {
				if _, err := c.mustCall(t, h, tokenAlice, "booking.resources", map[string]any{}); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			time.Sleep(auditFlushWindow)
			h.killed = true
			if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-h.done

			store, err := audit.Open(context.Background(), dsn, filepath.Join(dir, "data"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			page, err := store.Query(context.Background(), audit.Filter{Capability: "booking.resources", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(page.Records); n != calls {
				t.Fatalf("%d records of %d answered calls after kill -9", n, calls)
			}
			for _, r := range page.Records {
				if r.Decision != audit.Admitted || r.Outcome != audit.OutcomeOK || r.TokenLabel != "tokens-0" {
					t.Fatalf("record %+v", r)
				}
			}
		})
	}
}
