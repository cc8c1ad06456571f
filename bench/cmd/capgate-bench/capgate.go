package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// Names of the binaries the bench expects in the bin directory.
const (
	capgateBin       = "capgate"
	helloPluginBin   = "capgate-plugin-hello"
	bookingPluginBin = "capgate-plugin-booking"
)

// capgatePath is where capgate serves MCP.
const capgatePath = "/api/v1/mcp"

// benchUser is the user the bench token acts for; the booking seed gives
// them bookings.
const benchUser = "alice"

// capgateConfig is the subset of capgate's configuration the bench writes.
type capgateConfig struct {
	Enabled bool                `yaml:"enabled"`
	Listen  string              `yaml:"listen"`
	DataDir string              `yaml:"data_dir"`
	Tokens  []tokenConfig       `yaml:"tokens"`
	Roles   map[string][]string `yaml:"roles"`
	Packs   map[string]bool     `yaml:"packs"`
	Plugins []pluginConfig      `yaml:"plugins"`
	// Events is set by the replicas rows only (replicas.go).
	Events *eventsConfig `yaml:"events,omitempty"`
	// Audit and Limits are the governance the capgate rows run with.
	Audit  *auditConfig  `yaml:"audit,omitempty"`
	Limits *limitsConfig `yaml:"limits,omitempty"`
	// Metrics is set by the metrics variant only, Tracing by the traced
	// one.
	Metrics *metricsConfig `yaml:"metrics,omitempty"`
	Tracing *tracingConfig `yaml:"tracing,omitempty"`
}

type metricsConfig struct {
	Listen string `yaml:"listen"`
}

type tracingConfig struct {
	Endpoint string `yaml:"otlp_endpoint"`
}

type tokenConfig struct {
	Token  string `yaml:"token"`
	Role   string `yaml:"role"`
	Scope  string `yaml:"scope"`
	UserID string `yaml:"user_id"`
}

type pluginConfig struct {
	Name   string         `yaml:"name"`
	Path   string         `yaml:"path"`
	Config map[string]any `yaml:"config,omitempty"`
}

type auditConfig struct {
	Enabled bool `yaml:"enabled"`
}

type limitsConfig struct {
	Default rateConfig `yaml:"default"`
}

type rateConfig struct {
	Rate string `yaml:"rate"`
}

// benchLimit is the rate limit the governed rows count every call
// against: counted, never reached.
const benchLimit = "1000000/s"

// benchConfig returns the configuration capgate-bench runs capgate with:
// the gate and the plugin hop alone, without the audit trail or rate
// limits, as the servers it is compared with have neither (governed adds
// them). The booking plugin is configured only when withBooking is set.
func benchConfig(binDir, dataDir, listen string, withBooking bool) capgateConfig {
	c := capgateConfig{
		Enabled: true,
		Listen:  listen,
		DataDir: dataDir,
		Tokens: []tokenConfig{
			{Token: benchToken, Role: "customer", Scope: "action", UserID: benchUser},
		},
		Roles: map[string][]string{
			"customer": {"booking.read", "booking.write", "catalogue.read", "hello.greet"},
		},
		Packs: map[string]bool{"booking": true, "hello": true},
		Plugins: []pluginConfig{
			{Name: "hello", Path: filepath.Join(binDir, helloPluginBin)},
		},
		Audit: &auditConfig{Enabled: false},
	}
	if withBooking {
		c.Plugins = append(c.Plugins, pluginConfig{
			Name: "booking", Path: filepath.Join(binDir, bookingPluginBin), Config: map[string]any{"seed": "demo"},
		})
	}
	return c
}

// governed is c as an operator runs it: every call audited (SQLite, in
// the data directory) and counted against an in-memory rate limit.
func governed(c capgateConfig) capgateConfig {
	c.Audit, c.Limits = nil, &limitsConfig{Default: rateConfig{Rate: benchLimit}}
	return c
}

// withTraces is c with every call traced (sample ratio 1, the default)
// and exported over OTLP/HTTP to otlpSink, which takes and drops them:
// the host pays for its spans, the plugin's and their export.
func withTraces(c capgateConfig) capgateConfig {
	c.Tracing = &tracingConfig{Endpoint: otlpSink()}
	return c
}

// otlpSink is the URL of an OTLP/HTTP receiver in this process that
// answers every export with success and keeps nothing; it starts on first
// use.
var otlpSink = sync.OnceValue(func() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "http://127.0.0.1:1" // nothing listens: exports fail, calls do not
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String()
})

// withMetrics is c with Prometheus metrics on, on a port of their own
// that nothing scrapes during the runs: what counting every call costs.
func withMetrics(c capgateConfig) capgateConfig {
	port, err := freePort()
	if err != nil {
		port = 0 // any free port: the bench never scrapes it
	}
	c.Metrics = &metricsConfig{Listen: fmt.Sprintf("127.0.0.1:%d", port)}
	return c
}

