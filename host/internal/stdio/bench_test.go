package stdio

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkBridgeCall is one tools/call through the bridge, from the line
// written to its stdin to the answer read from its stdout, against a
// capgate server in this process; BenchmarkDirectCall is the same call
// posted straight to it. The difference is what the bridge costs a call.
func BenchmarkBridgeCall(b *testing.B) {
	c := startCapgate(b, nil)
	s := bridge(b, Options{URL: c.url, Token: userToken, Logger: slog.New(slog.DiscardHandler)})
	s.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`)
	b.ResetTimer()
	for i := range b.N {
		if got := s.roundTrip(legacyCall(i+1, capEcho, `{"q":"aurora"}`)); !strings.Contains(got, `"isError":false`) {
			b.Fatalf("answer %s", got)
		}
	}
}

func BenchmarkDirectCall(b *testing.B) {
	c := startCapgate(b, nil)
	client := &http.Client{}
	b.ResetTimer()
	for i := range b.N {
		req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(legacyCall(i+1, capEcho, `{"q":"aurora"}`)))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+userToken)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatal("status " + strconv.Itoa(resp.StatusCode))
		}
	}
}
