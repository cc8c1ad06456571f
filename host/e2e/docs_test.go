package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
)

// The documentation's commands, run for real.
//
// A fenced block in README.md or docs/**/*.md right under a line starting
// "<!-- tested" is part of the docs' contract:
//
//   - a ```sh block is run, statement by statement, by bash, in a copy of
//     the checkout's layout (config/capgate.yaml as it is, bin/ holding the
//     binaries) against a host serving that demo config, with the docs'
//     address 127.0.0.1:8080 replaced by the host's. A file's blocks run in
//     one shell, in order (a variable set in one is seen by the next); the
//     files of docs/ run after README.md, each with the README's mcp
//     function defined, on the same host.
//   - a ```json block is an answer the docs show: the answer the commands
//     got to the same JSON-RPC id must be that JSON value.
//
// What each statement's output must show comes from the docs themselves
// where they say it — a trailing "# → TEXT" comment (the output contains
// TEXT) or "# STEP" naming a gate step (the answer is a -32003 refusal at
// that step) — and otherwise from docsExpectations, by file and JSON-RPC id.
// Every JSON-RPC answer must be checked by one or the other, every
// expectation must meet an answer, and every statement must exit 0: a
// command of the docs that stops working, or a doc that stops showing what
// is expected of it, fails the test.

// docsMarker starts the line above a tested block.
const docsMarker = "<!-- tested"

// docsAddress is the address the docs' commands use: make run's.
const docsAddress = "127.0.0.1:8080"

// gateSteps are the step names a trailing comment may claim.
var gateSteps = []string{"pack", "user_binding", "scope", "permission", "ownership"}

// docFiles lists README.md and every Markdown file under docs/, relative to
// the module root with forward slashes, README.md first.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing docs/: %v", err)
	}
	slices.Sort(files[1:])
	return files
}

// docBlock is one tested fenced block.
type docBlock struct {
	file string
	line int    // of its first line of content
	lang string // sh or json
	text string
}

// markedBlocks returns the tested blocks of one Markdown text, in order.
func markedBlocks(file, text string) ([]docBlock, error) {
	lines := strings.Split(text, "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), docsMarker) {
			continue
		}
		j := i + 1
		if j >= len(lines) || !strings.HasPrefix(lines[j], "```") {
			return nil, fmt.Errorf("%s:%d: a %q marker must stand right above a fenced block", file, i+1, docsMarker)
		}
		lang := strings.TrimSpace(strings.TrimPrefix(lines[j], "```"))
		if lang != "sh" && lang != "json" {
			return nil, fmt.Errorf("%s:%d: tested blocks are ```sh or ```json, not %q", file, j+1, lines[j])
		}
		end := j + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: the tested block never closes", file, j+1)
		}
		blocks = append(blocks, docBlock{file: file, line: j + 2, lang: lang, text: strings.Join(lines[j+1:end], "\n")})
		i = end
	}
	return blocks, nil
}

// docStatement is one command of a tested shell block, with what its
// trailing comment claims.
type docStatement struct {
	file string
	line int
	text string
	// contains is the text after "# →": the output must contain it.
	contains string
	// step is a gate step the trailing comment names: the answer must be
	// a refusal at it.
	step string
}

func (s docStatement) String() string {
	first, _, _ := strings.Cut(s.text, "\n")
	if len(first) > 100 {
		first = first[:100] + "…"
	}
	return fmt.Sprintf("%s:%d: %s", s.file, s.line, first)
}

// statements splits a shell block into commands: a command starts on a
// line at the margin and goes on over the lines that are indented or close
// a brace (a function body, a continued string); comments and blank lines
// at the margin separate commands.
func statements(b docBlock) []docStatement {
	var out []docStatement
	var cur *docStatement
	for i, line := range strings.Split(b.text, "\n") {
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
			cur = nil
		case cur != nil && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "}")):
			cur.text += "\n" + line
		default:
			out = append(out, docStatement{file: b.file, line: b.line + i, text: line})
			cur = &out[len(out)-1]
		}
	}
	for i := range out {
		lines := strings.Split(out[i].text, "\n")
		comment := shellComment(lines[len(lines)-1])
		if rest, ok := strings.CutPrefix(comment, "→"); ok {
			out[i].contains = strings.TrimSpace(rest)
		} else if slices.Contains(gateSteps, comment) {
			out[i].step = comment
		}
	}
	return out
}