// capgateProc is a running "capgate serve".
type capgateProc struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:PORT
	dataDir string // capgate's data_dir
	logPath string
	started time.Time
	exited  chan struct{}
	waitErr error
}

// cpu is the CPU time of capgate and its plugins.
func (p *capgateProc) cpu() (time.Duration, error) { return treeCPU(p.cmd.Process.Pid)() }

// mcpURL is capgate's MCP endpoint.
func (p *capgateProc) mcpURL() string { return p.base + capgatePath }

// startCapgate writes a config under workDir and starts capgate from binDir,
// with the hello plugin and, when withBooking is set, the booking plugin;
// variant, when set, rewrites the plain configuration. It returns once
// /healthz answers 200.
func startCapgate(ctx context.Context, binDir, workDir string, withBooking bool, variant func(capgateConfig) capgateConfig, timeout time.Duration) (*capgateProc, error) {
	bins := []string{capgateBin, helloPluginBin}
	if withBooking {
		bins = append(bins, bookingPluginBin)
	}
	return startCapgateWith(ctx, binDir, workDir, bins, func(abs, dataDir, listen string) capgateConfig {
		c := benchConfig(abs, dataDir, listen, withBooking)
		if variant != nil {
			c = variant(c)
		}
		return c
	}, timeout)
}

