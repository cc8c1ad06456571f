package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestCallNoticesGoSDK calls the conformance plugin's progress and logging
// fixtures, real plugin calls through the gate, with the official Go SDK
// client at every revision, and checks that the client heard the call's
// progress and log messages on the POST's event stream before its result.
func TestCallNoticesGoSDK(t *testing.T) {
	needE2E(t)
	dir := t.TempDir()
	h := startHostWith(t, dir, "{seed: demo}", withConformance(filepath.Join(dir, "capgate-plugin-conformance")))
	for _, ver := range protocolVersions {
		t.Run(ver, func(t *testing.T) {
			var mu sync.Mutex
			var progress []float64
			var logs []string
			client := mcp.NewClient(&mcp.Implementation{Name: "capgate-e2e-go", Version: "0.0.0"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					defer mu.Unlock()
					if r.Params.ProgressToken == "go-progress" && r.Params.Total == 100 {
						progress = append(progress, r.Params.Progress)
					}
				},
				LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
					mu.Lock()
					defer mu.Unlock()
					s, _ := r.Params.Data.(string)
					logs = append(logs, string(r.Params.Level)+" "+s)
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint: h.url(), HTTPClient: &http.Client{Transport: &bearerTransport{token: tokenAlice}}, DisableStandaloneSSE: true,
			}, &mcp.ClientSessionOptions{ProtocolVersion: ver})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{},
				Meta: mcp.Meta{"progressToken": "go-progress"}})
			if err != nil || res.IsError {
				t.Fatalf("test_tool_with_progress: %v %+v", err, res)
			}
			// The client hands notifications to their handlers apart from
			// the response: the last may be handled a moment after it.
			var got []float64
			eventually(func() bool {
				mu.Lock()
				defer mu.Unlock()
				got = slices.Clone(progress)
				return len(got) >= 3
			})
			if !slices.Equal(got, []float64{0, 50, 100}) {
				t.Fatalf("progress heard = %v, want 0, 50, 100 before the result", got)
			}

			// Up to 2025-11-25 a call's log messages come from info up
			// unless it names a level; 2026-07-28 sends none unless it does.
			meta := mcp.Meta{}
			if ver == "2026-07-28" {
				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging", Arguments: map[string]any{}})
				if err != nil || res.IsError {
					t.Fatalf("test_tool_with_logging without a level: %v %+v", err, res)
				}
				mu.Lock()
				n := len(logs)
				mu.Unlock()
				if n != 0 {
					t.Fatalf("2026-07-28 without a level: heard %d log messages", n)
				}
				meta["io.modelcontextprotocol/logLevel"] = "info"
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging", Arguments: map[string]any{}, Meta: meta})
			if err != nil || res.IsError {
				t.Fatalf("test_tool_with_logging: %v %+v", err, res)
			}
			var heard string
			eventually(func() bool {
				mu.Lock()
				defer mu.Unlock()
				heard = strings.Join(logs, "; ")
				return len(logs) >= 3
			})
			if want := "info Tool execution started; info Tool processing data; info Tool execution completed"; heard != want {
				t.Fatalf("logs heard = %q, want %q", heard, want)
			}
		})
	}
}

// eventually waits, briefly, for done.
func eventually(done func() bool) {
	for deadline := time.Now().Add(2 * time.Second); !done() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}
