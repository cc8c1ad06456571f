package pluginhost_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

var bins string // directory with the built test plugins

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capgate-pluginhost-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	for _, name := range []string{"notes", "crash", "leaky", "publisher", "probe"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./testdata/plugins/"+name)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build test plugin %s: %v\n", name, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer is a slog handler's destination safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startHost(t *testing.T, specs ...pluginhost.Spec) (*pluginhost.Host, *logBuffer, error) {
	t.Helper()
	logs := &logBuffer{}
	h, err := pluginhost.Start(context.Background(), specs, pluginhost.Options{
		DataDir:      t.TempDir(),
		HostVersion:  "test",
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		StartTimeout: 20 * time.Second,
	})
	if h != nil {
		t.Cleanup(h.Stop)
	}
	return h, logs, err
}

func notes(name string, config string) pluginhost.Spec {
	return pluginhost.Spec{Name: name, Path: filepath.Join(bins, "notes"), Config: json.RawMessage(config), ConfigPath: "plugins[0]"}
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil {
		return false
	}
	// A zombie is dead for our purposes; it only waits to be reaped.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

func waitDead(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin process %d is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStartRegisterInvoke(t *testing.T) {
	h, logs, err := startHost(t, notes("notes", `{"hello":"hi there"}`))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New([]string{"notes"})
	if err := h.Register(reg); err != nil {
		t.Fatal(err)
	}
	e, ok := reg.Lookup("notes.get")
	if !ok || e.Plugin != "notes" || !e.OwnerGuarded || e.Kind != registry.Read || e.Permission != "notes.read" {
		t.Fatalf("registered capability = %+v", e)
	}
	d := h.Plugins()[0].Description()
	if d.Name != "notes" || d.Version != "1.2.3" {
		t.Errorf("description = %v", d)
	}

	prov := h.Providers()["notes"]
	ctx := context.Background()
	res, err := prov.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead, UserID: "alice"}, Capability: "notes.get", Args: json.RawMessage(`{"id":"n1"}`)})
	if err != nil || string(res) != `{"id":"n1","text":"note n1","by":"alice"}` {
		t.Errorf("invoke = %s, %v", res, err)
	}
	_, err = prov.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.get", Args: json.RawMessage(`{"id":"zz"}`)})
	var te *dispatch.ToolError
	if !errors.As(err, &te) || te.Code != dispatch.NotFound || te.Message != `no note "zz"` {
		t.Errorf("invoke missing = %v", err)
	}
	// The ownership step travels with the call: the plugin refuses a
	// caller who does not own the target, and answers its owner.
	checked := func(user, id string) (json.RawMessage, error) {
		return prov.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead, UserID: user},
			Capability: "notes.get", Args: json.RawMessage(`{"id":"` + id + `"}`), CheckOwner: true})
	}
	var refusal *dispatch.Refusal
	if _, err := checked("alice", "n2"); !errors.As(err, &refusal) || refusal.Step != dispatch.StepOwnership || refusal.Capability != "notes.get" {
		t.Errorf("alice reading bob's n2 = %v, want an ownership refusal", err)
	}
	if res, err := checked("bob", "n2"); err != nil || !strings.Contains(string(res), `"id":"n2"`) {
		t.Errorf("bob reading his n2 = %s, %v", res, err)
	}
	if _, err := checked("bob", "zz"); !errors.As(err, &te) || te.Code != dispatch.NotFound {
		t.Errorf("owner of missing = %v", err)
	}

	// The plugin's own log record reaches the host's logger, structured.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `"greeting":"hi there"`) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin log not forwarded; host log:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), `"msg":"hello from plugin"`) {
		t.Errorf("plugin log message not kept as the record's message:\n%s", logs)
	}
}