// shellComment returns the comment a shell line ends with, trimmed: the
// text after the first "#" that is outside quotes and starts a word.
func shellComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[i+1:])
		}
	}
	return ""
}

// docAnswer is one JSON-RPC answer a doc's command printed.
type docAnswer struct {
	stmt docStatement
	raw  string
	ID   *int            `json:"id"`
	Res  json.RawMessage `json:"result"`
	Err  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// tool is the answer as a tools/call result.
func (a docAnswer) tool(t *testing.T) (isError bool, text string, structured json.RawMessage) {
	t.Helper()
	if a.Err != nil {
		t.Fatalf("%s: JSON-RPC error %d %q, want a tool result", a.stmt, a.Err.Code, a.Err.Message)
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(a.Res, &r); err != nil {
		t.Fatalf("%s: result %s: %v", a.stmt, a.Res, err)
	}
	if len(r.Content) > 0 {
		text = r.Content[0].Text
	}
	return r.IsError, text, r.Structured
}

// ok checks the answer is a successful tool result and decodes its
// structured content into v.
func (a docAnswer) ok(t *testing.T, v any) {
	t.Helper()
	isError, text, structured := a.tool(t)
	if isError {
		t.Fatalf("%s: tool error %q, want a result", a.stmt, text)
	}
	if err := json.Unmarshal(structured, v); err != nil {
		t.Fatalf("%s: structuredContent %s: %v", a.stmt, structured, err)
	}
}

// toolError checks the answer is an isError result whose text contains want.
func (a docAnswer) toolError(t *testing.T, want string) {
	t.Helper()
	isError, text, _ := a.tool(t)
	if !isError || !strings.Contains(text, want) {
		t.Errorf("%s: isError=%v %q, want an isError result saying %q", a.stmt, isError, text, want)
	}
}

// result decodes the answer's result into v.
func (a docAnswer) result(t *testing.T, v any) {
	t.Helper()
	if a.Err != nil {
		t.Fatalf("%s: JSON-RPC error %d %q, want a result", a.stmt, a.Err.Code, a.Err.Message)
	}
	if err := json.Unmarshal(a.Res, v); err != nil {
		t.Fatalf("%s: result %s: %v", a.stmt, a.Res, err)
	}
}

// docAnswers are one file's answers, by JSON-RPC id, in the order printed.
type docAnswers map[int][]docAnswer

// one returns the only answer to id.
func (as docAnswers) one(t *testing.T, id int) docAnswer {
	t.Helper()
	if len(as[id]) != 1 {
		t.Fatalf("id %d: %d answers, want 1", id, len(as[id]))
	}
	return as[id][0]
}

type docBooking struct {
	ID               string `json:"id"`
	ResourceID       string `json:"resource_id"`
	Start            string `json:"start"`
	Status           string `json:"status"`
	AlreadyCancelled bool   `json:"already_cancelled"`
}

// docsExpectations say what the answers to each doc's JSON-RPC ids must
// show, beyond the trailing comments: what the text around each command
// says it does.
var docsExpectations = map[string]map[int]func(t *testing.T, as docAnswers){
	"README.md": {
		1: func(t *testing.T, as docAnswers) { // the handshake
			var r struct {
				ProtocolVersion string                     `json:"protocolVersion"`
				Capabilities    map[string]json.RawMessage `json:"capabilities"`
				ServerInfo      struct{ Name string }      `json:"serverInfo"`
			}
			as.one(t, 1).result(t, &r)
			if r.ProtocolVersion != "2025-11-25" || r.Capabilities["tools"] == nil || r.ServerInfo.Name != "capgate" {
				t.Errorf("initialize: %+v, want protocol 2025-11-25, the tools capability and server capgate", r)
			}
		},
		2: func(t *testing.T, as docAnswers) { // alice's tools, and only those
			var r struct{ Tools []struct{ Name string } }
			as.one(t, 2).result(t, &r)
			var names []string
			for _, tool := range r.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"booking.list", "booking.cancel", "booking.create", "platform.search", "subscription.subscribe", "events.poll", "llm.ask"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list as alice: %q lacks %s", names, want)
				}
			}
			if slices.Contains(names, "booking.add_resource") {
				t.Errorf("tools/list as alice: %q shows booking.add_resource, which her role does not hold", names)
			}
		},
		3: func(t *testing.T, as docAnswers) { // her two bookings
			var r struct{ Bookings []docBooking }
			as.one(t, 3).ok(t, &r)
			if len(r.Bookings) != 2 {
				t.Fatalf("booking.list as alice: %+v, want her two seeded bookings", r.Bookings)
			}
			for _, b := range r.Bookings {
				if !strings.HasPrefix(b.ID, "bk_") || b.Status != "active" {
					t.Errorf("booking.list as alice: %+v, want an active bk_ booking", b)
				}
			}
		},
		10: func(t *testing.T, as docAnswers) { // the held cancellation, waiting
			var r struct {
				Status, Capability, Risk string
				UserID                   string `json:"user_id"`
			}
			as.one(t, 10).ok(t, &r)
			if r.Status != "pending" || r.Capability != "subscription.cancel" || r.Risk != "dangerous" || r.UserID != "alice" {
				t.Errorf("approvals.get before the decision: %+v, want alice's dangerous subscription.cancel pending", r)
			}
		},
		11: func(t *testing.T, as docAnswers) { // approved and run, once
			var r struct {
				Status  string
				Outcome *struct{ Kind string }
			}
			list := as[11]
			if len(list) == 0 {
				t.Fatal("no answer to id 11")
			}
			list[len(list)-1].ok(t, &r)
			if r.Status != "done" || r.Outcome == nil || r.Outcome.Kind != "result" {
				t.Errorf("approvals.get after the approval: %+v, want done with the call's result", r)
			}
		},
		4: func(t *testing.T, as docAnswers) { // cancel the first; again
			var listed struct{ Bookings []docBooking }
			as.one(t, 3).ok(t, &listed)
			if len(as[4]) != 2 {
				t.Fatalf("booking.cancel: %d answers, want the cancel and its repeat", len(as[4]))
			}
			var first, again docBooking
			as[4][0].ok(t, &first)
			as[4][1].ok(t, &again)
			if len(listed.Bookings) == 0 || first.ID != listed.Bookings[0].ID {
				t.Errorf("booking.cancel cancelled %s, want the first listed booking, %+v", first.ID, listed.Bookings)
			}
			if first.Status != "cancelled" || first.AlreadyCancelled {
				t.Errorf("booking.cancel: %+v, want cancelled now", first)
			}
			if again.ID != first.ID || again.Status != "cancelled" || !again.AlreadyCancelled {
				t.Errorf("booking.cancel again: %+v, want already_cancelled", again)
			}
		},
		8: func(t *testing.T, as docAnswers) { // the refusal shown as JSON
			if a := as.one(t, 8); a.Err == nil || !strings.Contains(a.Err.Message, "booking.read") {
				t.Errorf("%s: %s, want a refusal naming booking.read", a.stmt, a.raw)
			}
		},
	},
	"docs/clients.md": {
		20: func(t *testing.T, as docAnswers) { // a create and its replay
			if len(as[20]) != 2 {
				t.Fatalf("booking.create with a key: %d answers, want the create and its repeat", len(as[20]))
			}
			var b docBooking
			as[20][0].ok(t, &b)
			if b.ResourceID != "room-aurora" || b.Status != "active" || !strings.HasSuffix(b.Start, "T10:00:00Z") {
				t.Errorf("booking.create: %+v, want an active booking of room-aurora at 10:00", b)
			}
			if as[20][0].raw != as[20][1].raw {
				t.Errorf("the repeat with the same key answered\n%s\nnot byte for byte the first answer\n%s", as[20][1].raw, as[20][0].raw)
			}
		},
		21: func(t *testing.T, as docAnswers) { // the key reused for another call
			as.one(t, 21).toolError(t, "already used for other arguments")
		},
	},
	"docs/packs/booking.md": {
		30: func(t *testing.T, as docAnswers) {
			var r struct{ Resources []struct{ ID string } }
			as.one(t, 30).ok(t, &r)
			if len(r.Resources) < 30 || !slices.ContainsFunc(r.Resources, func(x struct{ ID string }) bool { return x.ID == "room-aurora" }) {
				t.Errorf("booking.resources: %d resources, want about forty with room-aurora", len(r.Resources))
			}
		},
		31: func(t *testing.T, as docAnswers) {
			var r struct {
				ResourceID string            `json:"resource_id"`
				FreeSlots  []json.RawMessage `json:"free_slots"`
			}
			as.one(t, 31).ok(t, &r)
			if r.ResourceID != "court-1" || len(r.FreeSlots) == 0 {
				t.Errorf("booking.availability of court-1 over two days: %+v, want free slots", r)
			}
		},
		32: func(t *testing.T, as docAnswers) {
			var r struct{ Bookings []docBooking }
			as.one(t, 32).ok(t, &r)
			if len(r.Bookings) == 0 {
				t.Errorf("booking.list as bob: none, want his seeded booking")
			}
			for _, b := range r.Bookings {
				if b.Status != "active" {
					t.Errorf("booking.list status active as bob: %+v", b)
				}
			}
		},
	},
	"docs/packs/subscription.md": {
		40: func(t *testing.T, as docAnswers) {
			var r struct{ Plans []struct{ ID string } }
			as.one(t, 40).ok(t, &r)
			if len(r.Plans) != 6 {
				t.Errorf("subscription.plans: %d plans, want the six of the demo", len(r.Plans))
			}
		},
		41: func(t *testing.T, as docAnswers) {
			var r struct {
				Subscriptions []struct{ Status string } `json:"subscriptions"`
			}
			as.one(t, 41).ok(t, &r)
			if len(r.Subscriptions) == 0 || slices.ContainsFunc(r.Subscriptions, func(s struct{ Status string }) bool { return s.Status != "active" }) {
				t.Errorf("subscription.list status active as alice: %+v, want her active seeded subscription", r.Subscriptions)
			}
		},
		42: func(t *testing.T, as docAnswers) {
			var r struct {
				PlanID string `json:"plan_id"`
				Status string `json:"status"`
			}
			as.one(t, 42).ok(t, &r)
			if r.PlanID != "student-monthly" || r.Status != "active" {
				t.Errorf("subscription.subscribe: %+v, want an active student-monthly subscription", r)
			}
		},
		43: func(t *testing.T, as docAnswers) {
			as.one(t, 43).toolError(t, "already have an active subscription to student-monthly")
		},
	},
	"docs/packs/search.md": {
		10: func(t *testing.T, as docAnswers) {
			if hits := docHits(t, as.one(t, 10)); !slices.ContainsFunc(hits, func(h string) bool { return strings.HasPrefix(h, "booking.resource/desk-") }) {
				t.Errorf("platform.search quiet standing desk: %q, want a desk", hits)
			}
		},
		11: func(t *testing.T, as docAnswers) {
			if rec := docRecord(t, as.one(t, 11)); !strings.Contains(string(rec), `"id":"room-aurora"`) {
				t.Errorf("platform.get room-aurora: record %s", rec)
			}
		},
		12: func(t *testing.T, as docAnswers) {
			if hits := docHits(t, as.one(t, 12)); !slices.Contains(hits, "booking.resource/room-aurora") {
				t.Errorf("platform.search auroa: %q, want room-aurora", hits)
			}
		},
		13: func(t *testing.T, as docAnswers) {
			if hits := docHits(t, as.one(t, 13)); !slices.Contains(hits, "subscription.plan/pro-yearly") {
				t.Errorf("platform.search pro ye: %q, want pro-yearly", hits)
			}
		},
		14: func(t *testing.T, as docAnswers) {
			var r struct {
				Contents []struct{ URI, MIMEType, Text string } `json:"contents"`
			}
			as.one(t, 14).result(t, &r)
			rec := docRecord(t, as.one(t, 11))
			if len(r.Contents) != 1 || r.Contents[0].URI != "capgate://booking.resource/room-aurora" || !jsonEqual([]byte(r.Contents[0].Text), rec) {
				t.Errorf("resources/read room-aurora: %+v, want platform.get's record %s", r.Contents, rec)
			}
		},
	},
	"docs/packs/events.md": {
		50: func(t *testing.T, as docAnswers) {
			if n, next := docEvents(t, as.one(t, 50)); n == 0 || next == 0 {
				t.Errorf("events.poll after 0: %d events, next %d, want events", n, next)
			}
		},
		51: func(t *testing.T, as docAnswers) {
			_, first := docEvents(t, as.one(t, 50))
			if _, next := docEvents(t, as.one(t, 51)); next < first {
				t.Errorf("events.poll after %d: next %d, want at least %d", first, next, first)
			}
		},
	},
	"docs/packs/llm.md": {
		60: func(t *testing.T, as docAnswers) { // nothing listens for the model
			as.one(t, 60).toolError(t, "is unreachable")
		},
	},
}

