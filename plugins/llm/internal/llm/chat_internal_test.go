package llm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The bound on an answer is exact: maxResponseBody bytes are read, one
// more is refused.
func TestChatClientResponseBound(t *testing.T) {
	body := func(n int) string {
		const head, tail = `{"model":"`, `","choices":[]}`
		return head + strings.Repeat("m", n-len(head)-len(tail)) + tail
	}
	var serve string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(serve))
	}))
	defer srv.Close()
	c := newChatClient(Connection{BaseURL: srv.URL}, nil)

	serve = body(maxResponseBody)
	if resp, err := c.create(context.Background(), []byte(`{}`)); err != nil || len(resp.Model) != maxResponseBody-len(`{"model":"","choices":[]}`) {
		t.Fatalf("an answer of exactly %d bytes: %v", maxResponseBody, err)
	}
	serve = body(maxResponseBody + 1)
	if _, err := c.create(context.Background(), []byte(`{}`)); !errors.Is(err, errTooLarge) {
		t.Fatalf("an answer of %d bytes: %v, want errTooLarge", maxResponseBody+1, err)
	}
}

func TestParseErrorBody(t *testing.T) {
	for _, tc := range []struct {
		body               string
		message, typ, code string
	}{
		{`{"error":{"message":"m","type":"t","code":"c","param":null}}`, "m", "t", "c"},
		{`{"error":{"message":"m","type":"exceed_context_size_error","code":400}}`, "m", "exceed_context_size_error", "400"},
		{`{"error":{"message":"m","code":null}}`, "m", "", ""},
		{`{"error":"plain"}`, "plain", "", ""},
		{`{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}`, "m", "BadRequestError", "400"},
		{`{"detail":"d"}`, "d", "", ""},
		{`{"detail":[{"loc":["body"],"msg":"field required"}]}`, "", "", ""},
		{`{"error":{}}`, "", "", ""},
		{`{"error":null,"message":"m"}`, "m", "", ""},
		{`{"error":["x"]}`, "", "", ""},
		{`<html>Bad Gateway</html>`, "", "", ""},
		{``, "", "", ""},
		{`"just a string"`, "", "", ""},
		{`{"error":{"message":"cut`, "", "", ""},
	} {
		e := parseErrorBody([]byte(tc.body))
		if e.Message != tc.message || e.Type != tc.typ || e.Code != tc.code {
			t.Errorf("%s: message %q type %q code %q; want %q %q %q", tc.body, e.Message, e.Type, e.Code, tc.message, tc.typ, tc.code)
		}
	}
}

// Every connection without a client of its own shares one, which has no
// Timeout of its own (the call's context bounds each request).
func TestSharedHTTPClient(t *testing.T) {
	a := newChatClient(Connection{BaseURL: "http://a/v1"}, nil)
	b := newChatClient(Connection{BaseURL: "http://b/v1"}, nil)
	if a.hc != b.hc || a.hc.Timeout != 0 {
		t.Errorf("clients %p and %p, timeout %s", a.hc, b.hc, a.hc.Timeout)
	}
	own := &http.Client{}
	if c := newChatClient(Connection{BaseURL: "http://c/v1"}, own); c.hc != own || c.url != "http://c/v1/chat/completions" {
		t.Errorf("client %p url %s", c.hc, c.url)
	}
}
