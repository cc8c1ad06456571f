package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeBridge is the JSON-RPC code of a message `capgate stdio` could not
// forward (stdio.CodeBridge).
const codeBridge = -31000

// lockedBuffer collects a process's stderr while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stdioCommand is `capgate stdio` for url with token in its environment,
// and nothing of the test's own CAPGATE_* variables.
func stdioCommand(t *testing.T, url, token string, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(binaries(t).host, append([]string{"stdio", "-url", url}, args...)...)
	cmd.Env = append(hostEnv(), "CAPGATE_TOKEN="+token)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

// tapTransport records each response the Go SDK client reads, on the
// wire's terms, so a test sees a refusal's code and data that the SDK
// drops (see bearerTransport).
type tapTransport struct {
	mcp.Transport
	wire *bearerTransport
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, wire: t.wire}, nil
}

type tapConn struct {
	mcp.Connection
	wire *bearerTransport
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Response); ok && err == nil {
		if b, err := jsonrpc.EncodeMessage(r); err == nil {
			c.wire.mu.Lock()
			c.wire.last = b
			c.wire.mu.Unlock()
		}
	}
	return m, err
}

// TestStdioGoSDK drives `capgate stdio` with the official Go SDK client
// over its CommandTransport, at the SDK's default version (2026-07-28,
// stateless: the bridge mirrors each request's headers) and at
// 2025-11-25 (the handshake): alice sees her tools, lists her bookings,
// is refused bob's at step ownership and gets a tool error for a booking
// that does not exist, exactly as over HTTP; the token is in no argument
// of the process; and closing the session ends the bridge with exit 0.
func TestStdioGoSDK(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	bob := connect(t, h, tokenBob, protocolVersions[1])
	theirs := listBookings(t, bob, "bob")
	if len(theirs) == 0 {
		t.Fatal("bob has no booking to be refused")
	}
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "SDK default"
		}
		t.Run(name, func(t *testing.T) {
			cmd, stderr := stdioCommand(t, h.url(), tokenAlice)
			wire := &bearerTransport{}
			client := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go-stdio", Version: "0.0.0"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := client.Connect(ctx, &tapTransport{Transport: &mcp.CommandTransport{Command: cmd}, wire: wire},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect over capgate stdio: %v; stderr:\n%s", err, stderr.String())
			}
			alice := &session{ClientSession: cs, wire: wire}
			want := version
			if want == "" {
				want = protocolVersions[0]
			}
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("protocol version %s, want %s", got, want)
			}
			if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "capgate" {
				t.Errorf("serverInfo %+v, want capgate's", info)
			}

			argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
			if err != nil || !bytes.Contains(argv, []byte("stdio")) || bytes.Contains(argv, []byte(tokenAlice)) {
				t.Errorf("the command's arguments %q (%v): want stdio's, without the token", argv, err)
			}

			if got := toolNames(t, alice); !slices.Equal(got, allTools) {
				t.Errorf("tools as alice = %q, want %q", got, allTools)
			}
			if mine := listBookings(t, alice, "alice"); len(mine) != 2 {
				t.Errorf("alice has %d bookings, want the 2 seeded", len(mine))
			}
			callTool(t, alice, "booking.cancel", map[string]any{"id": theirs[0].ID}).wantRefusal(t, "booking.cancel of bob's booking as alice", "ownership")
			if r := callTool(t, alice, "booking.get", map[string]any{"id": "bk_doesnotexist"}); !r.isError || r.rpcErr != nil {
				t.Errorf("booking.get of no booking: %+v, want a tool error", r)
			}

			if err := cs.Close(); err != nil {
				t.Errorf("closing the session: %v (capgate stdio should exit 0 when stdin ends); stderr:\n%s", err, stderr.String())
			}
			if log := stderr.String(); !strings.Contains(log, "takes the token") && !strings.Contains(log, "forwarding MCP") {
				t.Errorf("stderr says nothing of what it forwards to:\n%s", log)
			}
			if strings.Contains(stderr.String(), tokenAlice) {
				t.Errorf("stderr holds the token:\n%s", stderr.String())
			}
		})
	}
	if st := statusOf(listBookings(t, bob, "bob"), theirs[0].ID); st == "cancelled" {
		t.Errorf("bob's booking was cancelled through alice's refused call")
	}
}

