package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// inprocPath is the path the in-process servers serve MCP on.
const inprocPath = "/mcp"

// inprocServer is a server running inside this process on a loopback port.
type inprocServer struct {
	url string
	srv *http.Server
	err chan error
}

// startInproc serves h on a fresh loopback port.
func startInproc(name string, h http.Handler) (*inprocServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%s: listen on loopback: %w", name, err)
	}
	s := &inprocServer{
		url: "http://" + ln.Addr().String() + inprocPath,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		},
		err: make(chan error, 1),
	}
	go func() { s.err <- s.srv.Serve(ln) }()
	return s, nil
}

// stop shuts the server down and reports how it ended.
func (s *inprocServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down %s: %w", s.url, err)
	}
	if err := <-s.err; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.url, err)
	}
	return nil
}

// echoHandler is the floor: a bare echo route answering every POST with the
// fixed body of a correct hello.greet result, without reading the request.
func echoHandler() (http.Handler, error) {
	out, err := json.Marshal(greet(greetIn{Name: greetName}))
	if err != nil {
		return nil, fmt.Errorf("encode greeting: %w", err)
	}
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      1,
		"result": map[string]any{
			"content":           []map[string]string{{"type": "text", "text": string(out)}},
			"structuredContent": json.RawMessage(out),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("encode fixed response: %w", err)
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.POST(inprocPath, func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, body)
	})
	return e, nil
}

// goSDKHandler is the official Go SDK's stateless Streamable HTTP handler
// answering with JSON. A stateless go-sdk server gives every request a
// temporary session with default initialization parameters, so a tools/call
// is accepted without a prior initialize.
func goSDKHandler() http.Handler {
	s := gosdk.NewServer(&gosdk.Implementation{Name: "capgate-bench-go-sdk", Version: "1.0.0"}, nil)
	gosdk.AddTool(s, &gosdk.Tool{Name: greetTool, Description: "Greets someone by name."},
		func(_ context.Context, _ *gosdk.CallToolRequest, in greetIn) (*gosdk.CallToolResult, greetOut, error) {
			return nil, greet(in), nil
		})
	return gosdk.NewStreamableHTTPHandler(
		func(*http.Request) *gosdk.Server { return s },
		&gosdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true},
	)
}

// mcpGoHandler is mcp-go's Streamable HTTP server in stateless mode. It
// answers a request with application/json unless the handler sends
// notifications, which hello.greet does not. In stateless mode every request
// is served by an ephemeral session, so a tools/call is accepted without a
// prior initialize.
func mcpGoHandler() http.Handler {
	s := mcpgoserver.NewMCPServer("capgate-bench-mcp-go", "1.0.0", mcpgoserver.WithToolCapabilities(false))
	tool := mcpgo.NewTool(greetTool,
		mcpgo.WithDescription("Greets someone by name."),
		mcpgo.WithInputSchema[greetIn](),
		mcpgo.WithOutputSchema[greetOut](),
	)
	s.AddTool(tool, mcpgo.NewStructuredToolHandler(
		func(_ context.Context, _ mcpgo.CallToolRequest, in greetIn) (greetOut, error) {
			return greet(in), nil
		}))
	return mcpgoserver.NewStreamableHTTPServer(s,
		mcpgoserver.WithStateLess(true),
		mcpgoserver.WithDisableStreaming(true),
	)
}