// docHits are platform.search's hits as entity/id.
func docHits(t *testing.T, a docAnswer) []string {
	t.Helper()
	var r struct{ Hits []struct{ Entity, ID string } }
	a.ok(t, &r)
	var out []string
	for _, h := range r.Hits {
		out = append(out, h.Entity+"/"+h.ID)
	}
	return out
}

// docRecord is platform.get's record.
func docRecord(t *testing.T, a docAnswer) json.RawMessage {
	t.Helper()
	var r struct{ Record json.RawMessage }
	a.ok(t, &r)
	return r.Record
}

// docEvents is how many events an events.poll answer holds, and its next.
func docEvents(t *testing.T, a docAnswer) (int, uint64) {
	t.Helper()
	var r struct {
		Events []json.RawMessage
		Next   uint64
	}
	a.ok(t, &r)
	return len(r.Events), r.Next
}

var (
	docPluginsMu sync.Mutex
	docPlugins   = map[string]string{} // plugins built here, not by binaries
)

// pluginBinary is the built binary of plugins/<name>: the one binaries
// built, or one built here for the demo config alone (the llm plugin).
func pluginBinary(t *testing.T, name string) string {
	t.Helper()
	if p, ok := binaries(t).plugins[name]; ok {
		return p
	}
	docPluginsMu.Lock()
	defer docPluginsMu.Unlock()
	if p, ok := docPlugins[name]; ok {
		return p
	}
	p := filepath.Join(binDir, "capgate-plugin-"+name)
	cmd := exec.Command("go", "build", "-o", p, "./plugins/"+name)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building plugins/%s for the demo config: %v\n%s", name, err, out)
	}
	docPlugins[name] = p
	return p
}

