package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestHostGuard: the listener answers its address, localhost and the
// allowed names, and refuses a rebinding page's name with 421, for the
// metrics and the profiles alike.
func TestHostGuard(t *testing.T) {
	m, err := New(Sources{Version: "test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln, "Scrape.Internal") }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	get := func(path, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{addr, "localhost:" + port, "LOCALHOST", "capgate.localhost:" + port, "scrape.internal:" + port, "scrape.internal.", "[::1]:" + port, "10.1.2.3"} {
		if status, body := get(MetricsPath, host); status != http.StatusOK || !strings.Contains(body, "capgate_build_info") {
			t.Errorf("Host %q: %d; want the metrics", host, status)
		}
	}
	for _, path := range []string{MetricsPath, PprofPath, PprofPath + "goroutine?debug=2"} {
		for _, host := range []string{"rebind.attacker.example:" + port, "rebind.attacker.example", "127.0.0.1.attacker.example", "localhost.attacker.example"} {
			status, body := get(path, host)
			if status != http.StatusMisdirectedRequest || strings.Contains(body, "goroutine") || strings.Contains(body, "capgate_") {
				t.Errorf("GET %s for Host %q: %d %.80q; want 421 and nothing of the host", path, host, status, body)
			}
		}
	}
}
