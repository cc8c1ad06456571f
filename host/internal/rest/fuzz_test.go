package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/idempotency"
)

// FuzzParseKey: no header value panics the parser, and every key it
// gives back either the store accepts or the adapter refuses.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `abc`, `"a\"b"`, `"a\\b"`, `"`, `""`, `"a" x`, `"\x"`, " \"k\" ", "\"\xff\"", "\n\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, ok := parseKey(v)
		if !ok {
			return
		}
		hd := http.Header{IdempotencyKeyHeader: {v}}
		got, msg := idempotencyKey(hd)
		if (msg == "") != (idempotency.ValidateKey(key) == nil) || (msg == "" && got != key) {
			t.Fatalf("%q: parsed %q, header gives %q %q", v, key, got, msg)
		}
		// A quoted key keeps no control character. (What starts with one
		// is a bare key, which the store's rules judge, as over MCP; HTTP
		// trims only spaces and tabs.)
		if strings.HasPrefix(strings.Trim(v, " \t"), `"`) && strings.ContainsAny(key, "\x00\n") {
			t.Fatalf("%q: a control character survived: %q", v, key)
		}
	})
}

// FuzzCallBody: whatever the body and its media type, a call is answered
// with a status the adapter promises and, unless it succeeded, a problem
// that is JSON; nothing panics.
func FuzzCallBody(f *testing.F) {
	for _, s := range []struct{ ct, body string }{
		{"application/json", `{"query":"x"}`}, {"application/json", `{"query":""}`}, {"", ``},
		{"application/json", `[`}, {"text/plain", `{}`}, {"application/json", `{"query":"x","extra":1}`},
		{"application/json", `{"query":"` + strings.Repeat("é", 40) + `"}`}, {"application/json", "{\"query\":\"\xff\"}"},
		{"application/json", strings.Repeat("[", 40) + strings.Repeat("]", 40)}, {"application/json; charset=utf-8", `null`},
	} {
		f.Add(s.ct, s.body)
	}
	fx := newFixture(f, Options{MaxBodyBytes: 4096}, nil)
	allowed := map[int]bool{200: true, 400: true, 413: true, 415: true, 422: true}
	f.Fuzz(func(t *testing.T, ct, body string) {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+CapabilitiesPath+"/"+mcptest.Search, strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		fx.h.ServeCall(w, r, mcptest.Alice, mcptest.Search)
		if !allowed[w.Code] {
			t.Fatalf("status %d for %q %q: %s", w.Code, ct, body, w.Body)
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", w.Body)
		}
		if w.Code == 200 && !bytes.Equal(w.Body.Bytes(), []byte(`{"hits":[{"id":"b-1","title":"Dentist <3 & \"co\""}]}`)) {
			t.Fatalf("200 with %s", w.Body)
		}
	})
}