// demoPluginPath is how the demo config names each plugin's binary.
var demoPluginPath = regexp.MustCompile(`(?m)^\s+path:\s*\.\./bin/capgate-plugin-([a-z0-9_-]+)\s*$`)

// startDemoHost lays out a copy of the checkout as make run leaves it —
// config/capgate.yaml as it is, bin/capgate and bin/capgate-plugin-* — and
// runs `bin/capgate serve -c config/capgate.yaml` in it, as make run does,
// with CAPGATE_LISTEN on a free port. CAPGATE_LLM_BASE_URL points the llm
// plugin at a port where nothing listens, so llm.ask answers as the docs
// say it does without a model server. It returns the host and the
// directory.
func startDemoHost(t *testing.T) (*host, string) {
	t.Helper()
	root := repoRoot(t)
	bins := binaries(t)
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(root, "config", "capgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"config", "bin"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "capgate.yaml"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(from, to string) {
		if err := os.Link(from, to); err != nil {
			copyFile(t, from, to)
		}
	}
	link(bins.host, filepath.Join(dir, "bin", "capgate"))
	plugins := map[string]string{}
	for _, m := range demoPluginPath.FindAllStringSubmatch(string(cfg), -1) {
		plugins[m[1]] = filepath.Join(dir, "bin", "capgate-plugin-"+m[1])
		link(pluginBinary(t, m[1]), plugins[m[1]])
	}
	if len(plugins) == 0 {
		t.Fatalf("config/capgate.yaml names no plugin as ../bin/capgate-plugin-NAME")
	}

	port := freePort(t)
	logPath := filepath.Join(dir, "capgate.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(dir, "bin", "capgate"), "serve", "-c", "config/capgate.yaml")
	cmd.Dir = dir
	cmd.Env = append(hostEnv(),
		fmt.Sprintf("CAPGATE_LISTEN=127.0.0.1:%d", port),
		fmt.Sprintf("CAPGATE_LLM_BASE_URL=http://127.0.0.1:%d/v1", freePort(t)))
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting capgate: %v", err)
	}
	h := &host{t: t, cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), plugins: plugins, log: logPath, done: make(chan struct{})}
	go func() {
		h.werr = cmd.Wait()
		h.state = cmd.ProcessState
		close(h.done)
	}()
	t.Cleanup(h.stop)
	h.waitHealthy(false)
	return h, dir
}

