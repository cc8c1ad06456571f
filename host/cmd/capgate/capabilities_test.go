package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// capabilitiesConfig writes a host with the booking and subscription
// plugins whose tokens each meet a different step of the gate, and
// returns the file.
func capabilitiesConfig(t *testing.T) string {
	t.Helper()
	bins := pluginBins(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "capgate.yaml")
	yaml := fmt.Sprintf(`
enabled: true
data_dir: %s
tokens:
  - {token: cli-alice-token, label: alice, role: customer, scope: action, user_id: alice}
  - {token: cli-reader-token, label: reader, role: customer, scope: read, user_id: alice}
  - {token: cli-service-token, label: service, role: customer, scope: action}
  - {token: cli-guest-token, label: guest, role: guest, scope: read}
  - {token: cli-admin-token, label: ops, role: admin, scope: admin, user_id: ops}
roles:
  customer: [booking.read, booking.write, catalogue.read, "subscription.*", events.read]
  guest: [catalogue.read]
  admin: ["*"]
packs: {booking: true, subscription: true, events: true}
disabled_capabilities: [booking.add_resource]
risk: {capabilities: {subscription.cancel: dangerous, booking.availability: blocked}}
plugins:
  - {name: booking, path: %s, config: {seed: demo}}
  - {name: subscription, path: %s, config: {seed: demo}}
`, filepath.Join(dir, "data"), bins["booking"], bins["subscription"])
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// verdicts runs capgate capabilities -json with args and returns its
// verdicts by capability.
func verdicts(t *testing.T, args ...string) map[string]verdict {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"capabilities", "-json"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("capabilities %v: exit %d\n%s", args, code, stderr.String())
	}
	out := map[string]verdict{}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var v verdict
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out[v.Capability] = v
	}
	if len(out) == 0 {
		t.Fatalf("capabilities %v printed nothing", args)
	}
	return out
}

// gateAnswer calls capability with empty arguments through the running
// host's MCP endpoint as token: the step and reason of a gate refusal,
// or "" for any other answer.
func gateAnswer(t *testing.T, addr, token, capability string) (step, reason string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, capability)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Step   string `json:"step"`
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s as %s: %d %s", capability, token, resp.StatusCode, raw)
	}
	if out.Error != nil && out.Error.Code == -32602 && strings.Contains(string(raw), "unknown tool") {
		return unknownAnswer, ""
	}
	if out.Error == nil || out.Error.Code != -32003 {
		return "", ""
	}
	return out.Error.Data.Step, out.Error.Data.Reason
}

