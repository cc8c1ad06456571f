package pluginhost_test

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/dispatch"
	"github.com/capgate/capgate/host/internal/pluginhost"
)

// waitHealth polls h.Health until plugin name's Alive is want.
func waitHealth(t *testing.T, h *pluginhost.Host, name string, want bool) pluginhost.PluginHealth {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, ph := range h.Health() {
			if ph.Name == name && ph.Alive == want {
				return ph
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s alive != %v after 10s: %+v", name, want, h.Health())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealthReportsAKilledPlugin(t *testing.T) {
	h, logs, err := startHost(t, notes("a", ""), notes("b", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := h.Health()
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("health = %+v, want a and b in start order", got)
	}
	for i, ph := range got {
		if !ph.Alive || ph.PID != h.Plugins()[i].PID() || ph.PID == 0 || !ph.DiedAt.IsZero() || ph.Reason != "" {
			t.Fatalf("health of a started plugin = %+v", ph)
		}
	}

	pid := got[1].PID
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ph := waitHealth(t, h, "b", false)
	if ph.Reason != "process exited: signal: killed" || ph.DiedAt.Before(killed) || ph.PID != pid {
		t.Errorf("health of the killed plugin = %+v", ph)
	}
	if a := h.Health()[0]; !a.Alive {
		t.Errorf("the other plugin is reported dead: %+v", a)
	}

	// One error line names the plugin, its pid and how it exited.
	var deaths []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["level"] == "ERROR" {
			deaths = append(deaths, rec)
		}
	}
	if len(deaths) != 1 || deaths[0]["plugin"] != "b" || deaths[0]["pid"] != float64(pid) || deaths[0]["exit"] != "signal: killed" {
		t.Errorf("error records = %v, want one naming plugin b, pid %d, exit signal: killed; log:\n%s", deaths, pid, logs)
	}

	// Calls still fail promptly, and the error says the plugin is dead.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = h.Providers()["b"].Invoke(ctx, dispatch.Principal{}, "notes.get", json.RawMessage(`{"id":"n1"}`))
	if err == nil || !strings.Contains(err.Error(), `plugin "b"`) || !strings.Contains(err.Error(), "not running (process exited: signal: killed)") {
		t.Errorf("invoke on the dead plugin = %v", err)
	}
	if ctx.Err() != nil {
		t.Error("invoke on the dead plugin waited for its deadline")
	}
}

func TestStopIsNoDeath(t *testing.T) {
	h, logs, err := startHost(t, notes("a", ""), notes("b", ""))
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{h.Plugins()[0].PID(), h.Plugins()[1].PID()}
	h.Stop()
	for _, pid := range pids {
		waitDead(t, pid)
	}
	time.Sleep(100 * time.Millisecond)
	for _, ph := range h.Health() {
		if !ph.Alive {
			t.Errorf("a plugin the host stopped is reported dead: %+v", ph)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("stopping the host logged an error:\n%s", logs)
	}
}
