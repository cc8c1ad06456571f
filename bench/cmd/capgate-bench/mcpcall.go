package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// protocolVersion is sent in the MCP-Protocol-Version header of every request.
const protocolVersion = "2025-06-18"

// benchToken is the bearer token of the bench user (alice). Servers without
// authentication receive it too, so every request carries the same bytes.
const benchToken = "bench-token-alice"

// greetName is the argument of every hello.greet call.
const greetName = "bench"

// greetTool is the trivial tool every server exposes.
const greetTool = "hello.greet"

// greetIn is hello.greet's input.
type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

// greetOut is hello.greet's output.
type greetOut struct {
	Greeting string `json:"greeting" jsonschema:"the greeting"`
}

// greet is hello.greet's behaviour, shared by the in-process servers.
func greet(in greetIn) greetOut { return greetOut{Greeting: "hello, " + in.Name} }

// headers returns the request headers every bench request carries.
func headers() map[string]string {
	return map[string]string{
		"Content-Type":         "application/json",
		"Accept":               "application/json, text/event-stream",
		"MCP-Protocol-Version": protocolVersion,
		"Authorization":        "Bearer " + benchToken,
	}
}

// rpcRequest is a JSON-RPC 2.0 request.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int    `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// toolCallBody returns the JSON-RPC body of a tools/call.
func toolCallBody(tool string, args any) ([]byte, error) {
	b, err := json.Marshal(rpcRequest{
		JSONRPC: "2.0",
		ID:      1,
		Method:  "tools/call",
		Params:  map[string]any{"name": tool, "arguments": args},
	})
	if err != nil {
		return nil, fmt.Errorf("encode tools/call %s: %w", tool, err)
	}
	return b, nil
}

// rpcResponse is a JSON-RPC 2.0 response.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// toolResult is the part of a tools/call result the bench looks at.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// payload returns the tool's output: the structured content when present,
// otherwise the first text content that is a JSON value.
func (r *toolResult) payload() (json.RawMessage, error) {
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		return r.StructuredContent, nil
	}
	for _, c := range r.Content {
		if c.Type == "text" && json.Valid([]byte(c.Text)) {
			return json.RawMessage(c.Text), nil
		}
	}
	return nil, errors.New("result has neither structuredContent nor JSON text content")
}

// client is the plain HTTP client used for setup and validation requests.
var client = &http.Client{Timeout: 10 * time.Second}

// post sends one JSON-RPC body to url and returns the decoded response.
func post(ctx context.Context, url string, body []byte) (*rpcResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range headers() {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read response from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("post %s: HTTP %d: %s", url, resp.StatusCode, snippet(raw))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
	case "text/event-stream":
		// Not expected (the servers are set to answer with JSON), but a
		// correct answer is still a correct answer: take the last event.
		raw = lastSSEData(raw)
	default:
		return nil, fmt.Errorf("post %s: unexpected Content-Type %q: %s", url, resp.Header.Get("Content-Type"), snippet(raw))
	}
	var out rpcResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode JSON-RPC response from %s: %w: %s", url, err, snippet(raw))
	}
	if out.JSONRPC != "2.0" || string(out.ID) != "1" {
		return nil, fmt.Errorf("post %s: not a JSON-RPC 2.0 response to id 1: %s", url, snippet(raw))
	}
	if out.Error != nil {
		return nil, fmt.Errorf("post %s: JSON-RPC error %d: %s", url, out.Error.Code, out.Error.Message)
	}
	return &out, nil
}

// callTool sends a tools/call and returns the tool's output, failing on a
// protocol error or a tool error.
func callTool(ctx context.Context, url, tool string, args any) (json.RawMessage, error) {
	body, err := toolCallBody(tool, args)
	if err != nil {
		return nil, err
	}
	resp, err := post(ctx, url, body)
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w", tool, err)
	}
	var res toolResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return nil, fmt.Errorf("tools/call %s: decode result: %w", tool, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("tools/call %s: tool error: %s", tool, snippet(resp.Result))
	}
	out, err := res.payload()
	if err != nil {
		return nil, fmt.Errorf("tools/call %s: %w: %s", tool, err, snippet(resp.Result))
	}
	return out, nil
}

// validateGreet checks that url answers hello.greet correctly.
func validateGreet(ctx context.Context, url string) error {
	out, err := callTool(ctx, url, greetTool, greetIn{Name: greetName})
	if err != nil {
		return err
	}
	var got greetOut
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("%s output %s: %w", greetTool, snippet(out), err)
	}
	if want := greet(greetIn{Name: greetName}).Greeting; got.Greeting != want {
		return fmt.Errorf("%s answered greeting %q, want %q", greetTool, got.Greeting, want)
	}
	return nil
}

// lastSSEData returns the data of the last event in an SSE stream.
func lastSSEData(raw []byte) []byte {
	var last []byte
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:"); ok {
			last = []byte(strings.TrimSpace(d))
		}
	}
	return last
}

// snippet shortens a body for an error message.
func snippet(b []byte) string {
	const max = 300
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
