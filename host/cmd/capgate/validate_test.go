package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/capgate/capgate/host/internal/auth/authtest"
	"github.com/capgate/capgate/sdk/pgtest"
)

var (
	validateBinsOnce sync.Once
	validateBins     map[string]string
	validateBinsErr  error
)

// pluginBins builds the bundled plugins, and one that configures itself
// with its own OnConfigure, once for the validate tests.
func pluginBins(t *testing.T) map[string]string {
	t.Helper()
	validateBinsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "capgate-validate-bins-*")
		if err != nil {
			validateBinsErr = err
			return
		}
		validateBins = map[string]string{}
		for name, src := range map[string]string{
			"booking": "../../../plugins/booking", "search": "../../../plugins/search",
			"subscription": "../../../plugins/subscription", "llm": "../../../plugins/llm",
			"publisher": "../../internal/pluginhost/testdata/plugins/publisher",
		} {
			validateBins[name] = filepath.Join(dir, "capgate-plugin-"+name)
			if out, err := exec.Command("go", "build", "-o", validateBins[name], src).CombinedOutput(); err != nil {
				validateBinsErr = fmt.Errorf("build %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if validateBinsErr != nil {
		t.Fatal(validateBinsErr)
	}
	return validateBins
}

const llmOK = `{connection: local, connections: [{slug: local, kind: openai, base_url: "http://127.0.0.1:1/v1", model: m}]}`

// TestValidate runs capgate validate over real plugin binaries: each kind
// of problem is named by its key path, several come back from one run, a
// good file is ok, and no run leaves a plugin process or writes to the
// data_dir.
func TestValidate(t *testing.T) {
	bins := pluginBins(t)
	issuer := authtest.Start(t, authtest.Options{}).Issuer
	for _, tc := range []struct {
		name    string
		roles   string
		packs   string
		plugins []string
		extra   string
		code    int
		want    []string // lines expected on stderr (stdout when code is 0)
		notWant []string
	}{
		{
			name:  "a good file",
			roles: `{customer: [booking.read, booking.write, "subscription.*", catalogue.read], ops: ["*"], asker: [llm.ask, events.read]}`,
			packs: `{booking: true, search: true, subscription: true, llm: true, events: true}`,
			plugins: []string{
				`{name: booking, path: BIN_booking, config: {seed: demo}}`,
				`{name: search, path: BIN_search}`,
				`{name: subscription, path: BIN_subscription, config: {seed: demo}}`,
				`{name: llm, path: BIN_llm, config: ` + llmOK + `}`,
			},
			want: []string{"ok (1 token, 4 plugins)"},
		},
		{
			name:    "a config key the plugin does not know",
			plugins: []string{`{name: booking, path: BIN_booking, config: {sed: demo}}`},
			code:    1,
			want:    []string{`plugins[0].config: plugin "booking" refuses it: booking config: json: unknown field "sed"`, "1 problem"},
		},
		{
			name: "values the plugins check without opening anything",
			plugins: []string{
				`{name: booking, path: BIN_booking, config: {seed: lots}}`,
				`{name: subscription, path: BIN_subscription, config: {dsn: "mysql://db/x"}}`,
				`{name: search, path: BIN_search, config: {query_timeout: soon}}`,
			},
			code: 1,
			want: []string{
				`plugins[0].config: plugin "booking" refuses it: booking config: seed "lots" is unknown; use "demo" or leave it out`,
				`plugins[1].config: plugin "subscription" refuses it: subscription config: dsn must be a postgres:// or postgresql:// URL`,
				`plugins[2].config: plugin "search" refuses it: search config: query_timeout: "soon" is not a positive Go duration`,
				"3 problems",
			},
		},
		{
			name:    "an llm connection naming no connection",
			plugins: []string{`{name: llm, path: BIN_llm, config: {connection: remote, connections: [{slug: local, kind: openai, base_url: "http://127.0.0.1:1/v1", model: m}]}}`},
			code:    1,
			want:    []string{`plugins[0].config: plugin "llm" refuses it: llm config: connection: "remote" is the slug of none of connections; their slugs are: local`},
		},
		{
			name:    "a permission no capability declares",
			roles:   `{customer: [booking.read, bookng.write]}`,
			plugins: []string{`{name: booking, path: BIN_booking}`},
			code:    1,
			want:    []string{`roles.customer[1]: permission "bookng.write" is declared by no capability (did you mean "booking.write"?)`},
		},
		{
			name:    "a wildcard matching no permission",
			roles:   `{customer: ["bokking.*", "booking.*", "*"]}`,
			plugins: []string{`{name: booking, path: BIN_booking}`},
			code:    1,
			want:    []string{`roles.customer[0]: "bokking.*" matches no permission a capability declares (did you mean "booking.*"?)`, "1 problem"},
		},
		{
			name:    "an enabled pack no plugin provides",
			packs:   `{booking: true, subscription: true}`,
			plugins: []string{`{name: booking, path: BIN_booking}`},
			code:    1,
			want:    []string{`packs.subscription: pack "subscription" is enabled but no plugin provides it`, "1 problem"},
		},
		{
			name:    "a disabled capability no plugin provides",
			plugins: []string{`{name: booking, path: BIN_booking}`},
			extra:   "disabled_capabilities: [booking.gett]\n",
			code:    1,
			want:    []string{`disabled_capabilities[0]: no plugin provides capability "booking.gett"`},
		},
		{
			name:    "risk levels for a capability and a pack no plugin provides",
			plugins: []string{`{name: booking, path: BIN_booking}`},
			extra:   "risk:\n  capabilities: {booking.cancel: dangerous, booking.cancell: dangerous}\n  packs: {booking: review_required, bookings: blocked}\n",
			code:    1,
			want: []string{`risk.capabilities["booking.cancell"]: no plugin provides capability "booking.cancell"`,
				`risk.packs.bookings: no plugin provides a capability in pack "bookings"`, "2 problems"},
		},
		{
			name:    "two plugins declaring one capability",
			plugins: []string{`{name: booking, path: BIN_booking}`, `{name: booking2, path: BIN_booking}`},
			code:    1,
			want:    []string{`plugins[1]: plugin "booking2" declares an invalid capability: capability "booking.add_resource": already provided by plugin "booking"`},
		},
		{
			name:    "a binary that is no capgate plugin",
			plugins: []string{`{name: truth, path: /bin/true}`},
			code:    1,
			want: []string{`plugins[0]: plugin "truth": start`,
				"roles, packs and disabled_capabilities are not checked against the plugins' capabilities, as plugins[0] could not describe what it provides"},
		},
		{
			name:  "a missing binary is reported and the others are still checked",
			roles: `{customer: [bookng.write]}`,
			plugins: []string{
				`{name: gone, path: /nonexistent/capgate-plugin-gone}`,
				`{name: booking, path: BIN_booking, config: {sed: demo}}`,
			},
			code: 1,
			want: []string{"plugins[0].path: stat /nonexistent/capgate-plugin-gone: no such file or directory",
				`plugins[1].config: plugin "booking" refuses it`,
				"as plugins[0] could not describe what it provides", "2 problems"},
			notWant: []string{"bookng.write"},
		},
		{
			name:    "a plugin that cannot check its config without configuring itself",
			roles:   `{customer: ["*"]}`,
			packs:   `{booking: false}`,
			plugins: []string{`{name: publisher, path: BIN_publisher, config: {events: [{type: x}]}}`},
			want: []string{`warning: plugins[0].config: plugin "publisher" cannot check its config block without configuring itself`,
				"ok (1 token, 1 plugin)"},
		},
		{
			name:    "an OAuth issuer whose keys are fetched",
			plugins: []string{`{name: booking, path: BIN_booking}`},
			extra:   "auth: {oauth: {issuer: \"" + issuer + "\"}}\n",
			want:    []string{"ok (1 token, 1 plugin)"},
			notWant: []string{"auth.oauth"},
		},
		{
			name:    "an OAuth issuer out of reach",
			plugins: []string{`{name: booking, path: BIN_booking}`},
			extra:   "auth: {oauth: {issuer: \"http://127.0.0.1:1\"}}\n",
			want: []string{"warning: auth.oauth: the issuer's keys could not be fetched from here",
				"serve starts all the same and answers access tokens 503 until it can fetch them", "ok (1 token, 1 plugin)"},
		},
		{
			name:    "an OAuth issuer over plain http",
			plugins: []string{`{name: booking, path: BIN_booking}`},
			extra:   "auth: {oauth: {issuer: \"http://auth.example.com\", scopes: {read: \"a b\"}}}\n",
			code:    1,
			want: []string{`auth.oauth.issuer: must be https: plain http is accepted for a loopback host only`,
				`auth.oauth.scopes.read: must be an OAuth scope`},
		},
		{
			name:  "every problem in one run",
			roles: `{customer: [booking.read, bookng.write]}`,
			packs: `{booking: true, subscription: true}`,
			plugins: []string{
				`{name: booking, path: BIN_booking, config: {seed: demo, sed: demo}}`,
				`{name: search, path: BIN_search, config: {query_timeout: 2s}}`,
				`{name: llm, path: BIN_llm, config: {connection: nope, connections: [{slug: local, kind: openai, base_url: "http://127.0.0.1:1/v1", model: m}]}}`,
			},
			code: 1,
			want: []string{
				`plugins[0].config: plugin "booking" refuses it: booking config: json: unknown field "sed"`,
				`plugins[2].config: plugin "llm" refuses it: llm config: connection: "nope" is the slug of none`,
				`roles.customer[1]: permission "bookng.write" is declared by no capability (did you mean "booking.write"?)`,
				`packs.subscription: pack "subscription" is enabled but no plugin provides it`,
				"4 problems",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp := filepath.Join(dir, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Setenv("TMPDIR", tmp) // where validate's throwaway data directory goes
			dataDir := filepath.Join(dir, "data")
			roles, packs := tc.roles, tc.packs
			if roles == "" {
				roles = `{customer: [booking.read]}`
			}
			if packs == "" {
				packs = `{booking: true}`
			}
			plugins := strings.Join(tc.plugins, "\n  - ")
			for name, bin := range bins {
				plugins = strings.ReplaceAll(plugins, "BIN_"+name, bin)
			}
			file := filepath.Join(dir, "capgate.yaml")
			yaml := fmt.Sprintf("enabled: true\ndata_dir: %s\ntokens: [{token: abcdefgh1, role: customer}]\nroles: %s\npacks: %s\n%splugins:\n  - %s\n",
				dataDir, roles, packs, tc.extra, plugins)
			if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", "-c", file}, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("validate touched the data_dir %s: %v", dataDir, err)
			}
			if left, _ := os.ReadDir(tmp); len(left) > 0 {
				t.Errorf("validate left %d entries in the temporary directory", len(left))
			}
			if pids := running(t, bins); len(pids) > 0 {
				t.Errorf("plugin processes left running: %v", pids)
			}
		})
	}
}

// A PostgreSQL dsn in a plugin's config is not connected to: validate
// creates no table there, where serve would migrate.
func TestValidateOpensNoPluginDatabase(t *testing.T) {
	bins := pluginBins(t)
	dsn := pgtest.SchemaDSN(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "capgate.yaml")
	yaml := fmt.Sprintf("enabled: true\ndata_dir: %s\ntokens: [{token: abcdefgh1, role: customer}]\nroles: {customer: [booking.read]}\npacks: {booking: true}\nplugins:\n  - {name: booking, path: %s, config: {seed: demo, dsn: %q}}\n",
		filepath.Join(dir, "data"), bins["booking"], dsn)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "-c", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("validate created %d tables in the plugin's database", tables)
	}
}

// running lists the processes running one of bins.
func running(t *testing.T, bins map[string]string) []string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	want := map[string]bool{}
	for _, b := range bins {
		want[b] = true
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && want[strings.TrimSuffix(exe, " (deleted)")] {
			pids = append(pids, e.Name())
		}
	}
	return pids
}
