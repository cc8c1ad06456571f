package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCallNoticesTypeScript is TestCallNoticesGoSDK with the official
// TypeScript SDK client (js/notices.mjs), which asks for progress with its
// onprogress option and sets a log level before a call, as the conformance
// suite does.
func TestCallNoticesTypeScript(t *testing.T) {
	stdout := runAgainstConformance(t, "notices.mjs")
	var got struct {
		Progress             [][2]float64 `json:"progress"`
		ProgressBeforeResult int          `json:"progressBeforeResult"`
		ProgressResultError  bool         `json:"progressResultIsError"`
		Logs                 []string     `json:"logs"`
		LoggingResultError   bool         `json:"loggingResultIsError"`
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("notices.mjs printed %s: %v", stdout, err)
	}
	if got.ProgressResultError || got.LoggingResultError {
		t.Fatalf("a fixture call failed: %s", stdout)
	}
	if !slices.Equal(got.Progress, [][2]float64{{0, 100}, {50, 100}, {100, 100}}) || got.ProgressBeforeResult != 3 {
		t.Fatalf("progress heard %v (%d before the result), want 0, 50, 100 of 100, all before it", got.Progress, got.ProgressBeforeResult)
	}
	if want := "info Tool execution started; info Tool processing data; info Tool execution completed"; strings.Join(got.Logs, "; ") != want {
		t.Fatalf("logs heard %q, want %q", got.Logs, want)
	}
}

// TestPluginAsksTypeScript: the official TypeScript SDK client, at the
// newest revision it speaks, answers a plugin's elicitation and sampling
// that capgate sends on the call's event stream, each answer a POST of its
// own; the plugin runs again with the answer through the gate. A client
// that declared no elicitation answers that it does not elicit, and the
// call says so.
func TestPluginAsksTypeScript(t *testing.T) {
	stdout := runAgainstConformance(t, "asks.mjs")
	type result struct {
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	}
	var got struct {
		ProtocolVersion            string   `json:"protocolVersion"`
		Asked                      []string `json:"asked"`
		Elicited, Sampled, Refused result
	}
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("asks.mjs printed %s: %v", stdout, err)
	}
	if got.ProtocolVersion == "" || got.ProtocolVersion >= "2026-07-28" {
		t.Fatalf("the client spoke %q; this test is of a revision that asks on the stream", got.ProtocolVersion)
	}
	if want := "elicit: Who are you?; sample: The capital of France?"; strings.Join(got.Asked, "; ") != want {
		t.Fatalf("the client was asked %q, want %q", got.Asked, want)
	}
	if got.Elicited.IsError || got.Elicited.Text != `User response: action=accept, content={"username":"ada","email":"ada@example.com"}` {
		t.Fatalf("test_elicitation answered %+v", got.Elicited)
	}
	if got.Sampled.IsError || got.Sampled.Text != "LLM response: Paris" {
		t.Fatalf("test_sampling answered %+v", got.Sampled)
	}
	if !got.Refused.IsError || !strings.Contains(got.Refused.Text, "needs the client to support elicitation, which this client does not do") {
		t.Fatalf("a client without elicitation: %+v", got.Refused)
	}
}

// runAgainstConformance runs a script of js/ as alice against a host
// serving the conformance plugin, and returns what it printed.
func runAgainstConformance(t *testing.T, script string) []byte {
	t.Helper()
	needE2E(t)
	nodeBin(t)
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withConformance(filepath.Join(dir, "capgate-plugin-conformance")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := runNode(t, ctx, script, "--url", h.url(), "--token", tokenAlice)
	if err != nil {
		t.Fatalf("%s: %v; stdout:\n%s", script, err, stdout)
	}
	return stdout
}