// startCapgateWith checks that bins are in binDir, writes the config that
// config returns (given binDir made absolute, a fresh data directory and the
// listen address) under workDir, starts capgate, and returns once /healthz
// answers 200.
func startCapgateWith(ctx context.Context, binDir, workDir string, bins []string, config func(abs, dataDir, listen string) capgateConfig, timeout time.Duration) (*capgateProc, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return nil, fmt.Errorf("resolve bin dir %q: %w", binDir, err)
	}
	for _, name := range bins {
		if fi, err := os.Stat(filepath.Join(abs, name)); err != nil || fi.IsDir() {
			return nil, fmt.Errorf("%s not found in %s (build capgate and its plugins into it first, or pass -bin): %w",
				name, abs, errOr(err, errors.New("is a directory")))
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// A fresh directory per start: each round begins from the seed, and its
	// config and log stay apart from the previous round's.
	runDir, err := os.MkdirTemp(workDir, "capgate-")
	if err != nil {
		return nil, fmt.Errorf("create capgate run dir: %w", err)
	}
	dataDir := filepath.Join(runDir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create capgate data dir: %w", err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cfg, err := yaml.Marshal(config(abs, dataDir, listen))
	if err != nil {
		return nil, fmt.Errorf("encode capgate config: %w", err)
	}
	cfgPath := filepath.Join(runDir, "capgate.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("write capgate config: %w", err)
	}
	logPath := filepath.Join(runDir, "capgate.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create capgate log: %w", err)
	}
	defer logFile.Close()

	cmd := exec.Command(filepath.Join(abs, capgateBin), "serve", "-c", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = childEnv(os.Environ())
	// Its own process group: a Ctrl-C at the terminal reaches only the
	// bench, which then stops capgate and its plugins in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &capgateProc{cmd: cmd, base: "http://" + listen, dataDir: dataDir, logPath: logPath, exited: make(chan struct{}), started: started}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	slog.Info("started capgate", "pid", cmd.Process.Pid, "listen", listen, "config", cfgPath, "log", logPath)

	if err := p.waitHealthy(ctx, timeout); err != nil {
		_ = p.stop()
		return nil, fmt.Errorf("%w\ncapgate log (%s):\n%s", err, logPath, tailFile(logPath, 40))
	}
	return p, nil
}

// waitHealthy polls /healthz until it answers 200, capgate exits or the
// timeout passes.
func (p *capgateProc) waitHealthy(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := p.base + "/healthz"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("build health request: %w", err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("HTTP %d", resp.StatusCode)
		} else {
			last = err
		}
		select {
		case <-p.exited:
			return fmt.Errorf("capgate exited before %s answered: %v", url, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("capgate not healthy at %s after %s: %w", url, timeout, last)
		case <-tick.C:
		}
	}
}

// stop ends capgate: SIGTERM, then SIGKILL if it has not exited within
// 10 s. Plugins still running after capgate is gone are killed, so that
// nothing of capgate uses CPU while the next server runs.
func (p *capgateProc) stop() error {
	// The plugins, listed while they are still capgate's children.
	plugins, err := descendants(p.cmd.Process.Pid)
	if err != nil {
		slog.Warn("list capgate's plugins", "err", err)
	}
	select {
	case <-p.exited:
		err = fmt.Errorf("capgate had already exited: %v", p.waitErr)
	default:
		err = nil
		if sigErr := p.cmd.Process.Signal(syscall.SIGTERM); sigErr != nil {
			err = fmt.Errorf("signal capgate: %w", sigErr)
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, errors.New("capgate did not exit within 10s of SIGTERM; killed"))
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	for _, c := range plugins {
		if kerr := killIfSame(c); kerr != nil {
			err = errors.Join(err, kerr)
		}
	}
	return err
}

// childEnv is the environment capgate runs with: this one without
// CAPGATE_* variables, which would override the bench's configuration.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CAPGATE_") {
			out = append(out, kv)
		}
	}
	return out
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// bookingJob prepares the booking.get load: it reads booking.get's input
// schema from tools/list, takes a booking of the bench user from
// booking.list, and checks that booking.get answers for it.
func bookingJob(ctx context.Context, url string) (job, error) {
	argName, argType, err := bookingGetArg(ctx, url)
	if err != nil {
		return job{}, err
	}
	out, err := callTool(ctx, url, "booking.list", map[string]any{})
	if err != nil {
		return job{}, err
	}
	id, err := findBookingID(out, benchUser)
	if err != nil {
		return job{}, fmt.Errorf("booking.list: %w: %s", err, snippet(out))
	}
	id = coerceID(id, argType)
	args := map[string]any{argName: id}
	got, err := callTool(ctx, url, "booking.get", args)
	if err != nil {
		return job{}, err
	}
	marker := strings.Trim(fmt.Sprint(id), `"`)
	if !bytes.Contains(got, []byte(marker)) {
		return job{}, fmt.Errorf("booking.get %v answered without the booking's id: %s", args, snippet(got))
	}
	body, err := toolCallBody("booking.get", args)
	if err != nil {
		return job{}, err
	}
	slog.Info("booking.get target", "args", args)
	return job{name: "booking", url: url, body: body, marker: marker}, nil
}

// bookingGetArg returns the name and JSON type of booking.get's id argument.
func bookingGetArg(ctx context.Context, url string) (name, typ string, err error) {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: 1, Method: "tools/list"})
	if err != nil {
		return "", "", fmt.Errorf("encode tools/list: %w", err)
	}
	resp, err := post(ctx, url, body)
	if err != nil {
		return "", "", fmt.Errorf("tools/list: %w", err)
	}
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
				Required []string `json:"required"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil {
		return "", "", fmt.Errorf("decode tools/list: %w", err)
	}
	for _, t := range list.Tools {
		if t.Name != "booking.get" {
			continue
		}
		s := t.InputSchema
		pick := func(n string) (string, string, error) { return n, s.Properties[n].Type, nil }
		for _, n := range []string{"id", "booking_id"} {
			if _, ok := s.Properties[n]; ok {
				return pick(n)
			}
		}
		if len(s.Required) == 1 {
			return pick(s.Required[0])
		}
		if len(s.Properties) == 1 {
			for n := range s.Properties {
				return pick(n)
			}
		}
		return "", "", fmt.Errorf("booking.get's input schema has no single id argument: properties %v, required %v", sortedKeys(s.Properties), s.Required)
	}
	names := make([]string, 0, len(list.Tools))
	for _, t := range list.Tools {
		names = append(names, t.Name)
	}
	return "", "", fmt.Errorf("tools/list has no booking.get (tools: %s)", strings.Join(names, ", "))
}

// ownerKeys are the fields that may name a booking's owner.
var ownerKeys = []string{"user_id", "owner", "owner_id", "customer", "customer_id", "user"}

// findBookingID returns the id of the first booking in a booking.list
// output, preferring one whose owner field names user. The output may be an
// array of bookings or an object holding one.
func findBookingID(out json.RawMessage, user string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode output: %w", err)
	}
	var cands []map[string]any
	var walk func(v any, inArray bool)
	walk = func(v any, inArray bool) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, true)
			}
		case map[string]any:
			if _, ok := x["id"]; ok && inArray {
				cands = append(cands, x)
				return
			}
			for _, k := range sortedKeys(x) {
				walk(x[k], false)
			}
		}
	}
	walk(v, false)
	if len(cands) == 0 {
		return nil, errors.New("no booking with an id in the output")
	}
	for _, c := range cands {
		for _, k := range ownerKeys {
			if s, ok := c[k].(string); ok && s == user {
				return c["id"], nil
			}
		}
	}
	return cands[0]["id"], nil
}

// coerceID converts id to the JSON type the schema asks for.
func coerceID(id any, typ string) any {
	switch x := id.(type) {
	case json.Number:
		if typ == "string" {
			return x.String()
		}
	case string:
		if typ == "integer" || typ == "number" {
			if n := json.Number(x); n.String() != "" {
				if _, err := n.Float64(); err == nil {
					return n
				}
			}
		}
	}
	return id
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errOr returns err, or fallback when err is nil.
func errOr(err, fallback error) error {
	if err != nil {
		return err
	}
	return fallback
}

// tailFile returns the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
