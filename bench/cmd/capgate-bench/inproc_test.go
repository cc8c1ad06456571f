package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Each in-process server answers hello.greet without a prior initialize,
// as the bench sends it.
func TestInprocServersAnswerGreet(t *testing.T) {
	echoH, err := echoHandler()
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{keyEcho: echoH, keyGoSDK: goSDKHandler(), keyMCPGo: mcpGoHandler()} {
		t.Run(name, func(t *testing.T) {
			s, err := startInproc(name, h)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.stop(); err != nil {
					t.Error(err)
				}
			}()
			if err := validateGreet(context.Background(), s.url); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A server that answers fast but wrongly fails validation.
func TestValidateGreetRejectsWrongAnswers(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		ctype  string
		body   string
		want   string
	}{
		"http error":     {http.StatusUnauthorized, "application/json", `{}`, "HTTP 401"},
		"rpc error":      {200, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}`, "JSON-RPC error -32601"},
		"tool error":     {200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"denied"}],"isError":true}}`, "tool error"},
		"wrong greeting": {200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"greeting":"hi"}}}`, `greeting "hi"`},
		"no output":      {200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`, "neither structuredContent"},
		"wrong id":       {200, "application/json", `{"jsonrpc":"2.0","id":2,"result":{}}`, "not a JSON-RPC 2.0 response to id 1"},
		"content type":   {200, "text/plain", `hello, bench`, "unexpected Content-Type"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			err := validateGreet(context.Background(), srv.URL)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A correct answer sent as an SSE event, or as JSON text content, passes.
func TestValidateGreetAcceptsEquivalentForms(t *testing.T) {
	for name, tc := range map[string]struct{ ctype, body string }{
		"sse":       {"text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"structuredContent\":{\"greeting\":\"hello, bench\"}}}\n\n"},
		"text json": {"application/json", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"greeting\":\"hello, bench\"}"}]}}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+benchToken || r.Header.Get("MCP-Protocol-Version") != protocolVersion {
					http.Error(w, "missing headers", http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", tc.ctype)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			if err := validateGreet(context.Background(), srv.URL); err != nil {
				t.Fatal(err)
			}
		})
	}
}
