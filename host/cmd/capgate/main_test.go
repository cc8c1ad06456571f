package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("enabled: true\ndata_dir: "+filepath.Join(dir, "data")+"\ntokens: [{token: abcdefgh1, role: r}]\nroles: {r: []}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("enabled: true\nmax_results: ten\nlisten: nowhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missingEnv := filepath.Join(dir, "env.yaml")
	if err := os.WriteFile(missingEnv, []byte("plugins: [{name: p, path: /bin/true, env: [CAPGATE_TEST_SURELY_UNSET]}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileOff := filepath.Join(dir, "off.yaml")
	if err := os.WriteFile(fileOff, []byte("data_dir: "+filepath.Join(dir, "data")+"\nactions_enabled: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		out, err   string
		notInError string
	}{
		{name: "no command", args: nil, code: 2, err: "Usage:"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, err: `unknown command "frobnicate"`},
		{name: "help", args: []string{"help"}, code: 0, out: "capgate serve -c FILE"},
		{name: "version", args: []string{"version"}, code: 0, out: "capgate dev"},
		{name: "validate ok", args: []string{"validate", "-c", good}, code: 0, out: "ok (1 token, 0 plugins)"},
		// /bin/true is no plugin, which validate reports too.
		{name: "validate warns of a missing env variable", args: []string{"validate", "-c", missingEnv}, code: 1,
			err: `warning: plugins[0].env: CAPGATE_TEST_SURELY_UNSET is not set here, so plugin "p" would start without it`},
		{name: "validate lists every problem", args: []string{"validate", "-c", bad}, code: 1, err: "max_results: must be an integer"},
		{name: "validate names the listen key", args: []string{"validate", "-c", bad}, code: 1, err: "listen:"},
		{name: "validate missing file", args: []string{"validate", "-c", filepath.Join(dir, "nope.yaml")}, code: 1, err: "nope.yaml"},
		{name: "validate without -c", args: []string{"validate"}, code: 2, err: "usage: capgate validate -c FILE"},
		{name: "serve without -c", args: []string{"serve"}, code: 2, err: "usage: capgate serve -c FILE"},
		{name: "serve with a bad file", args: []string{"serve", "-c", bad}, code: 1, err: "max_results"},
		{name: "token without new", args: []string{"token"}, code: 2, err: "usage: capgate token new"},
		{name: "search without reindex", args: []string{"search"}, code: 2, err: "usage: capgate search reindex -c FILE"},
		{name: "search reindex without -c", args: []string{"search", "reindex"}, code: 2, err: "usage: capgate search reindex -c FILE"},
		{name: "search reindex with a bad file", args: []string{"search", "reindex", "-c", bad}, code: 1, err: "max_results"},
		// The kill switch, in good.yaml's data_dir, in order.
		{name: "actions without a verb", args: []string{"actions"}, code: 2, err: "usage: capgate actions off|on|status -c FILE"},
		{name: "actions with an unknown verb", args: []string{"actions", "pause", "-c", good}, code: 2, err: "usage: capgate actions off|on|status"},
		{name: "actions without -c", args: []string{"actions", "off"}, code: 2, err: "usage: capgate actions off -c FILE"},
		{name: "actions with a bad file", args: []string{"actions", "off", "-c", bad}, code: 1, err: "max_results"},
		{name: "actions status, never set", args: []string{"actions", "status", "-c", good}, code: 0, out: "actions are on"},
		{name: "actions off", args: []string{"actions", "off", "-c", good}, code: 0, out: "actions are off on every replica using this database (set by cli:"},
		{name: "actions status, off", args: []string{"actions", "status", "-c", good}, code: 0, out: "actions are off"},
		{name: "actions on", args: []string{"actions", "on", "-c", good}, code: 0, out: "actions are on\nrunning hosts apply the change within 1s"},
		{name: "actions on, but off in the file", args: []string{"actions", "status", "-c", fileOff}, code: 0, out: "sets actions_enabled: false"},
		{name: "search reindex without a search plugin", args: []string{"search", "reindex", "-c", good}, code: 1,
			err: "provides platform.search: add the search plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.out)
			}
			if !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.err)
			}
		})
	}
}

func TestTokenNew(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"token", "new"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^token: (cg_\S+)$[\s\S]*token_sha256: ([0-9a-f]{64})$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("output not understood:\n%s", stdout.String())
	}
	sum := sha256.Sum256([]byte(m[1]))
	if hex.EncodeToString(sum[:]) != m[2] {
		t.Errorf("token_sha256 %s is not the SHA-256 of the printed token", m[2])
	}
	var again bytes.Buffer
	run([]string{"token", "new"}, &again, &stderr)
	if again.String() == stdout.String() {
		t.Error("two runs printed the same token")
	}
}

// A port already taken stops serve before anything else runs: no plugin
// starts, no data directory is made, and the message says what to do.
func TestServeOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	file := filepath.Join(dir, "capgate.yaml")
	// The plugin does not exist: reaching it would fail differently.
	yaml := "enabled: true\nlisten: " + ln.Addr().String() + "\ndata_dir: " + data +
		"\nplugins: [{name: booking, path: " + filepath.Join(dir, "no-such-plugin") + "}]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "-c", file}, &stdout, &stderr); code != 1 {
		t.Fatalf("serve on a taken port: exit %d\n%s", code, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "listen "+ln.Addr().String()) || !strings.Contains(msg, "address already in use") ||
		!strings.Contains(msg, "set listen or CAPGATE_LISTEN") || strings.Contains(msg, "no-such-plugin") {
		t.Errorf("stderr does not explain the taken port first:\n%s", msg)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the data directory was made before the port was checked (stat: %v)", err)
	}
}
