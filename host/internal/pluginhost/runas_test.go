//go:build linux

package pluginhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/events/eventstest"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
)

// nobody is the user the probing plugins run as: root, which the tests run
// as, can read any process's environment, whatever the process did.
var nobody = &pluginhost.RunAs{User: "nobody", UID: 65534, GID: 65534}

// asNobody prepares a host's data directory and the test plugins for
// plugins running as nobody: the binaries' directory and the data
// directory are private to root until now.
func asNobody(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting a plugin as another user needs a test running as root")
	}
	if err := os.Chmod(bins, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "capgate-runas-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	return dir
}

type probeRead struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Err     string `json:"err"`
	Denied  bool   `json:"denied"`
}

type probeOut struct {
	UID, GID int
	Reads    []probeRead `json:"reads"`
}

func probe(name, config string, env ...string) pluginhost.Spec {
	return pluginhost.Spec{Name: name, Path: filepath.Join(bins, "probe"), Config: json.RawMessage(config),
		ConfigPath: "plugins[0]", Env: env, RunAs: nobody}
}

// startIn starts specs with dataDir as the host's data directory; the
// host's log is shown when the test fails.
func startIn(t *testing.T, dataDir string, specs ...pluginhost.Spec) (*pluginhost.Host, error) {
	t.Helper()
	h, err := pluginhost.Start(context.Background(), specs, quietOptions(t, dataDir, nil))
	if h != nil {
		t.Cleanup(h.Stop)
	}
	return h, err
}

