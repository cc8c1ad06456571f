package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/sdk/pgtest"
)

// auditT0 is where the test trail starts: far from any real clock.
var auditT0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// auditNow is the clock of the tests: a minute after the last record.
var auditNow = auditT0.Add(6 * time.Minute)

// testTrail is the test trail, oldest first; each record's RequestID
// names it.
func testTrail() []audit.Record {
	at := func(m int) time.Time { return auditT0.Add(time.Duration(m) * time.Minute) }
	return []audit.Record{
		{RequestID: "r1", Time: at(0), Protocol: "mcp", TokenLabel: "ops", Role: "admin", Scope: "admin", UserID: "u-admin",
			Capability: "booking.read", Plugin: "booking", Args: json.RawMessage(`{"id":"b-1","card":"[redacted]"}`),
			Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 2 * time.Millisecond},
		{RequestID: "r2", Time: at(1), TokenLabel: "shop", UserID: "u-alice", Capability: "booking.create",
			Decision: audit.Refused, Step: "permission", Reason: "role customer lacks booking.write"},
		{RequestID: "r3", Time: at(2), TokenLabel: "shop", UserID: "u-alice", Capability: "booking.create",
			Decision: audit.Admitted, Outcome: audit.OutcomeToolError, ErrorCode: "conflict", Latency: 40 * time.Millisecond},
		{RequestID: "r4", Time: at(3), TokenLabel: "shop", UserID: "u-bob", Capability: "booking.read",
			Decision: audit.Refused, Step: "rate_limit", Reason: "over 5/m"},
		{RequestID: "r5", Time: at(4), TokenLabel: "ops", Capability: "platform.search",
			Decision: audit.Admitted, Outcome: audit.OutcomeInternalError, ErrorRef: "E-123", Latency: 1234 * time.Millisecond},
		{RequestID: "r6", Time: at(5), TokenLabel: "ops", UserID: "u-admin", Capability: "booking.read",
			Decision: audit.Admitted, Outcome: audit.OutcomeOK, Latency: 300 * time.Microsecond},
	}
}

// auditConfig writes a configuration file keeping its data in dataDir (and
// the audit trail in dsn, when set) and returns its path.
func auditConfig(t *testing.T, dataDir, dsn string) string {
	t.Helper()
	yaml := "data_dir: " + dataDir + "\n"
	if dsn != "" {
		yaml += "database: {dsn: '" + dsn + "'}\n"
	}
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// appendTrail appends records to the store at dsn/dataDir, as the host's
// writer would.
func appendTrail(t *testing.T, dsn, dataDir string, records []audit.Record) {
	t.Helper()
	st, err := audit.Open(context.Background(), dsn, dataDir)
	if err != nil {
		t.Fatalf("open audit store: %v", err)
	}
	defer st.Close()
	if err := st.Append(context.Background(), records); err != nil {
		t.Fatalf("append: %v", err)
	}
}

// sqliteTrail is a configuration whose data_dir holds the test trail.
func sqliteTrail(t *testing.T) (cfgPath, dataDir string) {
	t.Helper()
	dataDir = t.TempDir()
	appendTrail(t, "", dataDir, testTrail())
	return auditConfig(t, dataDir, ""), dataDir
}

// runAuditCmd runs capgate audit at auditNow.
func runAuditCmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runAudit(context.Background(), args, &out, &errOut, auditNow, time.Millisecond)
	return code, out.String(), errOut.String()
}

// jsonRequestIDs decodes -json output, every line one record with only
// the documented fields, and returns the records' request ids.
func jsonRequestIDs(t *testing.T, out string) []string {
	t.Helper()
	ids := []string{}
	for line := range strings.Lines(out) {
		var r server.AuditRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids = append(ids, r.RequestID)
	}
	return ids
}

