package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the capgate checkout this module builds against (the replace
// directive of bench/go.mod): capgate and its plugins are built from there,
// as make bench builds them.
const repoRoot = "../../.."

// The binaries the tests build, by the name the bench expects: the go
// command that builds each (the -o flag added before the package) and the
// directory it runs in.
var testBinaries = map[string]struct {
	dir  string
	args []string
	pkg  string
}{
	capgateBin:       {repoRoot, []string{"build"}, "./host/cmd/capgate"},
	helloPluginBin:   {repoRoot, []string{"build"}, "./host/internal/app/testdata/plugins/hello"},
	bookingPluginBin: {repoRoot, []string{"build"}, "./plugins/booking"},
	searchPluginBin:  {repoRoot, []string{"build"}, "./plugins/search"},
	// The synthetic plugin is this module's own.
	syntheticPluginBin: {"../..", []string{"build"}, "./plugins/synthetic"},
	searchFloorBin:     {repoRoot, []string{"test", "-c"}, "./plugins/search/internal/index"},
}

// built holds the binaries built so far, in one directory per test run.
var built struct {
	sync.Mutex
	dir  string
	done map[string]error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildBinaries builds the named binaries (once per test run) and returns
// the directory holding them.
func buildBinaries(t *testing.T, names ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds capgate binaries")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go tool not on PATH")
	}
	built.Lock()
	defer built.Unlock()
	if built.dir == "" {
		if built.dir, err = os.MkdirTemp("", "capgate-bench-test-"); err != nil {
			t.Fatal(err)
		}
		built.done = map[string]error{}
	}
	for _, name := range names {
		err, ok := built.done[name]
		if !ok {
			b, known := testBinaries[name]
			if !known {
				t.Fatalf("no recipe for %s", name)
			}
			args := append(slices.Clone(b.args), "-o", filepath.Join(built.dir, name), b.pkg)
			cmd := exec.Command(gobin, args...)
			cmd.Dir = b.dir
			if out, berr := cmd.CombinedOutput(); berr != nil {
				err = fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), b.dir, berr, out)
			}
			built.done[name] = err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return built.dir
}

// validate checks cfg with "capgate validate", the host's own check of a
// configuration file (unknown keys and wrong values are problems), which
// starts each plugin to have it check its own config block: a plugin path
// naming a missing file gets the real plugin of that name, built here.
// It returns the YAML that was checked.
func validate(t *testing.T, cfg capgateConfig) []byte {
	t.Helper()
	bin := buildBinaries(t, capgateBin)
	for _, p := range cfg.Plugins {
		if _, err := os.Stat(p.Path); os.IsNotExist(err) {
			name := filepath.Base(p.Path)
			dir := buildBinaries(t, name)
			if err := os.Symlink(filepath.Join(dir, name), p.Path); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, capgateBin), "validate", "-c", path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("capgate rejects the config: %v\n%s\n%s", err, stderr.String(), raw)
	}
	if !strings.Contains(stdout.String(), ": ok (") {
		t.Fatalf("capgate validate: %s%s", stdout.String(), stderr.String())
	}
	return raw
}