// docsEndMarker ends each statement's output in the script's output: the
// statement's index and exit status.
var docsEndMarker = regexp.MustCompile(`\n@@docs-end (\d+) (\d+)@@\n`)

// TestDocsCommands runs every tested block of the README and docs/ against
// a host serving the demo config and checks what the docs say of each
// command's answer (see the comment at the top of this file).
func TestDocsCommands(t *testing.T) {
	needE2E(t)
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if inCI() {
				t.Fatalf("%s is needed to run the docs' commands: %v", tool, err)
			}
			t.Skipf("%s is needed to run the docs' commands: %v", tool, err)
		}
	}
	root := repoRoot(t)
	files := docFiles(t, root)
	blocks := map[string][]docBlock{}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := markedBlocks(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		blocks[f] = bs
	}
	for f := range docsExpectations {
		if len(blocks[f]) == 0 {
			t.Errorf("%s has no tested block, but docsExpectations expects answers from it", f)
		}
	}
	// The mcp function the other pages use is the README's own.
	var mcpFunc string
	for _, b := range blocks["README.md"] {
		if b.lang != "sh" {
			continue
		}
		for _, s := range statements(b) {
			if strings.HasPrefix(s.text, "mcp() {") {
				mcpFunc = s.text
			}
		}
	}
	if mcpFunc == "" {
		t.Fatal("README.md: no tested block defines the mcp function the walkthrough and the docs use")
	}

	h, dir := startDemoHost(t)
	addr := strings.TrimPrefix(h.base, "http://")
	for _, f := range files {
		if len(blocks[f]) == 0 {
			continue
		}
		t.Run(f, func(t *testing.T) {
			prelude := ""
			if f != "README.md" {
				prelude = mcpFunc + "\n"
			}
			answers := runDocBlocks(t, dir, addr, prelude, blocks[f])
			expect := docsExpectations[f]
			for id, list := range answers {
				for _, a := range list {
					if a.stmt.step == "" && expect[id] == nil {
						t.Errorf("%s: nothing checks the answer to id %d; add a check to docsExpectations or a trailing # comment: %s", a.stmt, id, a.raw)
					}
				}
			}
			for id, check := range expect {
				if len(answers[id]) == 0 {
					t.Errorf("%s: no command answered id %d, which docsExpectations checks", f, id)
					continue
				}
				t.Run(fmt.Sprintf("id %d", id), func(t *testing.T) { check(t, answers) })
			}
			for _, b := range blocks[f] {
				if b.lang == "json" {
					checkShownAnswer(t, b, answers)
				}
			}
		})
	}
}

