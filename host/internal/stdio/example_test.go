package stdio_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/stdio"
)

// A client's session through the bridge: what it writes to stdin, and
// what capgate answers on stdout. alice may not cancel bob's booking, and
// the refusal reaches her as capgate sent it, step and all.
func Example() {
	// capgate: its HTTP server, MCP adapter and gate over a small
	// in-memory platform, with one token, alice's.
	const token = "example-alice-token"
	p := mcptest.New()
	srv := httptest.NewServer(server.New(server.Options{
		Enabled:    true,
		Version:    "1.0.0",
		Dispatcher: p.Dispatcher,
		Auth: auth.New([]config.Token{{Label: "alice", SHA256: sha256.Sum256([]byte(token)),
			Role: mcptest.Alice.Role, Scope: mcptest.Alice.Scope, UserID: mcptest.Alice.UserID}}),
		Logger: slog.New(slog.DiscardHandler),
	}).Handler())
	defer srv.Close()

	b, err := stdio.New(stdio.Options{URL: srv.URL + server.MCPPath, Token: token, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	stdin := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"example","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"booking.cancel","arguments":{"id":"b-2"}}}
`)
	var stdout bytes.Buffer
	if err := b.Serve(context.Background(), stdin, &stdout); err != nil {
		fmt.Println(err)
	}
	fmt.Print(stdout.String())
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"logging":{},"tools":{"listChanged":false},"resources":{"subscribe":false,"listChanged":false}},"serverInfo":{"name":"capgate","version":"1.0.0"}}}
	// {"jsonrpc":"2.0","id":2,"error":{"code":-32003,"message":"forbidden: the target does not belong to this token's user","data":{"step":"ownership","reason":"the target does not belong to this token's user","capability":"booking.cancel"}}}
}
