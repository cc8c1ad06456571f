package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/stdio"
)

const stdioToken = "cli-stdio-secret-token"

// stdioCapgate is a capgate server over the in-memory test platform that
// takes stdioToken as alice.
func stdioCapgate(t *testing.T) string {
	t.Helper()
	p := mcptest.New()
	srv := httptest.NewServer(server.New(server.Options{
		Enabled:    true,
		Version:    "1.2.3",
		Dispatcher: p.Dispatcher,
		Auth: auth.New([]config.Token{{Label: "alice", SHA256: sha256.Sum256([]byte(stdioToken)),
			Role: mcptest.Alice.Role, Scope: mcptest.Alice.Scope, UserID: mcptest.Alice.UserID}}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL + server.MCPPath
}

// TestStdioUsage: what capgate stdio refuses before it reads a message,
// each with exit 2 and a line saying why; a token on the command line
// first of all, without repeating it.
func TestStdioUsage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		err      string
		notInErr string
	}{
		{"-token", []string{"-token", "demo-alice"}, nil, "-token is refused: a token on the command line is visible to every user of this machine (ps)", "demo-alice"},
		{"--token=", []string{"-url", "http://127.0.0.1:1/api/v1/mcp", "--token=demo-alice"}, nil, "put it in CAPGATE_TOKEN", "demo-alice"},
		{"-TOKEN", []string{"-TOKEN=demo-alice"}, map[string]string{stdio.TokenEnv: "x"}, "-token is refused", "demo-alice"},
		{"no token", nil, map[string]string{stdio.TokenEnv: ""}, "CAPGATE_TOKEN is not set: put capgate's bearer token in it", ""},
		{"bad URL in the environment", nil, map[string]string{stdio.TokenEnv: "t", stdio.URLEnv: "ftp://x/api/v1/mcp"}, "CAPGATE_URL: URL \"ftp://x/api/v1/mcp\": the scheme must be http or https", ""},
		{"plain http to another machine", []string{"-url", "http://capgate.example/api/v1/mcp"}, map[string]string{stdio.TokenEnv: "t"}, "-url: URL http://capgate.example/api/v1/mcp is plain http to another machine", ""},
		{"insecure names its flag", []string{"-url", "http://capgate.example/api/v1/mcp"}, map[string]string{stdio.TokenEnv: "t"}, "-allow-insecure-http", ""},
		{"missing CA file", []string{"-cacert", "/nonexistent/ca.pem"}, map[string]string{stdio.TokenEnv: "t"}, "-cacert: open /nonexistent/ca.pem", ""},
		{"bad level", []string{"-log-level", "loud"}, map[string]string{stdio.TokenEnv: "t"}, `-log-level "loud" is not one of`, ""},
		{"argument", []string{"serve"}, map[string]string{stdio.TokenEnv: "t"}, `unexpected argument "serve"`, ""},
		{"bad timeout", []string{"-timeout", "0s"}, map[string]string{stdio.TokenEnv: "t"}, "-timeout must be positive", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(stdio.TokenEnv, "")
			t.Setenv(stdio.URLEnv, "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := stdioCmd(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tc.err) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit 2 saying %q", code, stderr.String(), tc.err)
			}
			if tc.notInErr != "" && strings.Contains(stderr.String(), tc.notInErr) {
				t.Errorf("stderr repeats %q:\n%s", tc.notInErr, stderr.String())
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout is not for words: %q", stdout.String())
			}
		})
	}
}

