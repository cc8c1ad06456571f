package pluginhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
)

// quickRestart restarts within a few tens of milliseconds, so tests see
// every state without waiting for the default backoff.
var quickRestart = pluginhost.RestartPolicy{InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxRestarts: 5, Window: time.Minute}

// waitState polls h.Health until plugin name is in state want.
func waitState(t *testing.T, h *pluginhost.Host, name string, want pluginhost.State) pluginhost.Health {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, ph := range h.Health() {
			if ph.Name == name && ph.State == want {
				return ph
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s not %s after 15s: %+v", name, want, h.Health())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logRecords returns the JSON log records at level.
func logRecords(logs *logBuffer, level string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}

func kill(t *testing.T, pid int) {
	t.Helper()
	if pid == 0 {
		t.Fatal("no process to kill")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func getNote(h *pluginhost.Host, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := h.Providers()[name].Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{UserID: "alice"}, Capability: "notes.get", Args: json.RawMessage(`{"id":"n1"}`)})
	return err
}

// A plugin killed with -9 is restarted: Health goes running → restarting
// → running with a new process, calls in the gap fail at once as
// unavailable naming the plugin, and calls afterwards work. The other
// plugin is untouched; the death is logged once as an error, the restart
// once as info.
func TestKilledPluginIsRestarted(t *testing.T) {
	b := notes("b", "")
	b.Restart = pluginhost.RestartPolicy{InitialBackoff: 700 * time.Millisecond, MaxBackoff: time.Second, MaxRestarts: 5, Window: time.Minute}
	h, logs, err := startHost(t, notes("a", ""), b)
	if err != nil {
		t.Fatal(err)
	}
	got := h.Health()
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("health = %+v, want a and b in start order", got)
	}
	for i, ph := range got {
		if ph.State != pluginhost.StateRunning || ph.PID != h.Plugins()[i].PID() || ph.PID == 0 || ph.Restarts != 0 || !ph.DiedAt.IsZero() {
			t.Fatalf("health of a started plugin = %+v", ph)
		}
	}

	old := got[1].PID
	killed := time.Now()
	kill(t, old)
	ph := waitState(t, h, "b", pluginhost.StateRestarting)
	if ph.Reason != "process exited: signal: killed" || ph.DiedAt.Before(killed) || !ph.NextAttempt.After(ph.DiedAt) {
		t.Errorf("health of the killed plugin = %+v", ph)
	}
	// In the gap: at once, as a tool error the agent can read.
	start := time.Now()
	err = getNote(h, "b")
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.Unavailable || !strings.Contains(te.Message, `plugin "b" is restarting`) ||
		!strings.Contains(te.Message, "nothing ran") {
		t.Errorf("call while restarting = %v, want an unavailable tool error naming plugin b", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("call while restarting took %v, want an immediate answer", d)
	}
	// Owner-guarded calls fail closed.
	if _, err := h.Providers()["b"].Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{UserID: "alice"},
		Capability: "notes.get", Args: json.RawMessage(`{"id":"n1"}`), CheckOwner: true}); !errors.As(err, &te) || te.Code != dispatch.Unavailable {
		t.Errorf("an owner-checked call while restarting = %v, want unavailable", err)
	}

	ph = waitState(t, h, "b", pluginhost.StateRunning)
	if ph.PID == old || ph.PID == 0 || ph.PID != h.Plugins()[1].PID() || ph.Restarts != 1 || ph.Reason == "" {
		t.Errorf("health after the restart = %+v (old pid %d)", ph, old)
	}
	if err := getNote(h, "b"); err != nil {
		t.Errorf("call after the restart: %v", err)
	}
	if a := h.Health()[0]; a.State != pluginhost.StateRunning || a.Restarts != 0 {
		t.Errorf("the other plugin was touched: %+v", a)
	}

	errs := logRecords(logs, "ERROR")
	if len(errs) != 1 || errs[0]["plugin"] != "b" || errs[0]["pid"] != float64(old) || errs[0]["reason"] != "process exited: signal: killed" ||
		errs[0]["msg"] != "plugin died; restarting it" {
		t.Errorf("error records = %v, want one naming plugin b, pid %d, signal: killed; log:\n%s", errs, old, logs)
	}
	restarted := 0
	for _, rec := range logRecords(logs, "INFO") {
		if rec["msg"] == "plugin restarted" && rec["plugin"] == "b" && rec["pid"] == float64(ph.PID) {
			restarted++
		}
	}
	if restarted != 1 {
		t.Errorf("%d 'plugin restarted' records for b, want 1:\n%s", restarted, logs)
	}
}

// A restarted plugin that the host had started (OnStart ran) is started
// again, so what it runs in OnStart (a subscription) resumes.
func TestRestartedPluginIsStarted(t *testing.T) {
	n := notes("notes", "")
	n.Restart = quickRestart
	h, logs, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	first := h.Plugins()[0].PID()
	kill(t, first)
	waitState(t, h, "notes", pluginhost.StateRestarting)
	second := waitState(t, h, "notes", pluginhost.StateRunning).PID
	pids := map[float64]bool{}
	for _, rec := range logRecords(logs, "INFO") {
		if rec["msg"] == "notes started" {
			pids[rec["pid"].(float64)] = true
		}
	}
	if len(pids) != 2 || !pids[float64(first)] || !pids[float64(second)] {
		t.Errorf("OnStart ran in processes %v, want %d and %d", pids, first, second)
	}
}

// A plugin that keeps dying is restarted MaxRestarts times within Window,
// then stays down: Health says failed, calls fail at once saying it is
// down until capgate restarts, and the log says why.
func TestCrashLoopStaysDown(t *testing.T) {
	n := notes("notes", "")
	n.Restart = quickRestart
	n.Restart.MaxRestarts = 2
	n.Restart.Window = time.Minute
	h, logs, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		kill(t, h.Plugins()[0].PID())
		waitState(t, h, "notes", pluginhost.StateRestarting)
		if ph := waitState(t, h, "notes", pluginhost.StateRunning); ph.Restarts != i+1 {
			t.Fatalf("after restart %d: %+v", i+1, ph)
		}
	}
	kill(t, h.Plugins()[0].PID())
	ph := waitState(t, h, "notes", pluginhost.StateFailed)
	if ph.Restarts != 2 || !strings.Contains(ph.Detail, "died 3 times within 1m0s") {
		t.Errorf("health of the crash-looping plugin = %+v", ph)
	}
	err = getNote(h, "notes")
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.Unavailable || !strings.Contains(te.Message, "down until capgate restarts") {
		t.Errorf("call to the failed plugin = %v", err)
	}
	time.Sleep(3 * quickRestart.MaxBackoff)
	if ph := h.Health()[0]; ph.State != pluginhost.StateFailed || h.Plugins()[0].PID() != 0 {
		t.Errorf("the failed plugin came back: %+v, pid %d", ph, h.Plugins()[0].PID())
	}
	last := logRecords(logs, "ERROR")
	if len(last) != 3 || !strings.Contains(last[2]["msg"].(string), "stays down until capgate restarts") {
		t.Errorf("error records = %v, want two deaths with restarts and one saying it stays down", last)
	}
}

