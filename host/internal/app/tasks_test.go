package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// tasksHost serves an assembled host over dataDir until the test ends or
// stop is called; tasks says the tasks block.
func tasksHost(t *testing.T, dataDir, tasks string) (url string, stop func()) {
	t.Helper()
	return serveTasks(t, fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read, user_id: u1}, {token: test-token-2, role: r, scope: read, user_id: u2}]
roles: {r: [hello.greet]}
packs: {hello: true}
plugins: [{name: hello, path: %s}]
tasks: %s
`, dataDir, helloBin, tasks))
}

// serveTasks serves the host cfgText configures, as tasksHost does.
func serveTasks(t *testing.T, cfgText string) (url string, stop func()) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText), "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return")
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String() + "/api/v1/mcp", stop
}

// modern posts a 2026-07-28 request declaring the tasks extension.
func modern(t *testing.T, url, token, method, name string, params map[string]any) map[string]any {
	t.Helper()
	return modernAs(t, url, token, method, name, map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}, params)
}

// modernAs posts a 2026-07-28 request from a client declaring caps.
func modernAs(t *testing.T, url, token, method, name string, caps, params map[string]any) map[string]any {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var msg map[string]any
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s: %d %s", method, resp.StatusCode, raw)
	}
	return msg
}

// TestTasksThroughTheHost: the assembled host offers the extension, runs
// a task-supporting capability as a task its caller alone can read, and
// still answers for it after a restart; with tasks.enabled off it offers
// none and the call runs at once.
func TestTasksThroughTheHost(t *testing.T) {
	dir := t.TempDir()
	url, stop := tasksHost(t, dir, "{ttl: 1h, poll_interval: 100ms}")
	caps := modern(t, url, "test-token-1", "server/discover", "", map[string]any{})["result"].(map[string]any)["capabilities"].(map[string]any)
	if ext, _ := caps["extensions"].(map[string]any); ext["io.modelcontextprotocol/tasks"] == nil {
		t.Fatalf("capabilities: %v", caps)
	}
	created := modern(t, url, "test-token-1", "tools/call", "hello.greet", map[string]any{"name": "hello.greet", "arguments": map[string]any{"name": "task"}})["result"].(map[string]any)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("created: %v", created)
	}
	get := func(url, token string) map[string]any {
		return modern(t, url, token, "tasks/get", id, map[string]any{"taskId": id})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := get(url, "test-token-1")["result"].(map[string]any)
		if res["status"] == "completed" {
			if !strings.Contains(fmt.Sprint(res["result"]), "hello, task") {
				t.Fatalf("completed: %v", res)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task: %v", res)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, _ := get(url, "test-token-2")["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("another token: %v", e)
	}
	stop()

	// Restarted on the same data directory: the task is still there.
	url, stop = tasksHost(t, dir, "{ttl: 1h}")
	if res, _ := get(url, "test-token-1")["result"].(map[string]any); res == nil || res["status"] != "completed" {
		t.Fatalf("after a restart: %v", res)
	}
	stop()

	url, _ = tasksHost(t, t.TempDir(), "{enabled: false}")
	caps = modern(t, url, "test-token-1", "server/discover", "", map[string]any{})["result"].(map[string]any)["capabilities"].(map[string]any)
	if caps["extensions"] != nil {
		t.Fatalf("capabilities with tasks off: %v", caps)
	}
	res := modern(t, url, "test-token-1", "tools/call", "hello.greet", map[string]any{"name": "hello.greet", "arguments": map[string]any{"name": "now"}})["result"].(map[string]any)
	if res["taskId"] != nil || !strings.Contains(fmt.Sprint(res["content"]), "hello, now") {
		t.Fatalf("tasks off: %v", res)
	}
}

// conformanceBin is the conformance fixtures' plugin, built on first use:
// its confirm_delete asks its client while it runs as a task.
var conformanceBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "capgate-app-conformance-*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "capgate-plugin-conformance")
	out, err := exec.Command("go", "build", "-o", bin, "../../../plugins/conformance").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build the conformance plugin: %v: %s", err, out)
	}
	return bin, nil
})

// TestTaskAsksAcrossARestart: a task whose call asks its client waits in
// input_required with its request; the host stops and starts again on the
// same data directory, which still shows the request, takes the client's
// answer, resumes the call and completes the task with the answer. The
// whole state of the waiting task was in the store: none was in memory.
func TestTaskAsksAcrossARestart(t *testing.T) {
	bin, err := conformanceBin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	dir := t.TempDir()
	cfg := fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read, user_id: u1}, {token: test-token-2, role: r, scope: read, user_id: u2}]
roles: {r: [conformance.run]}
packs: {conformance: true}
plugins: [{name: conformance, path: %s}]
tasks: {ttl: 1h, poll_interval: 100ms}
`, dir, bin)
	caps := map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	url, stop := serveTasks(t, cfg)
	created := modernAs(t, url, "test-token-1", "tools/call", "confirm_delete", caps,
		map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "notes.txt"}})["result"].(map[string]any)
	id, _ := created["taskId"].(string)
	if created["resultType"] != "task" || id == "" {
		t.Fatalf("created: %v", created)
	}
	get := func(url, token string) map[string]any {
		return modernAs(t, url, token, "tasks/get", id, caps, map[string]any{"taskId": id})
	}
	until := func(url, want string) map[string]any {
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, _ := get(url, "test-token-1")["result"].(map[string]any)
			if res["status"] == want {
				return res
			}
			if time.Now().After(deadline) {
				t.Fatalf("task is not %s: %v", want, res)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waiting := until(url, "input_required")
	reqs, _ := waiting["inputRequests"].(map[string]any)
	if len(reqs) != 1 {
		t.Fatalf("waiting: %v", waiting)
	}
	var key string
	for k, r := range reqs {
		key = k
		if q, _ := r.(map[string]any); q["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(q["params"]), "Delete the item?") {
			t.Fatalf("request %s: %v", k, r)
		}
	}
	stop()

	url, stop = serveTasks(t, cfg)
	defer stop()
	again := until(url, "input_required")
	if r, _ := again["inputRequests"].(map[string]any); r[key] == nil || len(r) != 1 {
		t.Fatalf("after a restart: %v", again)
	}
	// Another token learns nothing of it, and cannot answer it.
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	if e, _ := modernAs(t, url, "test-token-2", "tasks/update", id, caps, map[string]any{"taskId": id, "inputResponses": answer})["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("another token's update: %v", e)
	}
	ack := modernAs(t, url, "test-token-1", "tasks/update", id, caps, map[string]any{"taskId": id, "inputResponses": answer})["result"].(map[string]any)
	if ack["resultType"] != "complete" || len(ack) != 2 {
		t.Fatalf("ack: %v", ack)
	}
	done := until(url, "completed")
	if !strings.Contains(fmt.Sprint(done["result"]), "delete notes.txt: accept") {
		t.Fatalf("completed: %v", done)
	}
}
