//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	tokenAlice = "chaos-alice" // customer, action, user alice
	tokenBob   = "chaos-bob"   // customer, action, user bob
	tokenAdmin = "chaos-admin" // admin, user ops
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries are capgate and the booking and search plugins: CHAOS_BIN's
// (make chaos passes make build's bin/), else built here from this checkout.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if d := os.Getenv("CHAOS_BIN"); d != "" {
			binDir = d
			return
		}
		dir, err := os.MkdirTemp("", "capgate-chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		root, _ := filepath.Abs(filepath.Join("..", ".."))
		for _, b := range [][2]string{{"capgate", "./host/cmd/capgate"}, {"capgate-plugin-booking", "./plugins/booking"}, {"capgate-plugin-search", "./plugins/search"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, name := range []string{"capgate", "capgate-plugin-booking", "capgate-plugin-search"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			t.Fatalf("%s: %v (make build puts it there)", name, err)
		}
	}
	return binDir
}

// deps are where the replicas reach their dependencies: the proxies.
type deps struct {
	pgDSN, natsURL, redisURL, stream string
}

func replicaConfig(port int, dataDir, bin string, d deps) string {
	return fmt.Sprintf(`enabled: true
listen: 127.0.0.1:%d
data_dir: %s
log: {level: info}
tokens:
  - {token: %s, role: customer, scope: action, user_id: alice, label: alice}
  - {token: %s, role: customer, scope: action, user_id: bob, label: bob}
  - {token: %s, role: admin, scope: admin, user_id: ops, label: admin}
roles:
  customer: [booking.read, booking.write, catalogue.read]
  admin: ["*"]
packs: {booking: true, search: true}
events_buffer_size: 1000000
database: {dsn: %q}
events: {nats_url: %q, stream: %s}
limits:
  redis_url: %q
  on_redis_error: refuse
  default: {rate: 100000/s}
risk:
  capabilities:
    booking.cancel: review_required
plugins:
  - {name: booking, path: %q, config: {seed: demo, dsn: %q}}
  - {name: search, path: %q}
`, port, strconv.Quote(dataDir), tokenAlice, tokenBob, tokenAdmin, d.pgDSN, d.natsURL, d.stream, d.redisURL,
		filepath.Join(bin, "capgate-plugin-booking"), d.pgDSN, filepath.Join(bin, "capgate-plugin-search"))
}

// replica is one capgate process.
type replica struct {
	name string
	base string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startReplica(t *testing.T, name string, d deps) *replica {
	t.Helper()
	bin := binaries(t)
	dir := t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "capgate.yaml")
	if err := os.WriteFile(cfg, []byte(replicaConfig(port, filepath.Join(dir, "data"), bin, d)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: filepath.Join(dir, "capgate.log"), done: make(chan struct{})}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	r.cmd = exec.Command(filepath.Join(bin, "capgate"), "serve", "-c", cfg)
	r.cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPGATE_") {
			r.cmd.Env = append(r.cmd.Env, kv)
		}
	}
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			r.cmd.Process.Kill()
			<-r.done
		}
		if keep := os.Getenv("CHAOS_KEEP_LOGS"); keep != "" {
			if b, err := os.ReadFile(r.log); err == nil {
				_ = os.WriteFile(filepath.Join(keep, name+".log"), b, 0o644)
			}
		}
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, r.log, tail(r.log, 16<<10))
		}
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-r.done:
			t.Fatalf("%s exited before it was healthy; log:\n%s", name, tail(r.log, 16<<10))
		default:
		}
		if resp, err := http.Get(r.base + "/healthz"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy after 90s; log:\n%s", name, tail(r.log, 16<<10))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// client speaks MCP's tools/call over plain HTTP, as an agent without an
// SDK would; each call's JSON-RPC id is unique, and is the request id the
// audit trail keeps.
type client struct {
	http *http.Client
	n    atomic.Int64
}

// outcome is what one call got.
type outcome struct {
	reqID      string
	sent       time.Time
	took       time.Duration
	err        string          // no answer, an HTTP error, a JSON-RPC error or a tool error
	step       string          // the refusing step of a gate refusal
	structured json.RawMessage // a success's structuredContent
}

func (o outcome) ok() bool { return o.err == "" }

func (c *client) call(r *replica, token, tool string, args any) outcome {
	id := fmt.Sprintf("chaos-%d", c.n.Add(1))
	o := outcome{reqID: strconv.Quote(id), sent: time.Now()}
	defer func() { o.took = time.Since(o.sent) }()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, r.base+"/api/v1/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		o.err = "no answer: " + err.Error()
		o.took = time.Since(o.sent)
		return o
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	o.took = time.Since(o.sent)
	if err != nil {
		o.err = "answer cut short: " + err.Error()
		return o
	}
	var msg struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Structured json.RawMessage `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
		o.err = fmt.Sprintf("HTTP %d: %.300s", resp.StatusCode, raw)
		return o
	}
	switch {
	case msg.Error != nil:
		var data struct {
			Step string `json:"step"`
		}
		_ = json.Unmarshal(msg.Error.Data, &data)
		o.step = data.Step
		o.err = fmt.Sprintf("JSON-RPC %d: %s %s", msg.Error.Code, msg.Error.Message, msg.Error.Data)
	case msg.Result.IsError:
		o.err = "tool error: "
		for _, c := range msg.Result.Content {
			o.err += c.Text
		}
	default:
		o.structured = msg.Result.Structured
	}
	return o
}

// admin sends an admin API request and decodes its JSON answer into out.
func (c *client) admin(r *replica, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+tokenAdmin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %.300s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %.300s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

// approve approves a held call as the admin, which is not the user who
// asked (four eyes).
func (c *client) approve(r *replica, id string) outcome {
	o := outcome{sent: time.Now()}
	code, err := c.admin(r, http.MethodPost, "/api/v1/admin/approvals/"+id+"/approve", map[string]any{"reason": "chaos"}, nil)
	o.took = time.Since(o.sent)
	if err != nil && code != http.StatusConflict { // 409: decided already, by an earlier try whose answer was lost
		o.err = err.Error()
	}
	return o
}
