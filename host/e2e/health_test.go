package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHealthAfterPluginKilled: after kill -9 of the booking plugin, which
// go-plugin does not restart, GET /healthz answers 503 naming booking, so a
// load balancer or a Kubernetes probe takes the replica out; the host logs
// the death once, and booking calls still fail promptly with an error
// naming the dead plugin in the log.
func TestHealthAfterPluginKilled(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	code, body := getHealthz(t, h)
	if code != http.StatusOK || body != `{"status":"ok"}` {
		t.Fatalf("GET /healthz with every plugin alive = %d %s", code, body)
	}

	pids := pluginProcs(h.plugins["booking"])
	if len(pids) == 0 {
		t.Fatalf("no process runs the booking plugin %s", h.plugins["booking"])
	}
	killed := time.Now()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d (booking plugin): %v", pid, err)
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body = getHealthz(t, h)
		if code != http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable {
		t.Fatalf("GET /healthz 10s after the booking plugin was killed = %d %s, want 503", code, body)
	}
	t.Logf("GET /healthz %v after kill -9 of the booking plugin: %d %s", time.Since(killed).Round(time.Millisecond), code, body)
	var got struct {
		Status  string `json:"status"`
		Plugins []struct {
			Name   string    `json:"name"`
			Alive  bool      `json:"alive"`
			DiedAt time.Time `json:"died_at"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("503 body is not JSON: %v: %s", err, body)
	}
	if got.Status != "unavailable" || len(got.Plugins) != 1 || got.Plugins[0].Name != "booking" || got.Plugins[0].Alive ||
		got.Plugins[0].DiedAt.Before(killed.Add(-time.Second)) {
		t.Errorf("503 body = %s, want status unavailable naming only booking, dead since the kill", body)
	}

	// Calls keep failing promptly, the logged error naming the plugin.
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
	start := time.Now()
	o := c.call(h, tokenAlice, "booking.list", map[string]any{"status": "active"})
	if o.err != nil || !o.isError || !strings.Contains(o.text, "internal error") || time.Since(start) > 5*time.Second {
		t.Errorf("booking.list after the plugin died: %v later %s; want a prompt internal error", time.Since(start), o)
	}
	var died, failed int
	for _, line := range strings.Split(h.logText(), "\n") {
		switch {
		case strings.Contains(line, "plugin died") && strings.Contains(line, "booking") && strings.Contains(line, "signal: killed"):
			died++
		case strings.Contains(line, "mcp: call failed") && strings.Contains(line, `plugin \"booking\"`) && strings.Contains(line, "not running"):
			failed++
		}
	}
	if died != 1 || failed == 0 {
		t.Errorf("log has %d plugin-died lines for booking (want 1) and %d failed calls naming the dead booking plugin (want some):\n%s", died, failed, h.logText())
	}

	// A SIGTERM still stops the host cleanly; the harness checks exit 0.
	if !h.terminate(30 * time.Second) {
		t.Fatalf("the host with a dead plugin did not exit within 30s of SIGTERM")
	}
}

func getHealthz(t *testing.T, h *host) (int, string) {
	t.Helper()
	resp, err := http.Get(h.base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	return resp.StatusCode, string(b)
}