// runDocBlocks runs the shell blocks of one file in one bash, statement by
// statement, in dir, and checks each statement's exit status and trailing
// claim. It returns the JSON-RPC answers printed, by id.
func runDocBlocks(t *testing.T, dir, addr, prelude string, blocks []docBlock) docAnswers {
	t.Helper()
	var stmts []docStatement
	for _, b := range blocks {
		if b.lang == "sh" {
			stmts = append(stmts, statements(b)...)
		}
	}
	var script strings.Builder
	script.WriteString(prelude)
	for i, s := range stmts {
		script.WriteString(s.text)
		fmt.Fprintf(&script, "\nprintf '\\n@@docs-end %d %%d@@\\n' \"$?\"\n", i)
	}
	text := strings.ReplaceAll(script.String(), docsAddress, addr)
	if strings.Contains(text, ":8080") {
		t.Fatalf("the commands still name port 8080 after %s was replaced, and could reach a server that is not this test's:\n%s", docsAddress, text)
	}
	if !strings.Contains(text, addr) {
		t.Fatalf("no command names %s, the address the docs use", docsAddress)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = dir
	// CAPGATE_LISTEN as the host has it, so `capgate health` finds it; and
	// no proxy for loopback, which curl would otherwise send through one.
	cmd.Env = append(hostEnv(), "CAPGATE_LISTEN="+addr, "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("stderr of the commands:\n%s", stderr.String())
	}
	if err != nil {
		t.Errorf("bash: %v", err)
	}

	out := stdout.String()
	marks := docsEndMarker.FindAllStringSubmatchIndex(out, -1)
	if len(marks) != len(stmts) {
		t.Fatalf("%d of %d commands finished; output:\n%s", len(marks), len(stmts), out)
	}
	answers := docAnswers{}
	from := 0
	for i, m := range marks {
		s := stmts[i]
		if n, _ := strconv.Atoi(out[m[2]:m[3]]); n != i {
			t.Fatalf("command %d's output ended as command %d's", i, n)
		}
		printed := strings.TrimSpace(out[from:m[0]])
		from = m[1]
		if rc := out[m[4]:m[5]]; rc != "0" {
			t.Errorf("%s: exit status %s; output: %s", s, rc, printed)
		}
		if s.contains != "" && !strings.Contains(printed, s.contains) {
			t.Errorf("%s: printed %q, which the docs say shows %q", s, printed, s.contains)
		}
		var got []docAnswer
		for _, line := range strings.Split(printed, "\n") {
			if !strings.HasPrefix(line, `{"jsonrpc"`) {
				continue
			}
			a := docAnswer{stmt: s, raw: line}
			if err := json.Unmarshal([]byte(line), &a); err != nil || a.ID == nil {
				t.Errorf("%s: an answer that is not JSON-RPC with an id: %s (%v)", s, line, err)
				continue
			}
			got = append(got, a)
			answers[*a.ID] = append(answers[*a.ID], a)
		}
		switch {
		case printed != "" && len(got) == 0 && s.contains == "":
			t.Errorf("%s: printed %q, and nothing says what it should show; add a trailing \"# → …\"", s, printed)
		case s.step != "":
			checkRefusal(t, s, got)
		}
	}
	return answers
}

// checkRefusal checks that a command whose trailing comment names a gate
// step got that step's refusal.
func checkRefusal(t *testing.T, s docStatement, got []docAnswer) {
	t.Helper()
	if len(got) != 1 {
		t.Errorf("%s: %d answers, want one refusal at %s", s, len(got), s.step)
		return
	}
	a := got[0]
	var data struct {
		Step string `json:"step"`
	}
	if a.Err == nil || a.Err.Code != -32003 || json.Unmarshal(a.Err.Data, &data) != nil || data.Step != s.step {
		t.Errorf("%s: %s, want JSON-RPC error -32003 with data.step %q", s, a.raw, s.step)
	}
}

// checkShownAnswer checks that an answer a doc shows as JSON is the one its
// commands got to the same id.
func checkShownAnswer(t *testing.T, b docBlock, answers docAnswers) {
	t.Helper()
	var shown struct {
		ID *int `json:"id"`
	}
	if err := json.Unmarshal([]byte(b.text), &shown); err != nil || shown.ID == nil {
		t.Errorf("%s:%d: a tested JSON block must be a JSON-RPC answer with an id (%v)", b.file, b.line, err)
		return
	}
	list := answers[*shown.ID]
	if len(list) == 0 {
		t.Errorf("%s:%d: shows the answer to id %d, which no command got", b.file, b.line, *shown.ID)
		return
	}
	for _, a := range list {
		if !jsonEqual([]byte(b.text), []byte(a.raw)) {
			t.Errorf("%s:%d: shows\n%s\nbut %s answered\n%s", b.file, b.line, b.text, a.stmt, a.raw)
		}
	}
}

// TestDocsLinks checks that every relative link in README.md and docs/
// points at a file that exists and, with a #fragment, at a heading of it.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	files := docFiles(t, root)
	if len(files) < 2 {
		t.Fatalf("docs/ holds no Markdown files: %q", files)
	}
	anchors := map[string]map[string]bool{} // by file path relative to root
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[rel] = headingAnchors(string(text))
		return anchors[rel]
	}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			target, fragment, _ := strings.Cut(l.target, "#")
			rel := f
			if target != "" {
				rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), filepath.FromSlash(target))))
				if rel == ".." || strings.HasPrefix(rel, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", f, l.line, l.target)
					continue
				}
				info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
				if err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", f, l.line, l.target, rel)
					continue
				}
				if info.IsDir() || !strings.HasSuffix(rel, ".md") {
					continue // a directory, or a source file (whose #L anchors are not checked)
				}
			}
			if fragment != "" && !anchorsOf(rel)[fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", f, l.line, l.target, rel, fragment)
			}
		}
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	mdLinkPattern = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	urlScheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	inlineCode    = regexp.MustCompile("`[^`]*`")
)

// markdownLinks returns the relative link targets of a Markdown text,
// outside fenced blocks and code spans.
func markdownLinks(text string) []mdLink {
	var out []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLinkPattern.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			if !urlScheme.MatchString(m[1]) {
				out = append(out, mdLink{line: i + 1, target: m[1]})
			}
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives a Markdown text's
// headings: lower case, spaces as hyphens, punctuation other than - and _
// dropped, and -1, -2, … after a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}