// TestStdioTypeScript drives `capgate stdio` with the official TypeScript
// SDK's StdioClientTransport (js/stdio.mjs), the transport desktop
// assistants build on: the same tools, result, refusal (code -32003 with
// the step in its data) and tool error as over HTTP, and a process whose
// arguments hold no token.
func TestStdioTypeScript(t *testing.T) {
	needE2E(t)
	nodeBin(t)
	h := startHost(t)
	theirs := listBookings(t, connect(t, h, tokenBob, protocolVersions[1]), "bob")
	if len(theirs) == 0 {
		t.Fatal("bob has no booking to be refused")
	}
	var out struct {
		ServerVersion *struct{ Name string } `json:"serverVersion"`
		Tools         []string               `json:"tools"`
		List          tsStdioCall            `json:"list"`
		Refusal       tsStdioCall            `json:"refusal"`
		ToolError     tsStdioCall            `json:"toolError"`
		Argv          []string               `json:"argv"`
		ExitCode      *int                   `json:"exitCode"`
		Stderr        string                 `json:"stderr"`
	}
	runStdioNode(t, h.url(), tokenAlice, &out, "--other-booking", theirs[0].ID)

	if out.ServerVersion == nil || out.ServerVersion.Name != "capgate" {
		t.Errorf("serverInfo %+v, want capgate's", out.ServerVersion)
	}
	if !slices.Equal(out.Tools, allTools) {
		t.Errorf("tools as alice = %q, want %q", out.Tools, allTools)
	}
	var list struct {
		Bookings []booking `json:"bookings"`
	}
	if out.List.IsError || out.List.Error != nil || json.Unmarshal(out.List.Structured, &list) != nil || len(list.Bookings) != 2 {
		t.Errorf("booking.list as alice: %+v, want her 2 bookings", out.List)
	}
	var data struct{ Step string }
	if e := out.Refusal.Error; e == nil || e.Code != -32003 || json.Unmarshal(e.Data, &data) != nil || data.Step != "ownership" {
		t.Errorf("booking.cancel of bob's booking as alice: %+v, want -32003 at step ownership", out.Refusal)
	}
	if !out.ToolError.IsError || out.ToolError.Error != nil || !strings.Contains(out.ToolError.Text, "bk_doesnotexist") {
		t.Errorf("booking.get of no booking: %+v, want a tool error naming it", out.ToolError)
	}
	if len(out.Argv) < 2 || out.Argv[1] != "stdio" || slices.ContainsFunc(out.Argv, func(a string) bool { return strings.Contains(a, tokenAlice) }) {
		t.Errorf("the command's arguments %q: want stdio's, without the token", out.Argv)
	}
	if out.ExitCode == nil || *out.ExitCode != 0 {
		t.Errorf("capgate stdio exit code %v after the client closed, want 0; stderr:\n%s", out.ExitCode, out.Stderr)
	}
	if strings.Contains(out.Stderr, tokenAlice) {
		t.Errorf("stderr holds the token:\n%s", out.Stderr)
	}
}

// tsStdioCall is how js/stdio.mjs reports one tools/call.
type tsStdioCall struct {
	IsError    bool            `json:"isError"`
	Structured json.RawMessage `json:"structured"`
	Text       string          `json:"text"`
	Error      *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// runStdioNode runs js/stdio.mjs with the token in its environment and
// decodes its report into out.
func runStdioNode(t *testing.T, url, token string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBin(t), append([]string{"stdio.mjs", "--capgate", binaries(t).host, "--url", url}, args...)...)
	cmd.Dir = jsDir(t)
	cmd.Env = append(hostEnv(), "CAPGATE_TOKEN="+token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("stdio.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdio.mjs:\n%s", stdout.String())
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("stdio.mjs output is not the expected JSON: %v", err)
	}
}

