package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The demo principals every test config carries: the same shape as the
// project's demo config, so what a test proves about a token is what an
// operator sees with the demo file.
const (
	tokenAlice   = "demo-alice"   // customer, action, bound to alice
	tokenBob     = "demo-bob"     // customer, action, bound to bob
	tokenReader  = "demo-reader"  // customer, read, bound to alice
	tokenService = "demo-service" // customer, action, bound to no user
	tokenGuest   = "demo-guest"   // guest, read
	tokenAdmin   = "demo-admin"   // admin, admin, bound to ops
)

const mcpPath = "/api/v1/mcp"

var (
	binDir    string // holds the binaries built for this test process
	buildOnce sync.Once
	built     builtBinaries
	buildErr  error
)

// builtBinaries are the paths of the binaries under test.
type builtBinaries struct {
	host string
	// plugins maps each plugin's name in the test config to its binary.
	plugins map[string]string
}

// pluginNames are the plugins every test host runs, in config order: the
// booking plugin provides the catalogue (entity type booking.resource), and
// the search plugin indexes it and serves platform.search, platform.get and
// platform.list.
var pluginNames = []string{"booking", "search"}

// testPlugins are built beside them for the tests that add them to a host
// (withProbe, withLoadConfig), from their source directories.
var testPlugins = map[string]string{
	"probe": "./host/e2e/testdata/plugins/probe", "subscription": "./plugins/subscription",
	"conformance": "./plugins/conformance",
}

// startProbeHost is startHost with the probe test plugin added.
func startProbeHost(t *testing.T) *host {
	t.Helper()
	dir := t.TempDir()
	return startHostWith(t, dir, "{seed: demo}", withProbe(filepath.Join(dir, "capgate-plugin-probe")))
}

// withProbe is a config edit that adds the probe test plugin (probe.slow,
// probe.big, probe.echo; pack probe, permission probe.run, which every
// demo role gets) to a host's config.
func withProbe(probePath string) func(string) string {
	return func(cfg string) string {
		cfg = strings.Replace(cfg, "packs: {booking: true, search: true}", "packs: {booking: true, search: true, probe: true}", 1)
		for _, role := range []string{"customer: [", "guest: ["} {
			cfg = strings.Replace(cfg, role, role+"probe.run, ", 1)
		}
		return cfg + fmt.Sprintf("  - {name: probe, path: %s}\n", strconv.Quote(probePath))
	}
}

// withConformance is a config edit that adds the conformance fixture
// plugin (pack conformance, permission conformance.run, which the customer
// role gets) to a host's config. Only the conformance run adds it: other
// tests count the tools a token sees.
func withConformance(path string) func(string) string {
	return func(cfg string) string {
		cfg = strings.Replace(cfg, "packs: {booking: true, search: true}", "packs: {booking: true, search: true, conformance: true}", 1)
		cfg = strings.Replace(cfg, "customer: [", "customer: [conformance.run, ", 1)
		return cfg + fmt.Sprintf("  - {name: conformance, path: %s}\n", strconv.Quote(path))
	}
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capgate-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// inCI reports whether the run is CI's, where a test that cannot run must
// fail rather than skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// needE2E skips the calling test under -short outside CI: these tests build
// and start real processes.
func needE2E(t *testing.T) {
	t.Helper()
	if testing.Short() && !inCI() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above the e2e package: %v", err)
	}
	return root
}

// binaries builds the host and the plugins once per test process, all at
// once. The host is built with -race when the tests are, so a data race in
// the serving path fails the run (the race detector makes the process exit
// 66).
func binaries(t *testing.T) builtBinaries {
	t.Helper()
	root := repoRoot(t)
	buildOnce.Do(func() {
		b := builtBinaries{host: filepath.Join(binDir, "capgate"), plugins: map[string]string{}}
		hostArgs := []string{"build", "-o", b.host}
		if raceEnabled {
			hostArgs = append(hostArgs, "-race")
		}
		builds := [][]string{append(hostArgs, "./host/cmd/capgate")}
		for _, name := range pluginNames {
			b.plugins[name] = filepath.Join(binDir, "capgate-plugin-"+name)
			builds = append(builds, []string{"build", "-o", b.plugins[name], "./plugins/" + name})
		}
		for name, src := range testPlugins {
			b.plugins[name] = filepath.Join(binDir, "capgate-plugin-"+name)
			builds = append(builds, []string{"build", "-o", b.plugins[name], src})
		}
		var wg sync.WaitGroup
		errs := make([]error, len(builds))
		for i, args := range builds {
			wg.Go(func() {
				cmd := exec.Command("go", args...)
				cmd.Dir = root
				if out, err := cmd.CombinedOutput(); err != nil {
					errs[i] = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			})
		}
		wg.Wait()
		buildErr = errors.Join(errs...)
		built = b
	})
	if buildErr != nil {
		t.Fatalf("building the binaries under test:\n%v", buildErr)
	}
	return built
}

// host is one running capgate process.
type host struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	// plugins maps each plugin's name to this host's own path of its
	// binary, by which its processes are found.
	plugins map[string]string
	log     string // file holding the host's stdout and stderr
	config  string // the configuration file it serves
	// killed is set by a test that ends the host with SIGKILL itself, so
	// the stop at cleanup expects no exit code 0.
	killed bool
	done   chan struct{}
	state  *os.ProcessState // set when done is closed
	werr   error
}

