package app_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// A plugin's process gets the environment its env list names and nothing
// else of capgate's: another plugin's secret in capgate's environment never
// reaches it. Read from the running process itself (/proc/PID/environ).
func TestPluginEnvironmentThroughTheHost(t *testing.T) {
	t.Setenv("CAPGATE_TEST_SHARED", "passed-through")
	t.Setenv("CRM_API_KEY", "s3cret-of-another-plugin")
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
enabled: true
listen: 127.0.0.1:0
data_dir: %s
packs: {hello: true}
plugins:
  - name: hello
    path: %s
    env: [CAPGATE_TEST_SHARED, GREETING=hi, CAPGATE_TEST_NOT_SET]
`, t.TempDir(), helloBin)), "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	env := processEnv(t, helloBin)
	var names []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
		if strings.Contains(kv, "s3cret") {
			t.Errorf("the plugin inherited %s", name)
		}
	}
	for _, want := range []string{"CAPGATE_TEST_SHARED=passed-through", "GREETING=hi"} {
		if !slices.Contains(env, want) {
			t.Errorf("the plugin's environment lacks %s: %v", want, names)
		}
	}
	for _, name := range names {
		switch {
		case name == "CAPGATE_TEST_SHARED", name == "GREETING", name == "CAPGATE_PLUGIN", strings.HasPrefix(name, "PLUGIN_"):
		default:
			t.Errorf("the plugin's environment has %s, which its env does not list", name)
		}
	}
}

// processEnv is the environment of the one live process running bin.
func processEnv(t *testing.T, bin string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc on this system")
	}
	var found [][]string
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || exe != bin {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"))
	}
	if len(found) != 1 {
		t.Fatalf("%d processes run %s, want 1", len(found), bin)
	}
	return found[0]
}