// MaxRestarts 0: the first death is final.
func TestNeverRestart(t *testing.T) {
	n := notes("notes", "")
	n.Restart = pluginhost.RestartPolicy{InitialBackoff: time.Second}
	h, _, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	kill(t, h.Plugins()[0].PID())
	ph := waitState(t, h, "notes", pluginhost.StateFailed)
	if ph.Restarts != 0 || !strings.Contains(ph.Detail, "never to restart") {
		t.Errorf("health = %+v", ph)
	}
}

// A process that comes back with other capabilities than the plugin
// registered is not used: the plugin stays down, and the log says what
// changed.
func TestChangedCapabilitiesStayDown(t *testing.T) {
	n := notes("notes", `{"change_on_restart":true}`)
	n.Restart = quickRestart
	h, logs, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	kill(t, h.Plugins()[0].PID())
	ph := waitState(t, h, "notes", pluginhost.StateFailed)
	if !strings.Contains(ph.Detail, "capability notes.extra is new") {
		t.Errorf("health = %+v, want the change named", ph)
	}
	if !strings.Contains(logs.String(), "capability notes.extra is new") {
		t.Errorf("the log does not say what changed:\n%s", logs)
	}
	if err := getNote(h, "notes"); err == nil {
		t.Error("a call reached the changed plugin")
	}
}

