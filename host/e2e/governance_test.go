package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
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