// hostConfig is the test configuration: the demo config's tokens, roles and
// packs (booking and search), with this test's port, data directory and
// plugin paths.
func hostConfig(port int, dataDir string, plugins map[string]string) string {
	return fmt.Sprintf(`enabled: true
listen: 127.0.0.1:%d
data_dir: %s
log:
  level: debug
tokens:
  - {token: %s, role: customer, scope: action, user_id: alice}
  - {token: %s, role: customer, scope: action, user_id: bob}
  - {token: %s, role: customer, scope: read, user_id: alice}
  - {token: %s, role: customer, scope: action}
  - {token: %s, role: guest, scope: read}
  - {token: %s, role: admin, scope: admin, user_id: ops}
roles:
  customer: [booking.read, booking.write, catalogue.read]
  guest: [catalogue.read]
  admin: ["*"]
packs: {booking: true, search: true}
plugins:
  - {name: booking, path: %s, config: {seed: demo}}
  - {name: search, path: %s}
`, port, strconv.Quote(dataDir),
		tokenAlice, tokenBob, tokenReader, tokenService, tokenGuest, tokenAdmin,
		strconv.Quote(plugins["booking"]), strconv.Quote(plugins["search"]))
}

// startHost starts `capgate serve` on a fresh port with a fresh data
// directory (so the booking seed and the search index are new) and waits
// for GET /healthz. When the test ends the host is stopped with SIGTERM and
// must exit 0 leaving no plugin process behind.
func startHost(t *testing.T) *host {
	t.Helper()
	return startHostIn(t, t.TempDir(), "{seed: demo}")
}

// startHostIn starts `capgate serve` like startHost, but on the given
// directory: a second call on the same directory is a restart on the same
// data. bookingConfig replaces the booking plugin's config block.
func startHostIn(t *testing.T, dir, bookingConfig string) *host {
	t.Helper()
	return startHostWith(t, dir, bookingConfig, nil)
}

// startHostWith is startHostIn with edit, when set, rewriting the
// configuration text before the host reads it.
func startHostWith(t *testing.T, dir, bookingConfig string, edit func(string) string) *host {
	t.Helper()
	bins := binaries(t)
	plugins := map[string]string{}
	for name := range bins.plugins {
		plugins[name] = filepath.Join(dir, "capgate-plugin-"+name)
		if _, err := os.Stat(plugins[name]); err == nil {
			continue
		}
		if err := os.Link(bins.plugins[name], plugins[name]); err != nil {
			copyFile(t, bins.plugins[name], plugins[name])
		}
	}
	// The port is free when picked, but another test's process may take
	// it before capgate listens: a host that lost it starts on another.
	for attempt := 1; ; attempt++ {
		port := freePort(t)
		cfgText := hostConfig(port, filepath.Join(dir, "data"), plugins)
		cfgText = strings.Replace(cfgText, "config: {seed: demo}", "config: "+bookingConfig, 1)
		if edit != nil {
			cfgText = edit(cfgText)
		}
		h := launch(t, bins.host, dir, port, cfgText, plugins)
		if h.waitHealthy(attempt < 3) {
			t.Cleanup(h.stop)
			return h
		}
		t.Logf("port %d was taken before capgate could listen on it; starting again on another", port)
	}
}

// launch writes cfgText as dir's config and starts capgate serving it.
func launch(t *testing.T, bin, dir string, port int, cfgText string, plugins map[string]string) *host {
	t.Helper()
	cfg := filepath.Join(dir, "capgate.yaml")
	if err := os.WriteFile(cfg, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, fmt.Sprintf("capgate-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "-c", cfg)
	cmd.Dir = dir
	cmd.Env = hostEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting capgate: %v", err)
	}
	h := &host{t: t, cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), plugins: plugins, log: logPath, config: cfg, done: make(chan struct{})}
	go func() {
		h.werr = cmd.Wait()
		h.state = cmd.ProcessState
		close(h.done)
	}()
	return h
}

// hostEnv is the test process's environment without CAPGATE_* variables,
// which would override the test config.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CAPGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (h *host) url() string { return h.base + mcpPath }