// TestAuditTable: the default output is a line per record, newest first,
// saying how each call was decided and ended, and never its arguments.
func TestAuditTable(t *testing.T) {
	cfg, _ := sqliteTrail(t)
	code, out, errOut := runAuditCmd("-c", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want a header and 6 records:\n%s", len(lines), out)
	}
	for _, col := range []string{"TIME", "DECISION", "CAPABILITY", "TOKEN", "USER", "LATENCY"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header %q lacks %s", lines[0], col)
		}
	}
	want := [][]string{
		{"2030-01-07T09:05:00Z", "ok", "booking.read", "ops", "u-admin", "300µs"},
		{"2030-01-07T09:04:00Z", "internal E-123", "platform.search", "ops", " - ", "1.23s"},
		{"2030-01-07T09:03:00Z", "refused at rate_limit", "booking.read", "shop", "u-bob", "0s", "over 5/m"},
		{"2030-01-07T09:02:00Z", "tool error conflict", "booking.create", "shop", "u-alice", "40ms"},
		{"2030-01-07T09:01:00Z", "refused at permission", "booking.create", "shop", "u-alice", "role customer lacks booking.write"},
		{"2030-01-07T09:00:00Z", "ok", "booking.read", "ops", "u-admin", "2ms"},
	}
	for i, w := range want {
		line := lines[i+1]
		if !strings.HasPrefix(line, w[0]+" ") {
			t.Errorf("line %d %q does not start with the time %s", i+1, line, w[0])
		}
		for _, s := range w[1:] {
			if !strings.Contains(line, s) {
				t.Errorf("line %d %q lacks %q", i+1, line, s)
			}
		}
	}
	for _, secret := range []string{"b-1", "redacted", "card", "{"} {
		if strings.Contains(out, secret) {
			t.Errorf("the table shows arguments (%q):\n%s", secret, out)
		}
	}
	if errOut != "" {
		t.Errorf("stderr %q; want nothing when every match is shown", errOut)
	}
}

// TestAuditTableIsOneLinePerRecord: what a record holds cannot break the
// table's lines or send escapes to the terminal.
func TestAuditTableIsOneLinePerRecord(t *testing.T) {
	dataDir := t.TempDir()
	appendTrail(t, "", dataDir, []audit.Record{{
		Time: auditT0, Capability: "evil\x1b[31m.cap", TokenLabel: "tok\u202eneg", UserID: "line\nbreak",
		Decision: audit.Refused, Step: "permission", Reason: "why\r\nnot " + strings.Repeat("x", 900),
	}})
	code, out, errOut := runAuditCmd("-c", auditConfig(t, dataDir, ""))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("%d lines, want a header and one record:\n%q", n, out)
	}
	if strings.ContainsAny(out, "\x1b\r\u202e") {
		t.Fatalf("control characters reach the terminal: %q", out)
	}
	if !strings.Contains(out, "…") || len(out) > 600 {
		t.Fatalf("a long reason should be cut in the table (%d bytes): %q", len(out), out)
	}
}

