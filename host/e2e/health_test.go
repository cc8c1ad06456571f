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

// TestHealthAfterPluginKilled: after kill -9 of the booking plugin the host
// restarts it. GET /healthz answers 503 "restarting" naming booking (a load
// balancer sends calls elsewhere for that moment), then 200 again; GET
// /livez stays 200, as a restart in progress is no reason to restart the
// replica; the host logs the death and the restart once each, and booking
// calls work again afterwards.
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

	var restarting string
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body = getHealthz(t, h)
		if code == http.StatusServiceUnavailable && restarting == "" {
			restarting = body
			if lc, lb := getPath(t, h, "/livez"); lc != http.StatusOK {
				t.Errorf("GET /livez while booking restarts = %d %s, want 200", lc, lb)
			}
		}
		if code == http.StatusOK && restarting != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if restarting == "" {
		t.Fatalf("GET /healthz never answered 503 after the booking plugin was killed (last %d %s)", code, body)
	}
	if code != http.StatusOK {
		t.Fatalf("GET /healthz 15s after the kill = %d %s, want 200 once booking is back", code, body)
	}
	t.Logf("GET /healthz after kill -9 of the booking plugin: %s, then ok %v after the kill", restarting, time.Since(killed).Round(time.Millisecond))
	var got struct {
		Status  string `json:"status"`
		Plugins []struct {
			Name     string    `json:"name"`
			State    string    `json:"state"`
			Since    time.Time `json:"since"`
			Restarts int       `json:"restarts"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(restarting), &got); err != nil {
		t.Fatalf("503 body is not JSON: %v: %s", err, restarting)
	}
	if got.Status != "restarting" || len(got.Plugins) != 1 || got.Plugins[0].Name != "booking" || got.Plugins[0].State != "restarting" ||
		got.Plugins[0].Since.Before(killed.Add(-time.Second)) {
		t.Errorf("503 body = %s, want status restarting naming only booking, since the kill", restarting)
	}

	// Booking serves again, from a new process.
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
	o := c.call(h, tokenAlice, "booking.list", map[string]any{"status": "active"})
	if o.err != nil || o.rpcErr != nil || o.isError {
		t.Errorf("booking.list after the restart: %s", o)
	}
	if now := pluginProcs(h.plugins["booking"]); len(now) != 1 || now[0] == pids[0] {
		t.Errorf("booking plugin processes after the restart: %v (killed %v)", now, pids)
	}
	var died, restarted int
	for _, line := range strings.Split(h.logText(), "\n") {
		switch {
		case strings.Contains(line, "plugin died; restarting it") && strings.Contains(line, "plugin=booking") && strings.Contains(line, "signal: killed"):
			died++
		case strings.Contains(line, "plugin restarted") && strings.Contains(line, "plugin=booking"):
			restarted++
		}
	}
	if died != 1 || restarted != 1 {
		t.Errorf("log has %d plugin-died and %d plugin-restarted lines for booking, want 1 each:\n%s", died, restarted, h.logText())
	}
}

// TestHealthWhenPluginStaysDown: a plugin whose policy is never to restart
// (max_restarts: 0) stays down after it dies: /healthz and /livez answer
// 503 "unavailable" with the plugin failed, so an orchestrator restarts the
// replica, and its calls answer at once that it is down.
func TestHealthWhenPluginStaysDown(t *testing.T) {
	needE2E(t)
	h := startHostWith(t, t.TempDir(), "{seed: demo}, restart: {max_restarts: 0}", nil)
	for _, pid := range pluginProcs(h.plugins["booking"]) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	var code int
	var body string
	for {
		if code, body = getPath(t, h, "/livez"); code == http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"unavailable"`) || !strings.Contains(body, `"state":"failed"`) {
		t.Fatalf("GET /livez after the plugin died for good = %d %s", code, body)
	}
	if code, body := getHealthz(t, h); code != http.StatusServiceUnavailable || !strings.Contains(body, `"name":"booking","state":"failed"`) {
		t.Errorf("GET /healthz = %d %s", code, body)
	}
	c := &mcpClient{http: &http.Client{Timeout: 30 * time.Second}}
	start := time.Now()
	o := c.call(h, tokenAlice, "booking.list", map[string]any{"status": "active"})
	if o.err != nil || !o.isError || !strings.Contains(o.text, `plugin "booking" is down until capgate restarts`) || time.Since(start) > 5*time.Second {
		t.Errorf("booking.list to the failed plugin: %s", o)
	}
}

// getPath GETs a path of the host and returns the status and body.
func getPath(t *testing.T, h *host, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(h.base + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

func getHealthz(t *testing.T, h *host) (int, string) {
	t.Helper()
	return getPath(t, h, "/healthz")
}
