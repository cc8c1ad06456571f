package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// conformanceRun is one invocation of the MCP conformance suite's server
// scenarios. The suite runs every scenario at the wire version of the
// revision it is asked for: 2026-07-28 is stateless (server/discover and
// per-request _meta), the dated revisions before it use the initialize
// handshake, so each revision capgate serves is its own run.
type conformanceRun struct {
	name string
	args []string
}

var conformanceRuns = []conformanceRun{
	// Exactly what conformance to a revision requires, frozen at its
	// release, plus the suite's not-scored scenarios for that revision
	// (extensions and pending ones), which run and are judged here too.
	{"2026-07-28", []string{"--requirements", "2026-07-28"}},
	{"2025-11-25", []string{"--requirements", "2025-11-25"}},
	// 2025-06-18 has no requirement set: every scenario tagged for it.
	// (2025-03-26 has no server scenario beyond session lifecycle, which a
	// stateless server skips, so it gets no run of its own.)
	{"2025-06-18", []string{"--suite", "all", "--spec-version", "2025-06-18"}},
}

// expectedFailure excuses a scenario, or one check of it, that capgate does
// not pass, with the reason. The list is kept honest by the test: an entry
// that no longer fails, or that matched nothing in any run, fails it.
type expectedFailure struct {
	scenario string
	check    string   // one check id; empty excuses the whole scenario
	runs     []string // the runs it applies to; nil for every run
	reason   string
}

func (e expectedFailure) key() string {
	if e.check == "" {
		return e.scenario
	}
	return e.scenario + ":" + e.check
}

func (e expectedFailure) appliesTo(run string) bool {
	return e.runs == nil || slices.Contains(e.runs, run)
}

// Reasons shared by many entries.
const (
	fixtureTool = "fixture only: calls a tool of the suite's own reference server (test_*), " +
		"which capgate does not have; capgate serves its plugins' capabilities and nothing else"
	fixturePrompt = "fixture only: gets a prompt of the suite's reference server; " +
		"capgate serves no prompts"
	fixtureResource = "fixture only: reads a resource of the suite's reference server (test://…); " +
		"capgate serves no resources"
	fixtureInputRequired = "fixture only: calls the reference server's test_input_required_result_* tools " +
		"(SEP-2322 multi-round input); no capgate capability asks the client for input"
	tasksExtension = "extension (io.modelcontextprotocol/tasks, SEP-2663), not scored by the suite: " +
		"capgate does not offer tasks, and the scenario drives the reference server's own tools"
)

// conformanceExpectedFailures is every scenario or check capgate is known not
// to pass, and why. Everything the suite runs that is not listed here must
// pass.
var conformanceExpectedFailures = []expectedFailure{
	{scenario: "tools-call-simple-text", reason: fixtureTool},
	{scenario: "tools-call-image", reason: fixtureTool},
	{scenario: "tools-call-audio", reason: fixtureTool},
	{scenario: "tools-call-embedded-resource", reason: fixtureTool},
	{scenario: "tools-call-mixed-content", reason: fixtureTool},
	{scenario: "tools-call-with-logging", reason: fixtureTool},
	{scenario: "tools-call-error", reason: fixtureTool},
	{scenario: "tools-call-with-progress", reason: fixtureTool},
	{scenario: "tools-call-sampling", reason: fixtureTool},
	{scenario: "tools-call-elicitation", reason: fixtureTool},
	{scenario: "elicitation-sep1034-defaults", reason: fixtureTool},
	{scenario: "elicitation-sep1330-enums", reason: fixtureTool},
	{scenario: "json-schema-2020-12", reason: fixtureTool + " (json_schema_2020_12_tool)"},
	{scenario: "completion-complete", reason: "fixture only: completes an argument of the reference server's " +
		"prompt; capgate has no prompts or resource templates and so offers no completions"},
	{scenario: "resources-read-text", reason: fixtureResource},
	{scenario: "resources-read-binary", reason: fixtureResource},
	{scenario: "resources-templates-read", reason: fixtureResource},
	{scenario: "resources-subscribe", reason: fixtureResource + " and offers no subscriptions"},
	{scenario: "resources-unsubscribe", reason: fixtureResource + " and offers no subscriptions"},
	{scenario: "prompts-get-simple", reason: fixturePrompt},
	{scenario: "prompts-get-with-args", reason: fixturePrompt},
	{scenario: "prompts-get-embedded-resource", reason: fixturePrompt},
	{scenario: "prompts-get-with-image", reason: fixturePrompt},
	{scenario: "input-required-result-basic-elicitation", reason: fixtureInputRequired},
	{scenario: "input-required-result-basic-sampling", reason: fixtureInputRequired},
	{scenario: "input-required-result-basic-list-roots", reason: fixtureInputRequired},
	{scenario: "input-required-result-request-state", reason: fixtureInputRequired},
	{scenario: "input-required-result-multiple-input-requests", reason: fixtureInputRequired},
	{scenario: "input-required-result-multi-round", reason: fixtureInputRequired},
	{scenario: "input-required-result-missing-input-response", reason: fixtureInputRequired},
	{scenario: "input-required-result-non-tool-request", reason: fixtureInputRequired + " (and a prompt)"},
	{scenario: "input-required-result-result-type", reason: fixtureInputRequired},
	{scenario: "input-required-result-tampered-state", reason: fixtureInputRequired},
	{scenario: "input-required-result-capability-check", reason: fixtureInputRequired},
	{scenario: "input-required-result-ignore-extra-params", reason: fixtureInputRequired},
	{scenario: "server-stateless", check: "sep-2575-server-rejects-undeclared-capability",
		reason: "fixture only: needs the reference server's diagnostic tool test_missing_capability"},
	{scenario: "server-stateless", check: "sep-2575-missing-capability-http-400",
		reason: "fixture only: needs the reference server's diagnostic tool test_missing_capability"},
	{scenario: "server-stateless", check: "sep-2575-http-server-no-independent-requests-on-stream",
		reason: "fixture only: needs the reference server's diagnostic tool test_streaming_elicitation"},
	{scenario: "server-stateless", check: "sep-2575-server-no-log-without-loglevel",
		reason: "fixture only: needs the reference server's diagnostic tool test_logging_tool"},
	{scenario: "http-custom-header-server-validation", reason: "not testable on capgate (pending in the suite): " +
		"needs a tool with x-mcp-header parameter annotations (SEP-2243); no capgate capability maps a parameter to a header"},
	{scenario: "tasks-lifecycle", reason: tasksExtension},
	{scenario: "tasks-capability-negotiation", reason: tasksExtension},
	{scenario: "tasks-wire-fields", reason: tasksExtension},
	{scenario: "tasks-request-state-removal", reason: tasksExtension},
	{scenario: "tasks-mrtr-input", reason: tasksExtension},
	{scenario: "tasks-request-headers", reason: tasksExtension},
	{scenario: "tasks-dispatch-and-envelope", reason: tasksExtension},
	{scenario: "tasks-required-task-error", reason: tasksExtension},
	{scenario: "tasks-mrtr-composition", reason: tasksExtension},
}

