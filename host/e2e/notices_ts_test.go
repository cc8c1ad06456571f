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
	needE2E(t)
	nodeBin(t)
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withConformance(filepath.Join(dir, "capgate-plugin-conformance")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := runNode(t, ctx, "notices.mjs", "--url", h.url(), "--token", tokenAlice)
	if err != nil {
		t.Fatalf("notices.mjs: %v; stdout:\n%s", err, stdout)
	}
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