// TestAuditFilters: each flag selects what the store's filter does.
func TestAuditFilters(t *testing.T) {
	cfg, _ := sqliteTrail(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{[]string{"-token", "shop"}, []string{"r4", "r3", "r2"}},
		{[]string{"-user", "u-alice"}, []string{"r3", "r2"}},
		{[]string{"-capability", "booking.read"}, []string{"r6", "r4", "r1"}},
		{[]string{"-decision", "refused"}, []string{"r4", "r2"}},
		{[]string{"-decision", "admitted"}, []string{"r6", "r5", "r3", "r1"}},
		{[]string{"-step", "rate_limit"}, []string{"r4"}},
		{[]string{"-request", "r3"}, []string{"r3"}},
		{[]string{"-since", "2030-01-07T09:02:00Z"}, []string{"r6", "r5", "r4", "r3"}},
		{[]string{"-until", "2030-01-07T09:02:00Z"}, []string{"r2", "r1"}},
		{[]string{"-since", "2030-01-07T10:02:00+01:00", "-until", "2030-01-07T09:04:00Z"}, []string{"r4", "r3"}},
		// Durations are before the command's clock, auditNow (09:06).
		{[]string{"-since", "4m"}, []string{"r6", "r5", "r4", "r3"}},
		{[]string{"-since", "1h"}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{[]string{"-since", "1d"}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
		{[]string{"-since", "5m30s", "-until", "2m"}, []string{"r4", "r3", "r2"}},
		{[]string{"-until", "1d"}, []string{}},
		{[]string{"-token", "shop", "-decision", "admitted"}, []string{"r3"}},
		{[]string{"-token", "nobody"}, []string{}},
		{[]string{"-limit", "2"}, []string{"r6", "r5"}},
		{[]string{"-limit", "6"}, []string{"r6", "r5", "r4", "r3", "r2", "r1"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runAuditCmd(append([]string{"-c", cfg, "-json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := jsonRequestIDs(t, out); !slices.Equal(got, tc.want) {
				t.Fatalf("records %v, want %v", got, tc.want)
			}
			if more := strings.Contains(errOut, "more records match"); more != (len(tc.want) == 2 && tc.args[0] == "-limit") {
				t.Fatalf("stderr %q: the note of more records is wrong", errOut)
			}
		})
	}
	t.Run("no match in the table", func(t *testing.T) {
		code, out, _ := runAuditCmd("-c", cfg, "-user", "nobody")
		if code != 0 || out != "no audit records match\n" {
			t.Fatalf("exit %d, stdout %q; want 0 and a line saying nothing matched", code, out)
		}
	})
}

// TestAuditJSON: -json writes each record whole, under the documented
// names.
func TestAuditJSON(t *testing.T) {
	cfg, _ := sqliteTrail(t)
	code, out, errOut := runAuditCmd("-c", cfg, "-json", "-request", "r1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	want := map[string]string{
		"parent_id": `""`, "time": `"2030-01-07T09:00:00Z"`, "request_id": `"r1"`, "protocol": `"mcp"`,
		"protocol_version": `""`, "token_label": `"ops"`, "role": `"admin"`, "scope": `"admin"`, "user_id": `"u-admin"`,
		"capability": `"booking.read"`, "plugin": `"booking"`, "args": `{"id":"b-1","card":"[redacted]"}`,
		"decision": `"admitted"`, "step": `""`, "reason": `""`, "outcome": `"ok"`, "error_code": `""`, "error_ref": `""`,
		"latency_ns": "2000000",
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	for _, k := range []string{"seq", "id"} {
		if len(got[k]) < 1 || string(got[k]) == `""` || string(got[k]) == "0" {
			t.Errorf("%s = %s, want the record's", k, got[k])
		}
	}
	if len(got) != len(want)+2 {
		t.Errorf("%d fields, want %d: %s", len(got), len(want)+2, out)
	}
}

// TestAuditBadFlags: a bad flag is a usage error naming it, before any
// store is opened.
func TestAuditBadFlags(t *testing.T) {
	cfg, _ := sqliteTrail(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "-c FILE is required"},
		{[]string{"-c", cfg, "-since", "yesterday"}, "-since"},
		{[]string{"-c", cfg, "-since", "-1h"}, "-since"},
		{[]string{"-c", cfg, "-since", "0d"}, "-since"},
		{[]string{"-c", cfg, "-since", "1.5d"}, "-since"},
		{[]string{"-c", cfg, "-since", "99999999d"}, "-since"},
		{[]string{"-c", cfg, "-until", "2030-13-01T00:00:00Z"}, "-until"},
		{[]string{"-c", cfg, "-since", "1h", "-until", "2h"}, "-until"},
		{[]string{"-c", cfg, "-decision", "maybe"}, "-decision"},
		{[]string{"-c", cfg, "-limit", "0"}, "-limit 0"},
		{[]string{"-c", cfg, "-limit", "1001"}, "-limit 1001"},
		{[]string{"-c", cfg, "-limit", "ten"}, "-limit"},
		{[]string{"-c", cfg, "-token", strings.Repeat("t", audit.MaxLabelLen+1)}, "-token"},
		{[]string{"-c", cfg, "-user", strings.Repeat("u", audit.MaxNameLen+1)}, "-user"},
		{[]string{"-c", cfg, "-capability", strings.Repeat("c", audit.MaxNameLen+1)}, "-capability"},
		{[]string{"-c", cfg, "-step", strings.Repeat("s", audit.MaxProtocolLen+1)}, "-step"},
		{[]string{"-c", cfg, "-request", strings.Repeat("r", audit.MaxRequestIDLen+1)}, "-request"},
		{[]string{"-c", cfg, "-follow", "-until", "1h"}, "-until cannot be combined with -follow"},
		{[]string{"-c", cfg, "-colour", "red"}, "-colour"},
		{[]string{"-c", cfg, "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runAuditCmd(tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errOut)
			}
			if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "usage: capgate audit") {
				t.Fatalf("stderr %q; want it to name %q and give the usage", errOut, tc.want)
			}
			if out != "" {
				t.Fatalf("stdout %q; want nothing", out)
			}
		})
	}
	t.Run("through run", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := run([]string{"audit", "-c", cfg, "-decision", "maybe"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-decision") {
			t.Fatalf("exit %d, stderr %q", code, errOut.String())
		}
	})
}

// TestAuditNoTrail: before the host has written anything there is nothing
// to show, which is not a failure, and reading creates no file.
func TestAuditNoTrail(t *testing.T) {
	empty := t.TempDir()
	for name, dir := range map[string]string{"empty data_dir": empty, "no data_dir yet": filepath.Join(empty, "not-yet")} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runAuditCmd("-c", auditConfig(t, dir, ""))
			if code != 0 || out != "" || !strings.Contains(errOut, "no audit records yet") || !strings.Contains(errOut, audit.FileName) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and a note naming the missing file", code, out, errOut)
			}
		})
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Fatalf("data_dir holds %v (%v) after reading; want nothing created", entries, err)
	}
}