// TestStdioWrongURLOrToken: with a wrong token, or a URL where nothing
// listens, `capgate stdio` says so on stderr in one line naming the cause
// and what to do, answers each request with an error carrying the same
// words (the client shows them: the TypeScript SDK's connect fails with
// it), keeps stdout to JSON-RPC, and exits 0 when its client closes.
// -check exits 1 with the same line.
func TestStdioWrongURLOrToken(t *testing.T) {
	needE2E(t)
	h := startHost(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	nowhere := "http://" + addr + mcpPath
	l.Close()

	for _, tc := range []struct {
		name, url, token, says string
		problem                string
	}{
		{"wrong token", h.url(), "demo-mallory", "does not accept the token in CAPGATE_TOKEN", "token"},
		{"nothing listens", nowhere, tokenAlice, "nothing listens on " + addr + " (connection refused): start it", "unreachable"},
		{"not capgate's path", h.base + "/api/v2/mcp", tokenAlice, "is not its MCP endpoint", "not_capgate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, stderr := stdioCommand(t, tc.url, tc.token)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
			io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
			for id := 1; id <= 2; id++ {
				if !lines.Scan() {
					t.Fatalf("no answer %d; stderr:\n%s", id, stderr.String())
				}
				var a struct {
					ID    int `json:"id"`
					Error *struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
						Data    struct {
							Problem string `json:"problem"`
						} `json:"data"`
					} `json:"error"`
				}
				if err := json.Unmarshal(lines.Bytes(), &a); err != nil || a.ID != id || a.Error == nil || a.Error.Code != codeBridge ||
					a.Error.Data.Problem != tc.problem || !strings.Contains(a.Error.Message, tc.says) {
					t.Errorf("answer %d: %s, want error %d (%s) saying %q", id, lines.Bytes(), codeBridge, tc.problem, tc.says)
				}
			}
			stdin.Close()
			if lines.Scan() {
				t.Errorf("stdout carries more than the answers: %s", lines.Bytes())
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("capgate stdio exited with %v when its stdin ended, want 0", err)
			}
			verdict := ""
			for ln := range strings.SplitSeq(stderr.String(), "\n") {
				if strings.HasPrefix(ln, "capgate stdio: ") {
					verdict = ln
				}
			}
			if !strings.Contains(verdict, tc.says) {
				t.Errorf("no line on stderr saying %q:\n%s", tc.says, stderr.String())
			}

			check, checkErr := stdioCommand(t, tc.url, tc.token, "-check")
			var exit *exec.ExitError
			if err := check.Run(); !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(checkErr.String(), tc.says) {
				t.Errorf("-check: %v, stderr %q; want exit 1 saying %q", err, checkErr.String(), tc.says)
			}
		})
	}

	t.Run("TypeScript client", func(t *testing.T) {
		nodeBin(t)
		var out struct {
			Connected    bool `json:"connected"`
			ConnectError *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"connectError"`
			Stderr string `json:"stderr"`
		}
		runStdioNode(t, h.url(), "demo-mallory", &out, "--expect-failure")
		if out.Connected || out.ConnectError == nil || out.ConnectError.Code != codeBridge ||
			!strings.Contains(out.ConnectError.Message, "does not accept the token in CAPGATE_TOKEN") {
			t.Errorf("connect with a wrong token: %+v, want the bridge's error naming the token", out)
		}
	})
}

// TestStdioTokenFlagRefused: a token on the command line is refused
// before anything runs, exit 2, without repeating it.
func TestStdioTokenFlagRefused(t *testing.T) {
	needE2E(t)
	cmd, stderr := stdioCommand(t, "http://127.0.0.1:1"+mcpPath, "", "-token", tokenAlice)
	var exit *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("capgate stdio -token: %v, want exit 2", err)
	}
	if s := stderr.String(); !strings.Contains(s, "-token is refused") || !strings.Contains(s, "CAPGATE_TOKEN") || strings.Contains(s, tokenAlice) {
		t.Errorf("stderr:\n%s\nwant the refusal naming CAPGATE_TOKEN, without the token", s)
	}
}

// TestStdioSignal: SIGTERM while a call is under way (probe.slow, which
// holds it a minute) ends `capgate stdio` with exit 0, its stdout holding
// only whole answers.
func TestStdioSignal(t *testing.T) {
	needE2E(t)
	h := startProbeHost(t)
	cmd, stderr := stdioCommand(t, h.url(), tokenAlice, "-log-level", "debug")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	lines := bufio.NewScanner(stdout)
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	if !lines.Scan() || !strings.Contains(lines.Text(), `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s; stderr:\n%s", lines.Bytes(), stderr.String())
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"probe.slow","arguments":{"ms":60000}}}`+"\n")
	// The call is under way once the bridge says it forwards it.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stderr.String(), `msg="message forwarding" method=tools/call`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("capgate stdio after SIGTERM: %v, want exit 0; stderr:\n%s", err, stderr.String())
	}
	if len(rest) > 0 {
		t.Errorf("stdout after SIGTERM: %q, want nothing for the cancelled call", rest)
	}
}