func quietOptions(t *testing.T, dataDir string, bus events.Bus) pluginhost.Options {
	logs := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("host log:\n%s", logs)
		}
	})
	return pluginhost.Options{DataDir: dataDir, HostVersion: "test", StartTimeout: 20 * time.Second, Events: bus,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// TestPluginReadsNoOtherEnvironment: a plugin cannot read the host's
// environment (every plugin's secrets) nor a sibling plugin's, even one
// running as the same user; the sibling that made itself dumpable again is
// the control that the probe would see what it could read.
func TestPluginReadsNoOtherEnvironment(t *testing.T) {
	dataDir := asNobody(t)
	h, err := startIn(t, dataDir,
		probe("target", `{}`, "TARGET_SECRET=target-secret-81723"),
		probe("control", `{"dumpable":true}`, "CONTROL_SECRET=control-secret-55104"),
		probe("prober", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	target, control := h.Plugins()[0].PID(), h.Plugins()[1].PID()
	res, err := h.Providers()["prober"].Invoke(context.Background(), dispatch.Request{Capability: "probe.environ",
		Args: json.RawMessage(fmt.Sprintf(`{"pids":[%d,%d]}`, target, control))})
	if err != nil {
		t.Fatal(err)
	}
	var got probeOut
	if err := json.Unmarshal(res, &got); err != nil || len(got.Reads) != 3 {
		t.Fatalf("probe answered %s (%v)", res, err)
	}
	if got.UID != 65534 || got.GID != 65534 {
		t.Errorf("the probe runs as %d:%d, want 65534:65534", got.UID, got.GID)
	}
	for i, who := range []string{"the host", "a sibling plugin"} {
		if r := got.Reads[i]; !r.Denied || r.Content != "" {
			t.Errorf("the probe read %s's environment %s: content %q, error %q; want permission denied", who, r.Path, r.Content, r.Err)
		}
	}
	if r := got.Reads[2]; r.Err != "" || !strings.Contains(r.Content, "CONTROL_SECRET=control-secret-55104") {
		t.Errorf("the control (a dumpable sibling) read as %q, error %q; the probe cannot tell a refusal from a failure", r.Content, r.Err)
	}
	// What the host holds, as the kernel shows it to root: none of it is in
	// the probe's answer.
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(own), "\x00") {
		if len(kv) > 8 && strings.Contains(string(res), kv) {
			t.Errorf("the probe's answer holds the host's %q", kv)
		}
	}
	if strings.Contains(string(res), "target-secret-81723") {
		t.Errorf("the probe's answer holds the sibling's secret: %s", res)
	}

	fi, err := os.Stat(filepath.Join(dataDir, "plugins", "prober"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm() != 0o700 {
		t.Errorf("the plugin's data dir is %04o %d:%d, want 0700 owned by 65534:65534", fi.Mode().Perm(), st.Uid, st.Gid)
	}
}

// TestRunAsReachesHostServices: the host's end of the services a plugin
// dials is a socket of the host's; a plugin of another user still reaches
// it, and publishes.
func TestRunAsReachesHostServices(t *testing.T) {
	dataDir := asNobody(t)
	bus := eventstest.Embedded(t, 10)
	spec := publisher(`[{"type":"booking.created","entity":"booking","id":"b1"}]`)
	spec.RunAs = nobody
	h, err := pluginhost.Start(context.Background(), []pluginhost.Spec{spec}, quietOptions(t, dataDir, bus))
	if h != nil {
		t.Cleanup(h.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	evs, _, err := bus.Since(context.Background(), 0, 10)
	if err != nil || len(evs) != 1 || evs[0].ID != "b1" {
		t.Fatalf("bus holds %+v, %v; want the plugin's one event", evs, err)
	}
}

// TestRunAsUnreachableBinary: a binary the plugin's user may not reach
// fails the start with the directory in the way, not a bare "permission
// denied".
func TestRunAsUnreachableBinary(t *testing.T) {
	dataDir := asNobody(t)
	private := t.TempDir() // 0700, root's
	b, err := os.ReadFile(filepath.Join(bins, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(private, "probe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := probe("hidden", `{}`)
	spec.Path, spec.ConfigPath = filepath.Join(private, "probe"), "plugins[3]"
	_, err = startIn(t, dataDir, spec)
	// t.TempDir's own parent, as private, is the first in the way.
	if err == nil || !strings.Contains(err.Error(), "plugins[3].run_as: nobody (uid 65534, gid 65534) may not pass through "+filepath.Dir(private)+" ") {
		t.Fatalf("start = %v; want the directory nobody may not pass through named", err)
	}
}

// The environment of a host run by TestHostEnvironmentHidden: the plugins
// directory, the data directory, and whether to make the host dumpable
// again once its plugins run (the control).
const (
	probeHostBins     = "CAPGATE_TEST_PROBE_HOST_BINS"
	probeHostData     = "CAPGATE_TEST_PROBE_HOST_DATA"
	probeHostDumpable = "CAPGATE_TEST_PROBE_HOST_DUMPABLE"
	hostSecret        = "CAPGATE_TEST_LLM_KEY=llm-key-30591"
)

// init runs this test binary as a host for TestHostEnvironmentHidden when
// it is started so, before any test or the plugins' build.
func init() {
	if os.Getenv(probeHostBins) == "" {
		return
	}
	if err := probeHost(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// probeHost starts one probe plugin as its own user and prints what the
// probe read of the host's environment.
func probeHost() error {
	spec := pluginhost.Spec{Name: "prober", Path: filepath.Join(os.Getenv(probeHostBins), "probe"),
		Config: json.RawMessage(`{}`), ConfigPath: "plugins[0]"}
	h, err := pluginhost.Start(context.Background(), []pluginhost.Spec{spec}, pluginhost.Options{
		DataDir: os.Getenv(probeHostData), HostVersion: "test", StartTimeout: 20 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	defer h.Stop()
	if os.Getenv(probeHostDumpable) != "" {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0); errno != 0 {
			return errno
		}
	}
	res, err := h.Providers()["prober"].Invoke(context.Background(), dispatch.Request{Capability: "probe.environ",
		Args: json.RawMessage(`{}`)})
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(res)
	return err
}

// TestHostEnvironmentHidden: a plugin of the host's own user (no run_as,
// the usual set-up) cannot read the host's environment, where every
// plugin's secrets and the host's keys are. Both run as nobody, since root
// reads any process's; the host made dumpable again is the control.
func TestHostEnvironmentHidden(t *testing.T) {
	dataDir := asNobody(t)
	if err := os.Chown(dataDir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// The test binary is the host, copied where nobody may run it.
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	host := filepath.Join(dataDir, "host")
	if err := os.WriteFile(host, self, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dumpable bool) (probeOut, string) {
		t.Helper()
		cmd := exec.Command(host)
		cmd.Env = []string{probeHostBins + "=" + bins, probeHostData + "=" + filepath.Join(dataDir, fmt.Sprint(dumpable)), hostSecret}
		if dumpable {
			cmd.Env = append(cmd.Env, probeHostDumpable+"=1")
		}
		cmd.Dir = dataDir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("host as nobody: %v\n%s", err, stderr.String())
		}
		var got probeOut
		if err := json.Unmarshal(out, &got); err != nil || len(got.Reads) != 1 {
			t.Fatalf("probe answered %s (%v)", out, err)
		}
		return got, string(out)
	}

	got, raw := run(false)
	if r := got.Reads[0]; got.UID != 65534 || !r.Denied || r.Content != "" {
		t.Errorf("a plugin of the host's user (%d) read the host's environment: content %q, error %q; want permission denied", got.UID, r.Content, r.Err)
	}
	if strings.Contains(raw, "llm-key-30591") {
		t.Errorf("the host's secret reached the plugin: %s", raw)
	}
	if got, _ := run(true); !strings.Contains(got.Reads[0].Content, hostSecret) {
		t.Errorf("the control (a dumpable host) read as %q, error %q; the probe cannot tell a refusal from a failure", got.Reads[0].Content, got.Reads[0].Err)
	}
}

// TestRunAsCheck: `capgate validate` runs a run_as plugin as its user too,
// in a throwaway data directory it opens to that user.
func TestRunAsCheck(t *testing.T) {
	asNobody(t)
	tmp, err := os.MkdirTemp("", "capgate-validate-*") // as validate makes it: 0700, root's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	checked := pluginhost.Check(context.Background(), []pluginhost.Spec{probe("prober", `{}`)},
		quietOptions(t, tmp, nil))
	if c := checked[0]; c.Err != nil || c.Description == nil || c.Description.Name != "probe" {
		t.Fatalf("check = %+v", c)
	}
}