// TestAuditStoreFailures: a file that cannot be loaded, or a store that
// cannot be opened or reached, is exit 1 with a message that holds no
// password.
func TestAuditStoreFailures(t *testing.T) {
	dir := t.TempDir()
	notSQLite := t.TempDir()
	if err := os.WriteFile(filepath.Join(notSQLite, audit.FileName), []byte("this is not a database, it only has the name of one"), 0o600); err != nil {
		t.Fatal(err)
	}
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("max_results: ten\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cfg, want string
		follow          bool
	}{
		{"bad file", badYAML, "max_results", false},
		{"missing file", filepath.Join(dir, "nope.yaml"), "nope.yaml", false},
		{"nobody listening", auditConfig(t, dir, "postgres://capgate:s3cret@127.0.0.1:1/db?connect_timeout=2"), "cannot reach the audit trail in database.dsn postgres://capgate:xxxxx@127.0.0.1:1/db", false},
		{"nobody listening, following", auditConfig(t, dir, "postgres://capgate:s3cret@127.0.0.1:1/db?connect_timeout=2"), "database.dsn", true},
		{"not a database", auditConfig(t, notSQLite, ""), "cannot open the audit trail in data_dir", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-c", tc.cfg}
			if tc.follow {
				args = append(args, "-follow")
			}
			code, out, errOut := runAuditCmd(args...)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, errOut, tc.want)
			}
			if strings.Contains(errOut, "s3cret") || out != "" {
				t.Fatalf("stdout %q, stderr %q: want no output and no password", out, errOut)
			}
		})
	}
}

// TestAuditPostgres: database.dsn points the command at the shared trail.
func TestAuditPostgres(t *testing.T) {
	dsn := pgtest.SchemaDSN(t)
	appendTrail(t, dsn, "", testTrail())
	code, out, errOut := runAuditCmd("-c", auditConfig(t, t.TempDir(), dsn), "-json", "-token", "shop")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := jsonRequestIDs(t, out); !slices.Equal(got, []string{"r4", "r3", "r2"}) {
		t.Fatalf("records %v, want [r4 r3 r2]", got)
	}
}

// syncBuffer is stdout for a command running in another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// following is a capgate audit -follow running until stop.
type following struct {
	out, errOut *syncBuffer
	cancel      context.CancelFunc
	code        chan int
}

func startFollow(t *testing.T, args ...string) *following {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &following{out: &syncBuffer{}, errOut: &syncBuffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		f.code <- runAudit(ctx, append(args, "-follow"), f.out, f.errOut, auditNow, 5*time.Millisecond)
	}()
	t.Cleanup(func() {
		cancel()
		<-f.code
	})
	return f
}