func (h *host) waitHealthy(retryTakenPort bool) bool {
	h.t.Helper()
	deadline := time.Now().Add(90 * time.Second) // a -race build starts slowly on 2 cores
	for time.Now().Before(deadline) {
		select {
		case <-h.done:
			log := h.logText()
			if retryTakenPort && strings.Contains(log, "bind: address already in use") {
				return false
			}
			h.t.Fatalf("capgate exited before it was healthy (%v); log:\n%s", h.werr, log)
		default:
		}
		resp, err := http.Get(h.base + "/healthz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("capgate not healthy at %s/healthz after 90s; log:\n%s", h.base, h.logText())
	return false
}

// terminate sends SIGTERM and waits up to timeout for the host to exit. It
// reports whether the host exited by itself.
func (h *host) terminate(timeout time.Duration) bool {
	select {
	case <-h.done:
		return true
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop ends the host and checks what every test expects of a stop: the
// host exits 0 on SIGTERM and no process of any of its plugins outlives it.
// Plugin processes left over are ended (by PID) so they cannot leak into
// the rest of the run.
func (h *host) stop() {
	t := h.t
	switch {
	case !h.terminate(30 * time.Second):
		t.Errorf("capgate did not exit within 30s of SIGTERM; killing it")
		h.cmd.Process.Kill()
		<-h.done
	case h.killed:
		// The test killed the host and checked its plugins itself.
	default:
		if code := h.state.ExitCode(); code != 0 {
			t.Errorf("capgate exited with code %d on SIGTERM (%v), want 0", code, h.werr)
		}
	}
	procs := h.pluginProcs()
	for name := range h.plugins {
		if left := procs[name]; len(left) > 0 {
			t.Errorf("%s plugin processes left after the host exited: %v", name, left)
			for _, pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	logText := h.logText()
	if strings.Contains(logText, "WARNING: DATA RACE") {
		t.Errorf("the race detector reported a data race in capgate")
	}
	if t.Failed() {
		t.Logf("capgate log (%s):\n%s", h.log, logText)
	}
}

// logText is the host's output so far, trimmed to its last 64 KiB.
func (h *host) logText() string {
	b, err := os.ReadFile(h.log)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	const max = 64 << 10
	if len(b) > max {
		b = append([]byte("…\n"), b[len(b)-max:]...)
	}
	return string(b)
}

// fullLog is the host's whole log, for tests that look for lines in it
// however much was logged since.
func (h *host) fullLog() string {
	b, err := os.ReadFile(h.log)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}

// pluginProcs lists the live processes of each of the host's plugins, by
// plugin name; a plugin with none is left out.
func (h *host) pluginProcs() map[string][]int {
	procs := map[string][]int{}
	for name, path := range h.plugins {
		if pids := pluginProcs(path); len(pids) > 0 {
			procs[name] = pids
		}
	}
	return procs
}

// pluginProcs lists the live processes running the binary at path, found
// through /proc/PID/exe. Zombies have no exe link and are not listed.
func pluginProcs(path string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		if strings.TrimSuffix(exe, " (deleted)") == path {
			pids = append(pids, pid)
		}
	}
	return pids
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// authProxy is a proxy to the host that adds the bearer token to every
// request, for clients that cannot send one (the conformance suite). It
// passes the client's Host and Origin headers through unchanged, so the
// host's DNS-rebinding checks see what the client sent.
//
// It buffers each application/json exchange, relays an event stream as it
// comes, and gives the upstream call a context of its own rather than the
// client request's: net/http's server now and then cancels a keep-alive
// request's context while its client is still there, and
// httputil.ReverseProxy then cuts the response short, which the suite
// reports as "terminated" on scenarios that have nothing to do with it.
func authProxy(t *testing.T, h *host, token string) *httptest.Server {
	t.Helper()
	upstream := &http.Transport{}
	t.Cleanup(upstream.CloseIdleConnections)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the client went away
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := http.NewRequestWithContext(ctx, r.Method, h.base+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out.Header = r.Header.Clone()
		dropHopByHop(out.Header)
		out.Host = r.Host
		out.Header.Set("Authorization", "Bearer "+token)
		resp, err := upstream.RoundTrip(out)
		if err != nil {
			t.Logf("auth proxy: %s %s: %v", r.Method, r.URL, err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
			// A call's stream is relayed as it comes: a call that asks
			// its client waits on the stream for the answer.
			dropHopByHop(resp.Header)
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			rc := http.NewResponseController(w)
			buf := make([]byte, 32<<10)
			for {
				n, err := resp.Body.Read(buf)
				if n > 0 {
					if _, werr := w.Write(buf[:n]); werr != nil {
						return
					}
					_ = rc.Flush()
				}
				if err != nil {
					return
				}
			}
		}
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Logf("auth proxy: %s %s: reading the answer: %v", r.Method, r.URL, err)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		dropHopByHop(resp.Header)
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// dropHopByHop removes the headers that describe one connection, not the
// message (RFC 9110 section 7.6.1).
func dropHopByHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(name)
	}
}

// jsDir is the npm project with the JavaScript tools.
func jsDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("js")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// nodeBin is the Node 22 binary the npm project installs. Without it the
// test skips, or fails in CI.
func nodeBin(t *testing.T) string {
	t.Helper()
	node := filepath.Join(jsDir(t), "node_modules", "node", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		msg := fmt.Sprintf("%s missing: run `npm ci` in host/e2e/js", node)
		if inCI() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return node
}

// runNode runs a Node script from the npm project and returns its stdout;
// stderr goes to the test log.
func runNode(t *testing.T, ctx context.Context, args ...string) (stdout []byte, err error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, nodeBin(t), args...)
	cmd.Dir = jsDir(t)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	if errb.Len() > 0 {
		t.Logf("node %s stderr:\n%s", strings.Join(args, " "), errb.String())
	}
	return out.Bytes(), err
}