func TestStartFailures(t *testing.T) {
	bin := filepath.Join(bins, "notes")
	sum, err := fileSHA256(bin)
	if err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(notExec, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec pluginhost.Spec
		want string
	}{
		{"missing binary", pluginhost.Spec{Name: "gone", Path: "/nonexistent/capgate-plugin-x"}, "does not exist"},
		{"directory", pluginhost.Spec{Name: "dir", Path: t.TempDir()}, "is a directory"},
		{"not executable", pluginhost.Spec{Name: "plain", Path: notExec}, "is not executable"},
		{"crash at start", pluginhost.Spec{Name: "crash", Path: filepath.Join(bins, "crash")}, "exited before the handshake"},
		{"checksum mismatch", pluginhost.Spec{Name: "notes", Path: bin, SHA256: strings.Repeat("ab", 32)}, "does not match the configured sha256"},
		{"bad checksum", pluginhost.Spec{Name: "notes", Path: bin, SHA256: "xyz"}, "not a hex SHA-256"},
		{"configure fails", pluginhost.Spec{Name: "notes", Path: bin, Config: json.RawMessage(`{"fail_configure":"database is unreachable"}`)}, "configure: database is unreachable"},
		{"unknown config key", pluginhost.Spec{Name: "notes", Path: bin, Config: json.RawMessage(`{"hellow":"x"}`)}, `unknown field "hellow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.ConfigPath = "plugins[3]"
			_, _, err := startHost(t, tc.spec)
			if err == nil {
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `plugins[3]: plugin "`+tc.spec.Name+`"`) {
				t.Errorf("error = %q, want it to name the config path, the plugin and %q", err, tc.want)
			}
		})
	}
	t.Run("checksum match", func(t *testing.T) {
		spec := notes("notes", "")
		spec.SHA256 = sum
		if _, _, err := startHost(t, spec); err != nil {
			t.Fatal(err)
		}
	})
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

func TestRegisterRejectsInvalidCapabilities(t *testing.T) {
	h, _, err := startHost(t, notes("first", ""), notes("second", ""))
	if err != nil {
		t.Fatal(err)
	}
	err = h.Register(registry.New([]string{"notes"}))
	if err == nil || !strings.Contains(err.Error(), `plugin "second" declares an invalid capability`) || !strings.Contains(err.Error(), `already provided by plugin "first"`) {
		t.Errorf("duplicate: %v", err)
	}
	err = h.Register(registry.New([]string{"booking"}))
	if err == nil || !strings.Contains(err.Error(), `unknown pack "notes"`) {
		t.Errorf("unknown pack: %v", err)
	}
}

func TestRegisterEntities(t *testing.T) {
	h, _, err := startHost(t, notes("notes", ""))
	if err != nil {
		t.Fatal(err)
	}
	c := catalogue.New(nil)
	if err := h.RegisterEntities(c); err != nil {
		t.Fatal(err)
	}
	if p, ok := c.Provider("notes.note"); !ok || p != "notes" {
		t.Errorf("Provider(notes.note) = %q, %v", p, ok)
	}
	if got := c.Entities(); len(got) != 1 || got[0] != "notes.note" {
		t.Errorf("Entities() = %v", got)
	}
}

func TestRegisterEntitiesRefuses(t *testing.T) {
	leaky := pluginhost.Spec{Name: "leaky", Path: filepath.Join(bins, "leaky"), ConfigPath: "plugins[1]"}
	h, _, err := startHost(t, notes("notes", ""), leaky)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		blocked []string
		is      error
		want    string
	}{
		{"always blocked", nil, catalogue.ErrBlocked,
			`plugins[1]: plugin "leaky" declares entity type "shop.invoice": entity type carries personal or financial data and may not be provided ("invoice" is always blocked)`},
		{"blocked by config", []string{"product"}, catalogue.ErrBlocked,
			`plugins[1]: plugin "leaky" declares entity type "shop.product": entity type carries personal or financial data and may not be provided ("product" is blocked by search.blocked_entities)`},
		{"blocked by config, first plugin", []string{"notes.note"}, catalogue.ErrBlocked,
			`plugins[0]: plugin "notes" declares entity type "notes.note"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := catalogue.New(tc.blocked)
			err := h.RegisterEntities(c)
			if !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("RegisterEntities = %v\nwant %s", err, tc.want)
			}
			for _, e := range c.Entities() {
				if e == "shop.invoice" {
					t.Error("shop.invoice was registered")
				}
			}
		})
	}

	// Two plugins providing one type: the error names both.
	h2, _, err := startHost(t, notes("first", ""), notes("second", ""))
	if err != nil {
		t.Fatal(err)
	}
	err = h2.RegisterEntities(catalogue.New(nil))
	if !errors.Is(err, catalogue.ErrDuplicate) || !strings.Contains(err.Error(), `plugin "second" declares entity type "notes.note": entity type already provided by plugin "first"`) {
		t.Errorf("duplicate: %v", err)
	}
}

