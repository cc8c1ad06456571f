package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// fuzzVersions are the MCP-Protocol-Version headers the fuzzer picks from.
var fuzzVersions = []string{"", Version20250326, Version20250618, Version20251125, Version20260728, "1999-01-01"}

// FuzzDecode feeds arbitrary bodies through the whole adapter. Whatever the
// bytes, it must not panic, and it must answer 202 with no body or with a
// JSON-RPC response (or, for a batch, an array of them) in valid UTF-8 JSON.
// It also checks the scanner against encoding/json on the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"platform.search","arguments":{"query":"x"}}}`), uint8(0))
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]`), uint8(1))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`), uint8(4))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"capgate://booking.resource/room%20a%2F2"}}`), uint8(2))
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"cursor":"o2"}}`), uint8(3))
	// Records are on, so resources go through the gate and the catalogue too.
	fx := newRecordsFixture(f, catalogue(), mcptest.WithRecords())
	f.Fuzz(func(t *testing.T, body []byte, sel uint8) {
		if got, want := validJSON(body), json.Valid(body); got != want {
			t.Fatalf("validJSON = %v, json.Valid = %v for %q", got, want, body)
		}
		ver := fuzzVersions[int(sel)%len(fuzzVersions)]
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/api/v1/mcp", bytes.NewReader(body))
		r.Header = rpc{}.headers(ver)
		if ver == Version20260728 {
			mirrorHeaders(r.Header, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)
		w := httptest.NewRecorder()
		fx.h.Serve(w, r, mcptest.Admin)

		out := w.Body.Bytes()
		if w.Code == http.StatusAccepted {
			if len(out) != 0 {
				t.Fatalf("202 with a body: %q", out)
			}
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("status %d with invalid JSON %q for input %q", w.Code, out, body)
		}
		if ct := w.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		if out[0] == '[' {
			var batch []json.RawMessage
			if err := json.Unmarshal(out, &batch); err != nil || len(batch) == 0 {
				t.Fatalf("bad batch response %q", out)
			}
			for _, m := range batch {
				checkResponse(t, m)
			}
			return
		}
		checkResponse(t, out)
	})
}

// checkResponse asserts that raw is one JSON-RPC 2.0 response.
func checkResponse(t *testing.T, raw []byte) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("response %q: %v", raw, err)
	}
	if m.JSONRPC != "2.0" {
		t.Fatalf("jsonrpc %q in %q", m.JSONRPC, raw)
	}
	if (m.Result == nil) == (m.Error == nil) {
		t.Fatalf("need exactly one of result and error: %q", raw)
	}
	if m.Error != nil && (m.Error.Code == nil || m.Error.Message == nil) {
		t.Fatalf("error without code or message: %q", raw)
	}
	if m.ID != nil && m.ID[0] != '"' && m.ID[0] != '-' && (m.ID[0] < '0' || m.ID[0] > '9') {
		t.Fatalf("id %s is neither string nor number", m.ID)
	}
}

// mirrorHeaders sets Mcp-Method and Mcp-Name as a 2026-07-28 client would,
// so fuzzing reaches past the header checks.
func mirrorHeaders(h http.Header, body []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil {
		return
	}
	h.Set("Mcp-Method", m.Method)
	switch {
	case m.Params.Name != "":
		h.Set("Mcp-Name", encodeName(m.Params.Name))
	case m.Params.URI != "":
		h.Set("Mcp-Name", encodeName(m.Params.URI))
	}
}
