package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// TestSearchReindex rebuilds the index of a real booking + search pair, and
// refuses to while a host holds it.
func TestSearchReindex(t *testing.T) {
	dir := t.TempDir()
	bins := map[string]string{}
	for _, name := range []string{"booking", "search"} {
		bins[name] = filepath.Join(dir, "capgate-plugin-"+name)
		cmd := exec.Command("go", "build", "-o", bins[name], "../../../plugins/"+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	file := filepath.Join(dir, "capgate.yaml")
	yaml := fmt.Sprintf(`
enabled: true
data_dir: %s
log: {format: json}
tokens: [{token: abcdefgh1, role: r}]
roles: {r: [catalogue.read]}
packs: {booking: true, search: true}
plugins:
  - {name: booking, path: %s, config: {seed: demo}}
  - {name: search, path: %s}
`, filepath.Join(dir, "data"), bins["booking"], bins["search"])
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	for range 2 { // the second run rebuilds an index that exists
		var stdout, stderr bytes.Buffer
		if code := run([]string{"search", "reindex", "-c", file}, &stdout, &stderr); code != 0 {
			t.Fatalf("reindex exit %d\n%s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), `search index of plugin "search" rebuilt`) {
			t.Errorf("stdout %q", stdout.String())
		}
		if !strings.Contains(stderr.String(), "search index ready") {
			t.Errorf("the plugin's log does not say the index is ready:\n%s", stderr.String())
		}
	}

	// A host serving this data_dir holds its event store and index:
	// reindex says so, before touching either.
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"search", "reindex", "-c", file}, &stdout, &stderr); code != 1 {
		t.Fatalf("reindex beside a running host: exit %d, want 1\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "is in use") || !strings.Contains(stderr.String(), "give this host a data_dir of its own") {
		t.Errorf("stderr does not explain the held data_dir:\n%s", stderr.String())
	}
}