// TestConformance runs the MCP conformance suite's server scenarios against
// the real capgate binary, through a proxy that adds a bearer token (the
// suite sends none). Every scenario must pass unless it is on the expected
// failure list, and every entry on the list must still fail.
func TestConformance(t *testing.T) {
	needE2E(t)
	node := nodeBin(t)
	h := startHost(t, "")
	proxy := authProxy(t, h, tokenAlice)
	target := proxy.URL + mcpPath

	matched := map[string]bool{}
	for _, run := range conformanceRuns {
		t.Run(run.name, func(t *testing.T) {
			results := runConformance(t, node, target, run)
			if len(results) == 0 {
				t.Fatal("the suite produced no scenario results")
			}
			problems, summary := judgeConformance(run.name, results, conformanceExpectedFailures, matched)
			t.Logf("conformance %s, %d scenarios:\n%s", run.name, len(results), summary)
			for _, p := range problems {
				t.Error(p)
			}
		})
	}
	for _, e := range conformanceExpectedFailures {
		if !matched[e.key()] {
			t.Errorf("expected failure %q failed in no run: it passes or no longer runs; remove it from the list", e.key())
		}
	}
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// failing reports whether the suite counts the check against the server:
// FAILURE, or WARNING (a SHOULD not met), as the suite's own baseline
// comparison does.
func (c check) failing() bool { return c.Status == "FAILURE" || c.Status == "WARNING" }

var resultDir = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// runConformance runs the suite once and returns each scenario's checks. The
// expected failures that apply to the run are handed to the suite as its
// baseline too, and its exit code must agree: 0.
func runConformance(t *testing.T, node, target string, run conformanceRun) map[string][]check {
	t.Helper()
	dir := t.TempDir()
	baseline := filepath.Join(dir, "baseline.yml")
	var yml strings.Builder
	yml.WriteString("server:\n")
	for _, e := range conformanceExpectedFailures {
		if e.appliesTo(run.name) {
			fmt.Fprintf(&yml, "  - %q\n", e.key())
		}
	}
	if err := os.WriteFile(baseline, []byte(yml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args := append([]string{filepath.Join(jsDir(t), "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		"server", "--url", target, "--expected-failures", baseline, "-o", out}, run.args...)
	stdout, err := runNode(t, ctx, args...)
	if ctx.Err() != nil {
		t.Fatalf("the suite did not finish within 10 minutes; output:\n%s", stdout)
	}
	if err != nil {
		t.Errorf("the suite exited with %v (unexpected failures or a stale baseline); its output:\n%s", err, stdout)
	}

	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatalf("reading the suite's results: %v; its output:\n%s", err, stdout)
	}
	results := map[string][]check{}
	for _, e := range entries {
		m := resultDir.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, e.Name(), "checks.json"))
		if err != nil {
			t.Errorf("scenario %s: %v", m[1], err)
			continue
		}
		var checks []check
		if err := json.Unmarshal(b, &checks); err != nil {
			t.Errorf("scenario %s: checks.json: %v", m[1], err)
			continue
		}
		results[m[1]] = checks
	}
	return results
}

// judgeConformance compares one run's results with the expected failures:
// a failing check must be excused by an entry for its scenario or for the
// check itself, and an entry must not pass. It returns the problems found
// and a one-line-per-scenario summary. matched collects the entries that
// excused a failure, for the staleness check across runs.
func judgeConformance(run string, results map[string][]check, expected []expectedFailure, matched map[string]bool) (problems []string, summary string) {
	whole := map[string]expectedFailure{}
	single := map[string]expectedFailure{}
	for _, e := range expected {
		if !e.appliesTo(run) {
			continue
		}
		if e.check == "" {
			whole[e.scenario] = e
		} else {
			single[e.key()] = e
		}
	}

	var sum strings.Builder
	for _, s := range slices.Sorted(maps.Keys(results)) {
		checks := results[s]
		var failed []check
		for _, c := range checks {
			if c.failing() {
				failed = append(failed, c)
			}
		}
		if e, ok := whole[s]; ok {
			if len(failed) == 0 {
				problems = append(problems, fmt.Sprintf("%s: expected to fail (%s) but passes: remove it from the expected failures", s, e.reason))
				fmt.Fprintf(&sum, "  PASS?  %s (listed as an expected failure)\n", s)
			} else {
				matched[e.key()] = true
				fmt.Fprintf(&sum, "  xfail  %s: %s\n", s, e.reason)
			}
			continue
		}
		verdict := "pass"
		for _, c := range failed {
			if e, ok := single[s+":"+c.ID]; ok {
				matched[e.key()] = true
				fmt.Fprintf(&sum, "  xfail  %s:%s: %s\n", s, c.ID, e.reason)
				continue
			}
			verdict = "FAIL"
			problems = append(problems, fmt.Sprintf("%s: check %s %s: %s", s, c.ID, c.Status, c.ErrorMessage))
		}
		for _, c := range checks {
			if e, ok := single[s+":"+c.ID]; ok && c.Status == "SUCCESS" {
				problems = append(problems, fmt.Sprintf("%s:%s: expected to fail (%s) but passes: remove it from the expected failures", s, c.ID, e.reason))
			}
		}
		fmt.Fprintf(&sum, "  %-5s  %s (%d checks)\n", verdict, s, len(checks))
	}
	return problems, sum.String()
}

// TestJudgeConformance pins down the verdicts TestConformance relies on,
// with results made up for the purpose: it must report what it is meant to
// catch, or the conformance run could pass whatever the server did.
func TestJudgeConformance(t *testing.T) {
	ok := check{ID: "a", Status: "SUCCESS"}
	info := check{ID: "i", Status: "INFO"}
	fail := check{ID: "b", Status: "FAILURE", ErrorMessage: "boom"}
	warn := check{ID: "w", Status: "WARNING", ErrorMessage: "should"}
	expected := []expectedFailure{
		{scenario: "fixture", reason: "r1"},
		{scenario: "mixed", check: "b", reason: "r2"},
		{scenario: "later", runs: []string{"new"}, reason: "r3"},
	}
	tests := []struct {
		name    string
		run     string
		results map[string][]check
		want    []string // substrings, one per problem, in order
		matched []string
	}{
		{"all pass", "old", map[string][]check{"x": {ok, info}}, nil, nil},
		{"unexpected failure", "old", map[string][]check{"x": {ok, fail}}, []string{"x: check b FAILURE: boom"}, nil},
		{"warning counts", "old", map[string][]check{"x": {warn}}, []string{"x: check w WARNING"}, nil},
		{"expected failure fails", "old", map[string][]check{"fixture": {ok, fail}}, nil, []string{"fixture"}},
		{"expected failure passes", "old", map[string][]check{"fixture": {ok}}, []string{"fixture: expected to fail (r1) but passes"}, nil},
		{"one check excused", "old", map[string][]check{"mixed": {ok, fail}}, nil, []string{"mixed:b"}},
		{"another check of it fails", "old", map[string][]check{"mixed": {fail, warn}}, []string{"mixed: check w WARNING"}, []string{"mixed:b"}},
		{"excused check passes", "old", map[string][]check{"mixed": {{ID: "b", Status: "SUCCESS"}}}, []string{"mixed:b: expected to fail (r2) but passes"}, nil},
		{"entry for another run", "old", map[string][]check{"later": {fail}}, []string{"later: check b FAILURE"}, nil},
		{"entry for this run", "new", map[string][]check{"later": {fail}}, nil, []string{"later"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			matched := map[string]bool{}
			problems, _ := judgeConformance(tc.run, tc.results, expected, matched)
			if len(problems) != len(tc.want) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], w)
				}
			}
			if got := slices.Sorted(maps.Keys(matched)); !slices.Equal(got, tc.matched) {
				t.Errorf("matched = %q, want %q", got, tc.matched)
			}
		})
	}
}
