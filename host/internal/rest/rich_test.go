package rest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

// TestRichResultsAreStructuredOnly: REST answers a call's structured
// result alone. Content blocks are MCP's rendering for people and models;
// a capability that answers blocks alone answers null here.
func TestRichResultsAreStructuredOnly(t *testing.T) {
	p := mcptest.New(mcptest.WithRich())
	h := New(p.Dispatcher, Options{Version: "test", Logger: slog.New(slog.DiscardHandler)})
	for name, want := range map[string]string{
		mcptest.RichBoth:   `{"n":1}`,
		mcptest.RichArray:  `[1,2,3]`,
		mcptest.RichBlocks: `null`,
	} {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+CapabilitiesPath+"/"+name, strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeCall(w, r, mcptest.Alice, name)
		if got := strings.TrimSpace(w.Body.String()); w.Code != http.StatusOK || got != want {
			t.Errorf("%s: %d %s, want 200 %s", name, w.Code, got, want)
		}
	}
}