// Stopping the host is no death: nothing restarts, nothing logs an error.
func TestStopIsNoDeath(t *testing.T) {
	a, b := notes("a", ""), notes("b", "")
	a.Restart, b.Restart = quickRestart, quickRestart
	h, logs, err := startHost(t, a, b)
	if err != nil {
		t.Fatal(err)
	}
	pids := []int{h.Plugins()[0].PID(), h.Plugins()[1].PID()}
	h.Stop()
	for _, pid := range pids {
		waitDead(t, pid)
	}
	time.Sleep(3 * quickRestart.MaxBackoff)
	for _, ph := range h.Health() {
		if ph.State != pluginhost.StateStopped || ph.Restarts != 0 {
			t.Errorf("a plugin the host stopped = %+v", ph)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) || strings.Contains(logs.String(), "restart") {
		t.Errorf("stopping the host logged an error or a restart:\n%s", logs)
	}
}

// Calls beyond MaxInFlight fail at once as unavailable, naming the limit;
// the slots come back when the calls end.
func TestInFlightBound(t *testing.T) {
	n := notes("notes", "")
	n.MaxInFlight = 3
	h, _, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	prov := h.Providers()["notes"]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = prov.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.wait", Args: json.RawMessage(fmt.Sprintf(`{"id":"w%d"}`, i))})
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.Plugins()[0].InFlight() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("in flight = %d, want 3", h.Plugins()[0].InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
	err = getNote(h, "notes")
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.Unavailable || !strings.Contains(te.Message, "limit of 3 calls in flight") {
		t.Errorf("call beyond the bound = %v", err)
	}
	cancel()
	wg.Wait()
	if n := h.Plugins()[0].InFlight(); n != 0 {
		t.Errorf("in flight after the calls ended = %d", n)
	}
	if err := getNote(h, "notes"); err != nil {
		t.Errorf("call after the slots came back: %v", err)
	}
}

// A plugin's environment is what its Spec lists and nothing of the
// host's: another plugin's secret in the host's environment never reaches
// it.
func TestPluginEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("CAPGATE_TEST_OTHER_SECRET", "s3cret-of-another-plugin")
	n := notes("notes", "")
	n.Env = []string{"NOTES_GREETING=hi"}
	h, _, err := startHost(t, n)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.Providers()["notes"].Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.env", Args: json.RawMessage(`{"id":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Env []string }
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range out.Env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
		if strings.Contains(kv, "s3cret") || name == "PATH" || name == "HOME" {
			t.Errorf("the plugin inherited %q from the host", kv)
		}
	}
	hasGreeting := false
	for _, kv := range out.Env {
		hasGreeting = hasGreeting || kv == "NOTES_GREETING=hi"
	}
	if !hasGreeting {
		t.Errorf("environment %v lacks the configured NOTES_GREETING=hi", out.Env)
	}
	for _, name := range names {
		if name != "NOTES_GREETING" && name != "CAPGATE_PLUGIN" && !strings.HasPrefix(name, "PLUGIN_") {
			t.Errorf("unexpected variable %s in the plugin's environment %v", name, names)
		}
	}
}

// A result over MaxResultBytes is refused by the plugin's SDK with a
// message the agent can act on, and the link keeps serving.
func TestResultOverLimit(t *testing.T) {
	logs := &logBuffer{}
	h, err := pluginhost.Start(context.Background(), []pluginhost.Spec{notes("notes", "")}, pluginhost.Options{
		DataDir: t.TempDir(), Logger: slog.New(slog.NewJSONHandler(logs, nil)), MaxResultBytes: 10_000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	prov := h.Providers()["notes"]
	if _, err := prov.Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.big", Args: json.RawMessage(`{"id":"b","size":9000}`)}); err != nil {
		t.Fatalf("a result under the limit: %v", err)
	}
	_, err = prov.Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.big", Args: json.RawMessage(`{"id":"b","size":20000}`)})
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.InvalidInput || !strings.Contains(te.Message, "more than this server's limit of 10000 bytes") ||
		!strings.Contains(te.Message, "notes.big") {
		t.Errorf("a result over the limit = %v", err)
	}
	if err := getNote(h, "notes"); err != nil {
		t.Errorf("a call after the refused result: %v", err)
	}
	if ph := h.Health()[0]; ph.State != pluginhost.StateRunning || ph.Restarts != 0 {
		t.Errorf("the plugin did not keep serving: %+v", ph)
	}
}

// A restart policy the host cannot follow stops start-up naming the field.
func TestBadRestartPolicy(t *testing.T) {
	n := notes("notes", "")
	n.Restart = pluginhost.RestartPolicy{InitialBackoff: time.Second, MaxBackoff: time.Millisecond, MaxRestarts: 3, Window: time.Minute}
	_, _, err := startHost(t, n)
	if err == nil || !strings.Contains(err.Error(), "plugins[0].restart: max_backoff (1ms) must be at least initial_backoff (1s)") {
		t.Errorf("start = %v", err)
	}
}
