package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const listCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"booking.list","arguments":{}}}`

// newListRequest is a raw 2025-11-25 tools/call of booking.list as alice.
func newListRequest(h *host, body io.Reader) *http.Request {
	req, err := http.NewRequest(http.MethodPost, h.url(), body)
	if err != nil {
		panic(err)
	}
	req.ContentLength = int64(len(listCall))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+tokenAlice)
	return req
}

// checkListResponse returns "" when resp is a complete, successful
// booking.list answer with alice's two bookings, or what is wrong with it.
func checkListResponse(resp *http.Response) string {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Sprintf("HTTP %d, body cut short: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
	}
	var msg struct {
		ID     int `json:"id"`
		Result *struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Bookings []booking `json:"bookings"`
			} `json:"structuredContent"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return fmt.Sprintf("not a JSON-RPC response (%v): %s", err, body)
	}
	switch {
	case msg.Result == nil:
		return fmt.Sprintf("no result: %s", body)
	case msg.Result.IsError:
		return fmt.Sprintf("tool error: %s", body)
	case len(msg.Result.StructuredContent.Bookings) != 2:
		return fmt.Sprintf("want alice's 2 bookings: %s", body)
	}
	return ""
}

// TestShutdownDrainsCallsAndPlugins sends SIGTERM to a host that is serving
// calls. The host must finish every call it had started (one of them is
// held open across the signal, so at least one is surely in flight), exit 0
// by itself, and leave no plugin process running.
func TestShutdownDrainsCallsAndPlugins(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	plugins := runningPlugins(t, h)
	client := &http.Client{Timeout: 60 * time.Second}

	// The held call: its headers and part of its body go out now, the rest
	// only after SIGTERM, so the host is in the middle of it when told to stop.
	pr, pw := io.Pipe()
	type outcome struct {
		resp *http.Response
		err  error
		at   time.Time
	}
	held := make(chan outcome, 1)
	go func() {
		resp, err := client.Do(newListRequest(h, pr))
		held <- outcome{resp, err, time.Now()}
	}()
	if _, err := pw.Write([]byte(listCall[:20])); err != nil {
		t.Fatal(err)
	}

	// Calls in a loop from a few clients, until the host stops answering.
	var (
		stop    atomic.Bool
		served  atomic.Int64
		mu      sync.Mutex
		bad     []string
		workers sync.WaitGroup
	)
	for range 4 {
		workers.Go(func() {
			deadline := time.Now().Add(60 * time.Second)
			for !stop.Load() && time.Now().Before(deadline) {
				resp, err := client.Do(newListRequest(h, strings.NewReader(listCall)))
				if err != nil {
					// The host no longer takes connections (or closed an
					// idle one): nothing was served, nothing half done.
					if served.Load() > 0 {
						return
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if problem := checkListResponse(resp); problem != "" {
					mu.Lock()
					bad = append(bad, problem)
					mu.Unlock()
					continue
				}
				served.Add(1)
			}
		})
	}
	warmUp := time.Now().Add(60 * time.Second)
	for served.Load() < 40 {
		if time.Now().After(warmUp) {
			stop.Store(true)
			workers.Wait()
			t.Fatalf("only %d calls served in 60s before SIGTERM; failures: %q", served.Load(), bad)
		}
		select {
		case o := <-held:
			t.Fatalf("the held call ended before its body was sent: %+v", o)
		case <-h.done:
			t.Fatalf("the host exited before SIGTERM: %v", h.werr)
		case <-time.After(10 * time.Millisecond):
		}
	}

	sigterm := time.Now()
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the host is shutting down now
	if _, err := pw.Write([]byte(listCall[20:])); err != nil {
		t.Fatalf("finishing the held call's body after SIGTERM: %v", err)
	}
	pw.Close()
	o := <-held
	switch {
	case o.err != nil:
		t.Errorf("the call in flight at SIGTERM failed: %v", o.err)
	case !o.at.After(sigterm):
		t.Errorf("the held call was answered before SIGTERM")
	default:
		if problem := checkListResponse(o.resp); problem != "" {
			t.Errorf("the call in flight at SIGTERM: %s", problem)
		}
	}

	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the host did not exit within 30s of SIGTERM")
	}
	stop.Store(true)
	workers.Wait()
	if code := h.state.ExitCode(); code != 0 {
		t.Errorf("host exit code %d (%v), want 0", code, h.werr)
	}
	t.Logf("%d calls served before the host stopped; host exited %v after SIGTERM", served.Load(), time.Since(sigterm).Round(time.Millisecond))
	for _, b := range bad {
		t.Errorf("a call answered during shutdown: %s", b)
	}

	// Right after the host's exit, none of its plugins may run: not the
	// ones seen before, nor any other process of a plugin binary.
	checkNoPlugins(t, h, plugins)

	// A normal shutdown is no failure: nothing logs an error (the search
	// plugin's subscription to the bus used to report the host hanging up).
	for _, line := range strings.Split(h.logText(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("the shutdown logged an error: %s", line)
		}
	}
}

// runningPlugins returns the live processes of each of the host's plugins,
// and fails the test when a plugin has none.
func runningPlugins(t *testing.T, h *host) map[string][]int {
	t.Helper()
	procs := h.pluginProcs()
	for _, name := range pluginNames {
		if len(procs[name]) == 0 {
			t.Fatalf("no process runs the %s plugin binary %s while the host is up", name, h.plugins[name])
		}
	}
	return procs
}

// checkNoPlugins fails the test for every process of the host's plugins
// still running: those seen while it was up (before) and any other.
func checkNoPlugins(t *testing.T, h *host, before map[string][]int) {
	t.Helper()
	for _, name := range pluginNames {
		for _, pid := range before[name] {
			if alive(pid, h.plugins[name]) {
				t.Errorf("%s plugin process %d outlived the host", name, pid)
			}
		}
	}
	procs := h.pluginProcs()
	for _, name := range pluginNames {
		if left := procs[name]; len(left) > 0 {
			t.Errorf("%s plugin processes running after the host exited: %v", name, left)
		}
	}
}

// TestKilledHostLeavesNoPlugins kills the host with SIGKILL, so it cannot
// stop its plugins itself: the kernel's parent-death signal must end every
// plugin process (booking and search alike) within a few seconds.
func TestKilledHostLeavesNoPlugins(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	plugins := runningPlugins(t, h)
	h.killed = true
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the host did not die within 30s of SIGKILL")
	}
	if ws, ok := h.state.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("host ended with %v, want killed by SIGKILL", h.state)
	}
	// The plugins get SIGTERM from the kernel and stop by themselves.
	deadline := time.Now().Add(15 * time.Second)
	for len(h.pluginProcs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	checkNoPlugins(t, h, plugins)
}

// alive reports whether pid is a live (not zombie) process running exe.
func alive(pid int, exe string) bool {
	link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err == nil {
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	return strings.TrimSuffix(link, " (deleted)") == exe
}

// TestPluginProcsSeesAProcess checks the orphan detector itself on a process
// it knows: a copy of sleep, found by its path while it runs and not after.
func TestPluginProcsSeesAProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "capgate-plugin-probe")
	copyFile(t, sleep, bin)
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if got := pluginProcs(bin); !slices.Equal(got, []int{pid}) {
		t.Errorf("pluginProcs(%s) = %v while pid %d runs it", bin, got, pid)
	}
	if !alive(pid, bin) {
		t.Errorf("alive(%d) = false while it runs", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := pluginProcs(bin); len(got) != 0 {
		t.Errorf("pluginProcs(%s) = %v after the process ended", bin, got)
	}
	if alive(pid, bin) {
		t.Errorf("alive(%d) = true after the process ended", pid)
	}
}
