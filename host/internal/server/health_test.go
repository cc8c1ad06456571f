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

// /healthz answers 503 naming the plugins that do not run: "restarting"
// while each is being restarted, "unavailable" once any failed for good;
// /livez answers 503 only for a failed one. Both read the plugins' state on
// every probe.
func TestHealthWithPluginsDown(t *testing.T) {
	since := time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	retry := since.Add(500 * time.Millisecond)
	var state atomic.Value
	state.Store(PluginRunning)
	var probes atomic.Int32
	f := newFixture(t, func(o *Options) {
		o.Health = func() []PluginHealth {
			probes.Add(1)
			return []PluginHealth{
				{Name: "notes", State: PluginRunning},
				{Name: "booking", State: state.Load().(string), Since: since, Restarts: 2, RetryAt: retry},
			}
		}
	})
	base := f.serve(t)
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Header
	}
	for _, path := range []string{HealthPath, LivePath} {
		if code, body, _ := get(path); code != 200 || body != `{"status":"ok"}` {
			t.Fatalf("all running: GET %s = %d %q", path, code, body)
		}
	}

	state.Store(PluginRestarting)
	code, body, hdr := get(HealthPath)
	want := `{"status":"restarting","plugins":[{"name":"booking","state":"restarting","since":"2025-03-04T04:06:07Z","restarts":2,"retry_at":"2025-03-04T04:06:07.5Z"}]}`
	if code != 503 || body != want || hdr.Get("Content-Type") != "application/json" || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("booking restarting: GET /healthz = %d %q (%s), want 503 %q", code, body, hdr, want)
	}
	if code, body, _ := get(LivePath); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("booking restarting: GET /livez = %d %q, want 200: a restart in progress is no reason to restart the replica", code, body)
	}

	state.Store(PluginFailed)
	want = `{"status":"unavailable","plugins":[{"name":"booking","state":"failed","since":"2025-03-04T04:06:07Z","restarts":2}]}`
	for _, path := range []string{HealthPath, LivePath} {
		if code, body, _ := get(path); code != 503 || body != want {
			t.Fatalf("booking failed: GET %s = %d %q, want 503 %q", path, code, body, want)
		}
	}
	if code, body, _ := getHealth(t, http.MethodHead, base); code != 503 || body != "" {
		t.Fatalf("booking failed: HEAD = %d %q", code, body)
	}
	if n := probes.Load(); n != 7 {
		t.Errorf("Health called %d times for 7 probes", n)
	}
}