func TestRegisterEntitiesWithoutConfigPath(t *testing.T) {
	h, _, err := startHost(t, pluginhost.Spec{Name: "leaky", Path: filepath.Join(bins, "leaky")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.RegisterEntities(catalogue.New(nil)); err == nil || !strings.HasPrefix(err.Error(), `plugins: plugin "leaky" declares entity type "shop.invoice"`) {
		t.Errorf("RegisterEntities = %v", err)
	}
}

func TestStopLeavesNoProcess(t *testing.T) {
	h, _, err := startHost(t, notes("a", ""), notes("b", ""))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range h.Plugins() {
		if !alive(p.PID()) {
			t.Fatalf("plugin %s not running (pid %d)", p.Name(), p.PID())
		}
		pids = append(pids, p.PID())
	}
	h.Stop()
	h.Stop() // idempotent
	for _, pid := range pids {
		waitDead(t, pid)
	}
}

func TestFailedStartStopsEarlierPlugins(t *testing.T) {
	// The first plugin starts, the second crashes: the host must not leave
	// the first running.
	before := pluginPIDs(t)
	_, _, err := startHost(t, notes("ok", ""), pluginhost.Spec{Name: "crash", Path: filepath.Join(bins, "crash")})
	if err == nil {
		t.Fatal("started")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		extra := 0
		for pid := range pluginPIDs(t) {
			if !before[pid] {
				extra++
			}
		}
		if extra == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d test plugin process(es) left running after a failed start", extra)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pluginPIDs returns the live processes running the notes test binary.
func pluginPIDs(t *testing.T) map[int]bool {
	t.Helper()
	want := filepath.Join(bins, "notes")
	out := map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc on this system")
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == want && alive(pid) {
			out[pid] = true
		}
	}
	return out
}

func TestCrashedPluginFailsCallsCleanly(t *testing.T) {
	h, _, err := startHost(t, notes("notes", ""))
	if err != nil {
		t.Fatal(err)
	}
	p := h.Plugins()[0]
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDead(t, p.PID())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = h.Providers()["notes"].Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.get", Args: json.RawMessage(`{"id":"n1"}`)})
	if err == nil || !strings.Contains(err.Error(), `plugin "notes"`) {
		t.Errorf("invoke on a dead plugin = %v, want an error naming the plugin", err)
	}
	// Either the restart is under way (unavailable: nothing ran) or the
	// call met the dying process (an internal failure); never a result.
	var te *dispatch.ToolError
	if errors.As(err, &te) && te.Code != dispatch.Unavailable {
		t.Errorf("a dead plugin must not look like a tool result: %v", err)
	}
}

// BenchmarkInvoke measures one call over the plugin link (host gRPC client,
// local socket, plugin gRPC server, SDK decode and encode), with parallel
// callers as under HTTP load: the cost every capability call pays on top of
// the host's own work.
func BenchmarkInvoke(b *testing.B) {
	h, err := pluginhost.Start(context.Background(), []pluginhost.Spec{notes("notes", "")}, pluginhost.Options{
		DataDir: b.TempDir(), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop()
	prov := h.Providers()["notes"]
	pr := dispatch.Principal{Role: "r", Scope: dispatch.ScopeRead, UserID: "alice"}
	args := json.RawMessage(`{"id":"n1"}`)
	b.ReportAllocs()
	b.SetParallelism(32) // many calls in flight, as with 64 HTTP connections
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := prov.Invoke(context.Background(), dispatch.Request{Principal: pr, Capability: "notes.get", Args: args}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestConcurrentCallsGetTheirOwnAnswers(t *testing.T) {
	h, _, err := startHost(t, notes("notes", ""))
	if err != nil {
		t.Fatal(err)
	}
	prov := h.Providers()["notes"]
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("user%d", i)
			id := []string{"n1", "n2"}[i%2]
			res, err := prov.Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{UserID: user}, Capability: "notes.get", Args: json.RawMessage(`{"id":"` + id + `"}`)})
			if err != nil {
				errs <- err
				return
			}
			want := `{"id":"` + id + `","text":"note ` + id + `","by":"` + user + `"}`
			if string(res) != want {
				errs <- fmt.Errorf("call %d got %s, want %s", i, res, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAbandonedCallIsCancelledInPlugin(t *testing.T) {
	// A deadline travels with the call; a cancellation follows it as a
	// message of its own. Either way the plugin stops waiting.
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, logs, err := startHost(t, notes("notes", ""))
			if err != nil {
				t.Fatal(err)
			}
			prov := h.Providers()["notes"]
			ctx, cancel := tc.ctx()
			defer cancel()
			_, err = prov.Invoke(ctx, dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.wait", Args: json.RawMessage(`{"id":"slow"}`)})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !strings.Contains(logs.String(), `"msg":"wait ended"`) {
				if time.Now().After(deadline) {
					t.Fatalf("the plugin never saw the call end; host log:\n%s", logs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// The link still serves calls afterwards.
			if _, err := prov.Invoke(context.Background(), dispatch.Request{Principal: dispatch.Principal{}, Capability: "notes.get", Args: json.RawMessage(`{"id":"n1"}`)}); err != nil {
				t.Errorf("call after an abandoned one: %v", err)
			}
		})
	}
}