// waitFor waits until f's output holds want records (by request id) and
// fails if it holds anything else.
func (f *following) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Only whole lines: the command may be midway through one.
		out := f.out.String()
		got := jsonRequestIDs(t, out[:strings.LastIndexByte(out, '\n')+1])
		if slices.Equal(got, want) {
			return
		}
		if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
			t.Fatalf("following printed %v, want %v", got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("following printed %v, still waiting for %v (stderr %q)", got, want, f.errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop ends the command as SIGINT would and returns its exit code.
func (f *following) stop(t *testing.T) int {
	t.Helper()
	f.cancel()
	select {
	case code := <-f.code:
		f.code <- code // for the cleanup
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("following did not stop when its context ended")
		return -1
	}
}

// TestAuditFollow: -follow prints the newest matching records oldest
// first, then each matching record appended while it runs, once, until
// its context ends.
func TestAuditFollow(t *testing.T) {
	cfg, dataDir := sqliteTrail(t)
	f := startFollow(t, "-c", cfg, "-json", "-limit", "2", "-token", "ops")
	f.waitFor(t, "r5", "r6")
	more := func(id, token string) audit.Record {
		return audit.Record{RequestID: id, TokenLabel: token, Capability: "booking.read", Decision: audit.Admitted, Outcome: audit.OutcomeOK}
	}
	appendTrail(t, "", dataDir, []audit.Record{more("r7", "shop"), more("r8", "ops")})
	f.waitFor(t, "r5", "r6", "r8")
	appendTrail(t, "", dataDir, []audit.Record{more("r9", "ops")})
	appendTrail(t, "", dataDir, []audit.Record{more("r10", "ops"), more("r11", "shop")})
	f.waitFor(t, "r5", "r6", "r8", "r9", "r10")
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d after the context ended, want 0 (stderr %q)", code, f.errOut.String())
	}
	if got := jsonRequestIDs(t, f.out.String()); !slices.Equal(got, []string{"r5", "r6", "r8", "r9", "r10"}) {
		t.Fatalf("after stopping, output %v", got)
	}
}

// TestAuditFollowSince: with -since, following starts there however many
// records that is, and reads a backlog larger than one page.
func TestAuditFollowSince(t *testing.T) {
	cfg, dataDir := sqliteTrail(t)
	backlog := make([]audit.Record, audit.MaxLimit+5)
	want := []string{"r3", "r4", "r5", "r6"}
	for i := range backlog {
		backlog[i] = audit.Record{RequestID: "b" + strings.Repeat("x", i%3) + string(rune('a'+i%26)), Time: auditNow,
			Capability: "booking.read", Decision: audit.Admitted, Outcome: audit.OutcomeOK}
		want = append(want, backlog[i].RequestID)
	}
	appendTrail(t, "", dataDir, backlog)
	f := startFollow(t, "-c", cfg, "-json", "-limit", "1", "-since", "2030-01-07T09:02:00Z")
	f.waitFor(t, want...)
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestAuditFollowTable: following in the table prints the header once and
// a line per record, oldest first.
func TestAuditFollowTable(t *testing.T) {
	cfg, dataDir := sqliteTrail(t)
	f := startFollow(t, "-c", cfg, "-limit", "1")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(f.out.String(), "2030-01-07T09:05:00Z") {
		if time.Now().After(deadline) {
			t.Fatalf("following printed %q, still waiting for r6", f.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	appendTrail(t, "", dataDir, []audit.Record{{RequestID: "r7", Time: auditNow, TokenLabel: "late", Capability: "platform.search",
		Decision: audit.Refused, Step: "kill_switch", Reason: "actions are off"}})
	for !strings.Contains(f.out.String(), "actions are off") {
		if time.Now().After(deadline) {
			t.Fatalf("following printed %q, still waiting for r7", f.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSuffix(f.out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "TIME") || !strings.HasPrefix(lines[1], "2030-01-07T09:05:00Z") ||
		!strings.Contains(lines[2], "refused at kill_switch") || !strings.Contains(lines[2], "late") {
		t.Fatalf("output:\n%s\nwant the header, r6, then r7", f.out.String())
	}
}

// TestAuditFollowBeforeTheHost: following a data_dir the host has not
// written to yet waits for the trail, then follows it.
func TestAuditFollowBeforeTheHost(t *testing.T) {
	dataDir := t.TempDir()
	f := startFollow(t, "-c", auditConfig(t, dataDir, ""), "-json")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(f.errOut.String(), "waiting for it") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q; want a note that it waits for the trail", f.errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	appendTrail(t, "", dataDir, testTrail()[:2])
	f.waitFor(t, "r1", "r2")
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestAuditFollowStopsWhileWaiting: an interrupt ends following even
// before there is a trail to read.
func TestAuditFollowStopsWhileWaiting(t *testing.T) {
	f := startFollow(t, "-c", auditConfig(t, filepath.Join(t.TempDir(), "none"), ""))
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d (stderr %q)", code, f.errOut.String())
	}
}

func TestParseAgo(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"30m": 30 * time.Minute, "1h": time.Hour, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour,
		"90s": 90 * time.Second, "36500d": 36500 * 24 * time.Hour,
	} {
		if got, err := parseAgo(s); err != nil || got != want {
			t.Errorf("parseAgo(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "0", "0s", "0d", "-1h", "-1d", "1.5d", "+1d", "36501d", "1d-1h", "1w", "h", "1d1d", "9999999999h"} {
		if got, err := parseAgo(s); err == nil {
			t.Errorf("parseAgo(%q) = %v; want an error", s, got)
		}
	}
}

// execSQLite runs statement on the SQLite trail in dataDir, beside the
// command's own handle, to break or mend its table.
func execSQLite(t *testing.T, dataDir, statement string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dataDir, audit.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(statement); err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
}

// TestAuditQueryFails: a store that opens but cannot be read is exit 1
// saying so.
func TestAuditQueryFails(t *testing.T) {
	cfg, dataDir := sqliteTrail(t)
	execSQLite(t, dataDir, "DROP TABLE audit_blocks")
	for _, follow := range []bool{false, true} {
		args := []string{"-c", cfg}
		if follow {
			args = append(args, "-follow")
		}
		code, out, errOut := runAuditCmd(args...)
		if code != 1 || !strings.Contains(errOut, "read the audit trail") || strings.Contains(out, "r1") {
			t.Fatalf("follow %v: exit %d, stdout %q, stderr %q; want 1 and the failure", follow, code, out, errOut)
		}
	}
}

// TestAuditFollowOutlivesAFailure: a store failing while followed is
// reported once and read again when it recovers, missing nothing.
func TestAuditFollowOutlivesAFailure(t *testing.T) {
	cfg, dataDir := sqliteTrail(t)
	f := startFollow(t, "-c", cfg, "-json", "-limit", "1")
	f.waitFor(t, "r6")
	execSQLite(t, dataDir, "ALTER TABLE audit_blocks RENAME TO audit_blocks_away")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(f.errOut.String(), "reading the audit trail failed, retrying") {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q; want the failure reported", f.errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	execSQLite(t, dataDir, "ALTER TABLE audit_blocks_away RENAME TO audit_blocks")
	appendTrail(t, "", dataDir, []audit.Record{{RequestID: "r7", Capability: "booking.read", Decision: audit.Admitted, Outcome: audit.OutcomeOK}})
	f.waitFor(t, "r6", "r7")
	if code := f.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	errOut := f.errOut.String()
	if strings.Count(errOut, "failed, retrying") != 1 || !strings.Contains(errOut, "reading the audit trail again") {
		t.Fatalf("stderr %q; want the failure once, then the recovery", errOut)
	}
}

// TestAuditWriteFails: output that cannot be written is exit 1, following
// or not.
func TestAuditWriteFails(t *testing.T) {
	cfg, _ := sqliteTrail(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	w.Close()
	for _, args := range [][]string{{"-c", cfg}, {"-c", cfg, "-json", "-follow"}} {
		var errOut bytes.Buffer
		if code := runAudit(context.Background(), args, w, &errOut, auditNow, time.Millisecond); code != 1 || !strings.Contains(errOut.String(), "capgate: write:") {
			t.Fatalf("%v: exit %d, stderr %q; want 1 and the write error", args, code, errOut.String())
		}
	}
}

// TestAuditHelp: -h lists the flags.
func TestAuditHelp(t *testing.T) {
	code, _, errOut := runAuditCmd("-h")
	if code != 2 || !strings.Contains(errOut, "usage: capgate audit") || !strings.Contains(errOut, "-follow") || !strings.Contains(errOut, "7d") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestDecisionCell: each way a call ends reads as one short cell, with
// the id to follow a held or asked call by.
func TestDecisionCell(t *testing.T) {
	for _, c := range []struct {
		r    audit.Record
		want string
	}{
		{audit.Record{Decision: audit.Refused, Step: "scope"}, "refused at scope"},
		{audit.Record{Decision: audit.Admitted, Outcome: audit.OutcomeOK}, "ok"},
		{audit.Record{Decision: audit.Admitted, Outcome: audit.OutcomeToolError, ErrorCode: "not_found"}, "tool error not_found"},
		{audit.Record{Decision: audit.Admitted, Outcome: audit.OutcomeInternalError, ErrorRef: "01J"}, "internal 01J"},
		{audit.Record{Decision: audit.Admitted, Outcome: audit.OutcomeHeld, ApprovalID: "ap_1"}, "held ap_1"},
		{audit.Record{Decision: audit.Admitted, Outcome: audit.OutcomeAsked, ApprovalID: "cf_1"}, "asked cf_1"},
	} {
		if got := decisionCell(c.r); got != c.want {
			t.Errorf("decisionCell(%+v) = %q; want %q", c.r, got, c.want)
		}
	}
}
