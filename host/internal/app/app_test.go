package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

var helloBin, leakyBin, relayBin, bookingBin, searchBin, subscriptionBin, llmBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capgate-app-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, b := range []struct {
		bin *string
		src string
	}{
		{&helloBin, "./testdata/plugins/hello"},
		{&leakyBin, "../pluginhost/testdata/plugins/leaky"},
		{&relayBin, "../pluginhost/testdata/plugins/relay"},
		{&bookingBin, "../../../plugins/booking"},
		{&searchBin, "../../../plugins/search"},
		{&subscriptionBin, "../../../plugins/subscription"},
		{&llmBin, "../../../plugins/llm"},
	} {
		*b.bin = filepath.Join(dir, "capgate-plugin-"+filepath.Base(b.src))
		cmd := exec.Command("go", "build", "-o", *b.bin, b.src)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n", b.src, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func load(t *testing.T, packs string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read}]
roles: {r: [hello.greet]}
packs: {%s}
plugins: [{name: hello, path: %s}]
`, t.TempDir(), packs, helloBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func quiet() app.Options {
	return app.Options{Version: "test", Logger: slog.New(slog.DiscardHandler)}
}

func TestServeAndStop(t *testing.T) {
	a, err := app.New(context.Background(), load(t, "hello: true"), quiet())
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

	req, _ := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/api/v1/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello.greet","arguments":{"name":"app"}}}`))
	req.Header.Set("Authorization", "Bearer test-token-1")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `hello, app`) {
		t.Fatalf("tools/call through the assembled host = %d %s", resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if n := running(t); n != 0 {
		t.Errorf("%d hello plugin process(es) still running after Serve returned", n)
	}
}

func TestNewFailsWholeAndLeavesNothing(t *testing.T) {
	// The plugin starts, then declares a capability in pack "hello", which
	// this configuration does not know: New must fail and stop the plugin.
	cfg := load(t, "booking: true")
	delete(cfg.Packs, "hello")
	_, err := app.New(context.Background(), cfg, quiet())
	if err == nil || !strings.Contains(err.Error(), `plugins[0]: plugin "hello" declares an invalid capability`) {
		t.Fatalf("err = %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for running(t) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a failed start left the plugin running")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNewRefusesBlockedEntityTypes: a plugin that declares an entity type
// carrying personal or financial data stops start-up before anything
// serves, with the plugin and the type named, and is not left running.
func TestNewRefusesBlockedEntityTypes(t *testing.T) {
	for _, tc := range []struct {
		name, search, want string
	}{
		{"always blocked", "",
			`plugins[1]: plugin "leaky" declares entity type "shop.invoice": entity type carries personal or financial data and may not be provided ("invoice" is always blocked)`},
		{"blocked by config", "search: {blocked_entities: [product]}",
			`plugins[1]: plugin "leaky" declares entity type "shop.product": entity type carries personal or financial data and may not be provided ("product" is blocked by search.blocked_entities)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
tokens: [{token: test-token-1, role: r, scope: read}]
roles: {r: [hello.greet]}
packs: {hello: true}
%s
plugins: [{name: hello, path: %s}, {name: leaky, path: %s}]
`, t.TempDir(), tc.search, helloBin, leakyBin)), "")
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(context.Background(), cfg, quiet())
			if err == nil || err.Error() != tc.want {
				t.Fatalf("app.New = %v, %v\nwant error %s", a, err, tc.want)
			}
			deadline := time.Now().Add(10 * time.Second)
			for running(t) != 0 || runningBin(t, leakyBin) != 0 {
				if time.Now().After(deadline) {
					t.Fatal("a refused start left a plugin running")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// running counts live processes of this test's hello plugin binary.
func running(t *testing.T) int {
	t.Helper()
	return runningBin(t, helloBin)
}

// runningBin counts live processes of the binary at bin.
func runningBin(t *testing.T, bin string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc on this system")
	}
	n := 0
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || exe != bin {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			n++
		}
	}
	return n
}
