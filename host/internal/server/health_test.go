package server

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

func getHealth(t *testing.T, method, base string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, base+HealthPath, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// GET /healthz answers without a token, even with the endpoint disabled,
// and with no plugin health wired it always answers ok.
func TestHealth(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.Enabled = false })
	base := f.serve(t)
	code, body, hdr := getHealth(t, http.MethodGet, base)
	if code != 200 || body != `{"status":"ok"}` || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET = %d %q (%s)", code, body, hdr.Get("Content-Type"))
	}
	if code, body, _ := getHealth(t, http.MethodHead, base); code != 200 || body != "" {
		t.Fatalf("HEAD = %d %q", code, body)
	}
}

// /healthz answers 503 naming the dead plugins once any plugin has died,
// and reads the plugins' state on every probe.
func TestHealthWithDeadPlugin(t *testing.T) {
	diedAt := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	var dead atomic.Bool
	var probes atomic.Int32
	f := newFixture(t, func(o *Options) {
		o.Health = func() []PluginHealth {
			probes.Add(1)
			ps := []PluginHealth{{Name: "notes", Alive: true}, {Name: "booking", Alive: true}}
			if dead.Load() {
				ps[1] = PluginHealth{Name: "booking", DiedAt: diedAt}
			}
			return ps
		}
	})
	base := f.serve(t)
	if code, body, _ := getHealth(t, http.MethodGet, base); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("all alive: GET = %d %q", code, body)
	}
	dead.Store(true)
	code, body, hdr := getHealth(t, http.MethodGet, base)
	want := `{"status":"unavailable","plugins":[{"name":"booking","alive":false,"died_at":"2025-03-04T04:06:07Z"}]}`
	if code != 503 || body != want || hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("booking dead: GET = %d %q (%s), want 503 %q", code, body, hdr, want)
	}
	if code, body, _ := getHealth(t, http.MethodHead, base); code != 503 || body != "" {
		t.Fatalf("booking dead: HEAD = %d %q", code, body)
	}
	if n := probes.Load(); n != 3 {
		t.Errorf("Health called %d times for 3 probes", n)
	}
}