// serveFile serves the host file configures until the test ends.
func serveFile(t *testing.T, file string) string {
	t.Helper()
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Version: "test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// unknownAnswer stands for the gate's answer to a tool it does not know:
// what a capability whose pack is off, or that the operator disabled,
// answers a caller, while capgate capabilities tells the operator why.
const unknownAnswer = "(unknown tool)"

// hidden reports whether v is a refusal a caller hears as an unknown name.
func hidden(v verdict) bool {
	return v.Step == "pack" || v.Step == "kill_switch" && strings.Contains(v.Reason, "this capability off")
}

// argumentIndependent are the steps capgate capabilities answers for.
var argumentIndependent = []string{"kill_switch", "pack", "user_binding", "scope", "permission", "risk"}

// agree checks that every verdict is the running gate's answer to token.
func agree(t *testing.T, addr, token string, vs map[string]verdict) {
	t.Helper()
	for name, v := range vs {
		step, reason := gateAnswer(t, addr, token, name)
		switch {
		case !v.Allowed && hidden(v):
			if step != unknownAnswer {
				t.Errorf("%s as %s: capabilities says refused at %s (%s); the gate answers %q, want an unknown tool", name, token, v.Step, v.Reason, step)
			}
		case !v.Allowed && (step != v.Step || reason != v.Reason):
			t.Errorf("%s as %s: capabilities says refused at %s (%s); the gate answers %q (%s)", name, token, v.Step, v.Reason, step, reason)
		case v.Allowed && slices.Contains(argumentIndependent, step):
			t.Errorf("%s as %s: capabilities says allowed; the gate refuses at %s (%s)", name, token, step, reason)
		}
	}
}

// TestCapabilitiesIsTheGatesAnswer runs capgate capabilities over real
// plugins for tokens that each meet a different step, and checks every
// verdict against the answer a running host on the same file gives the
// same token; the kill switch thrown with capgate actions is in both.
func TestCapabilitiesIsTheGatesAnswer(t *testing.T) {
	file := capabilitiesConfig(t)
	tokens := map[string]string{"alice": "cli-alice-token", "reader": "cli-reader-token", "service": "cli-service-token", "guest": "cli-guest-token", "ops": "cli-admin-token"}
	byLabel := map[string]map[string]verdict{}
	steps := map[string]bool{}
	for label := range tokens {
		byLabel[label] = verdicts(t, "-c", file, "-token-label", label)
		for _, v := range byLabel[label] {
			steps[v.Step] = true
		}
	}
	// The tokens were chosen to reach every step, and to be allowed
	// something.
	for _, s := range append([]string{""}, argumentIndependent...) {
		if !steps[s] {
			t.Errorf("no token meets step %q: %v", s, steps)
		}
	}
	if v := byLabel["alice"]["subscription.cancel"]; !v.Allowed || v.Risk != "dangerous" || v.Kind != "action" || v.Pack != "subscription" {
		t.Errorf("subscription.cancel for alice: %+v; want allowed, dangerous (held for a human when called)", v)
	}
	// A principal described by its role, scope and user is the token
	// with them; the token's secret in CAPGATE_TOKEN is the token.
	if got := verdicts(t, "-c", file, "-role", "customer", "-scope", "action", "-user", "alice"); !equalVerdicts(got, byLabel["alice"]) {
		t.Errorf("-role customer -scope action -user alice differs from -token-label alice:\n%v\n%v", got, byLabel["alice"])
	}
	t.Setenv(tokenEnv, "cli-guest-token")
	if got := verdicts(t, "-c", file); !equalVerdicts(got, byLabel["guest"]) {
		t.Errorf("%s=guest's token differs from -token-label guest", tokenEnv)
	}
	t.Setenv(tokenEnv, "")

	addr := serveFile(t, file)
	for label, token := range tokens {
		agree(t, addr, token, byLabel[label])
	}

	// The shared kill switch, thrown beside the running host.
	var stdout, stderr bytes.Buffer
	if code := run([]string{"actions", "off", "-c", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("actions off: exit %d\n%s", code, stderr.String())
	}
	off := verdicts(t, "-c", file, "-token-label", "alice")
	if v := off["booking.create"]; v.Allowed || v.Step != "kill_switch" {
		t.Errorf("booking.create with actions off: %+v", v)
	}
	if v := off["booking.list"]; !v.Allowed {
		t.Errorf("booking.list with actions off: %+v; reads carry on", v)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if step, _ := gateAnswer(t, addr, tokens["alice"], "booking.create"); step == "kill_switch" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running host did not apply the kill switch")
		}
	}
	agree(t, addr, tokens["alice"], off)
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"capabilities", "-c", file, "-token-label", "alice"}, &stdout, &stderr); code != 0 {
		t.Fatalf("table: exit %d\n%s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "the shared kill switch is off (set by cli:") {
		t.Errorf("the table does not say the switch is off:\n%s", out)
	}
}

func equalVerdicts(a, b map[string]verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCapabilitiesTable: the default output is a header naming the
// principal, then one row a capability with its verdict.
func TestCapabilitiesTable(t *testing.T) {
	file := capabilitiesConfig(t)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capabilities", "-c", file, "-token-label", "reader"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	if !strings.HasPrefix(lines[0], `token "reader": role customer, scope read, user alice: `) || !strings.Contains(lines[0], "capabilities allowed") {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[2]); !slices.Equal(f, []string{"CAPABILITY", "KIND", "RISK", "VERDICT"}) {
		t.Errorf("column names %q", lines[2])
	}
	rows := map[string]string{}
	for _, l := range lines[3:] {
		f := strings.Fields(l)
		rows[f[0]] = strings.Join(f[1:], " ")
	}
	for name, want := range map[string]string{
		"booking.list":         "read safe allowed",
		"booking.create":       `action safe refused at scope: this is an action and the token's scope is "read"; it needs scope "action"`,
		"booking.availability": "read blocked refused at risk: this capability is blocked: no call may run it on this server",
		"approvals.get":        `read safe refused at pack: pack "approvals" is not enabled on this server`,
	} {
		if rows[name] != want {
			t.Errorf("row %s: %q, want %q", name, rows[name], want)
		}
	}
}

// TestCapabilitiesUsage: every mistake in the flags is exit 2 naming it,
// before any plugin starts; a file serve would refuse is exit 1; a
// secret from the environment is never printed.
func TestCapabilitiesUsage(t *testing.T) {
	file := capabilitiesConfig(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if err := os.WriteFile(missing, []byte("enabled: true\ndata_dir: "+filepath.Join(dir, "data")+
		"\ntokens: [{token: abcdefgh1, label: a, role: r}]\nroles: {r: []}\nplugins: [{name: booking, path: "+filepath.Join(dir, "no-such-plugin")+"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(tokenEnv, "")
	for _, tc := range []struct {
		name string
		args []string
		env  string
		code int
		want string
	}{
		{"no -c", []string{"-token-label", "alice"}, "", 2, "-c FILE is required"},
		{"no principal", []string{"-c", file}, "", 2, "say whose reach to show"},
		{"label and role", []string{"-c", file, "-token-label", "alice", "-role", "customer", "-scope", "read"}, "", 2, "not both"},
		{"role without scope", []string{"-c", file, "-role", "customer"}, "", 2, "-role and -scope go together"},
		{"scope without role", []string{"-c", file, "-scope", "read"}, "", 2, "-role and -scope go together"},
		{"user with a label", []string{"-c", file, "-token-label", "alice", "-user", "bob"}, "", 2, "not both"},
		{"user alone", []string{"-c", file, "-user", "bob"}, "", 2, "-user goes with -role and -scope"},
		{"a bad scope", []string{"-c", file, "-role", "customer", "-scope", "root"}, "", 2, `-scope "root" is not one of read, action, admin`},
		{"an unknown label", []string{"-c", file, "-token-label", "mallory"}, "", 2, `no token in ` + file + ` is labelled "mallory"; labelled: alice, reader, service, guest, ops`},
		{"an empty label", []string{"-c", file, "-token-label", ""}, "", 2, "names nothing"},
		{"an unknown role", []string{"-c", file, "-role", "root", "-scope", "admin"}, "", 2, `role "root" is not defined under roles in ` + file + `; defined: admin, customer, guest`},
		{"a long role", []string{"-c", file, "-role", strings.Repeat("r", 5000), "-scope", "read"}, "", 2, "…"},
		{"an unknown flag", []string{"-c", file, "-token", "cli-alice-token"}, "", 2, "flag provided but not defined: -token"},
		{"an argument", []string{"-c", file, "-token-label", "alice", "extra"}, "", 2, `unexpected argument "extra"`},
		{"an unknown token in the environment", []string{"-c", file}, "cli-mallory-token", 2, "the token in CAPGATE_TOKEN is none of the tokens"},
		{"a missing file", []string{"-c", filepath.Join(dir, "nope.yaml"), "-token-label", "a"}, "", 1, "nope.yaml"},
		{"a missing plugin", []string{"-c", missing, "-token-label", "a"}, "", 1, "capgate validate -c " + missing + " lists every problem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tc.env)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"capabilities"}, tc.args...), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q; want nothing", stdout.String())
			}
			if tc.env != "" && strings.Contains(stderr.String(), tc.env) {
				t.Errorf("the secret from %s was printed: %s", tokenEnv, stderr.String())
			}
			if len(stderr.String()) > 1500 {
				t.Errorf("stderr is %d bytes: the flags' values must be bounded in it", stderr.Len())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a failed run made the data directory (stat: %v)", err)
	}
}