// TestStdioCheck: -check says what answered and exits 0 when capgate
// takes the token, 1 with the problem when not.
func TestStdioCheck(t *testing.T) {
	url := stdioCapgate(t)
	t.Setenv(stdio.URLEnv, url)

	t.Setenv(stdio.TokenEnv, stdioToken)
	var stdout, stderr bytes.Buffer
	if code := stdioCmd([]string{"-check"}, strings.NewReader(""), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "ok: capgate 1.2.3 (protocol versions 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26) at "+url+" takes the token") {
		t.Fatalf("-check with the right token: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}

	t.Setenv(stdio.TokenEnv, "cli-wrong-token")
	stdout.Reset()
	stderr.Reset()
	if code := stdioCmd([]string{"-check"}, strings.NewReader(""), &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "capgate stdio: capgate at "+url+" does not accept the token in CAPGATE_TOKEN") {
		t.Fatalf("-check with a wrong token: exit %d, stderr %q", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "cli-wrong-token") {
		t.Errorf("stderr holds the token: %s", stderr.String())
	}
}

// TestStdioServe runs the command over pipes: stdout carries exactly the
// answers, one a line, and everything else goes to stderr; the end of
// stdin ends it with exit 0.
func TestStdioServe(t *testing.T) {
	url := stdioCapgate(t)
	t.Setenv(stdio.TokenEnv, stdioToken)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"booking.cancel","arguments":{"id":"b-2"}}}`,
	}, "\n") + "\n"
	var stdout, stderr bytes.Buffer
	if code := stdioCmd([]string{"-url", url, "-log-level", "debug"}, strings.NewReader(in), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout has %d lines, want the 2 answers:\n%s", len(lines), stdout.String())
	}
	ids := map[string]string{}
	for _, l := range lines {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int             `json:"code"`
				Data json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %s", l)
		}
		ids[string(m.ID)] = l
		if string(m.ID) == "2" && (m.Error == nil || m.Error.Code != -32003 || !strings.Contains(string(m.Error.Data), `"step":"ownership"`)) {
			t.Errorf("bob's booking cancelled as alice: %s, want the ownership refusal", l)
		}
	}
	if ids["1"] == "" || ids["2"] == "" {
		t.Errorf("answers %v, want ids 1 and 2", ids)
	}
	if !strings.Contains(stderr.String(), "forwarding MCP from stdin to capgate") || strings.Contains(stderr.String(), stdioToken) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestEditorsDocSnippets reads docs/editors.md: every JSON block is valid
// JSON, every server in it that runs capgate runs `capgate stdio` with
// flags the command takes and the token in its environment, never its
// arguments; the command lines of its shell blocks parse the same way.
func TestEditorsDocSnippets(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "editors.md"))
	if err != nil {
		t.Fatal(err)
	}
	checkArgs := func(where string, args []string) {
		t.Helper()
		if len(args) == 0 || args[0] != "stdio" {
			t.Errorf("%s: capgate runs with %q, want stdio first", where, args)
			return
		}
		if flagged, ok := tokenFlag(args[1:]); ok {
			t.Errorf("%s: %s on the command line", where, flagged)
		}
		fs, _ := stdioFlags(io.Discard)
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			t.Errorf("%s: capgate %q: %v", where, args, err)
		}
	}
	blocks, servers, commands := 0, 0, 0
	lines := strings.Split(string(doc), "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(lines[i], "```")
		if !ok || lang == "" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && lines[i] != "```"; i++ {
		}
		body := strings.Join(lines[start:i], "\n")
		where := fmt.Sprintf("docs/editors.md:%d", start)
		switch lang {
		case "json":
			blocks++
			var cfg map[string]map[string]struct {
				Type    string            `json:"type"`
				Command string            `json:"command"`
				Args    []string          `json:"args"`
				Env     map[string]string `json:"env"`
				URL     string            `json:"url"`
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(body), &raw); err != nil {
				t.Errorf("%s: not JSON: %v", where, err)
				continue
			}
			delete(raw, "inputs")
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			for key, entries := range cfg {
				if key != "mcpServers" && key != "servers" {
					t.Errorf("%s: top-level key %q, want mcpServers or servers", where, key)
				}
				for name, s := range entries {
					servers++
					switch {
					case s.URL != "":
						if !strings.HasSuffix(s.URL, "/api/v1/mcp") {
							t.Errorf("%s: server %s at %s, not capgate's endpoint", where, name, s.URL)
						}
					case key == "servers" && s.Type != "stdio":
						t.Errorf("%s: VS Code server %s has type %q, want stdio", where, name, s.Type)
					case s.Env[stdio.TokenEnv] == "":
						t.Errorf("%s: server %s sets no %s", where, name, stdio.TokenEnv)
					default:
						checkArgs(where, s.Args)
					}
				}
			}
		case "sh":
			cmd := strings.ReplaceAll(body, "\\\n", " ")
			for l := range strings.SplitSeq(cmd, "\n") {
				_, after, ok := strings.Cut(l, "/usr/local/bin/capgate ")
				if !ok {
					continue
				}
				commands++
				after, _, _ = strings.Cut(after, "#")
				checkArgs(where, strings.Fields(after))
			}
		}
	}
	if blocks < 6 || servers < 6 || commands < 2 {
		t.Errorf("read %d JSON blocks, %d servers, %d capgate command lines: the page lost its snippets", blocks, servers, commands)
	}
}
