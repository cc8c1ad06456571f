package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		if status == http.StatusOK {
			w.Write([]byte(`{"status":"ok"}`))
		} else {
			w.Write([]byte(`{"status":"unavailable","plugins":[{"name":"booking","alive":false}]}`))
		}
	}))
	defer srv.Close()

	var stdout, stderr bytes.Buffer
	if code := run([]string{"health", "-url", srv.URL + "/healthz"}, &stdout, &stderr); code != 0 || stdout.String() != "{\"status\":\"ok\"}\n" {
		t.Fatalf("healthy: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}

	status = http.StatusServiceUnavailable
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"health", "-url", srv.URL + "/healthz"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "HTTP 503") || !strings.Contains(stderr.String(), "booking") {
		t.Fatalf("plugin dead: exit %d, stderr %q, want 1 naming HTTP 503 and booking", code, stderr.String())
	}

	srv.Close()
	stderr.Reset()
	if code := run([]string{"health", "-url", srv.URL + "/healthz"}, &stdout, &stderr); code != 1 || stderr.Len() == 0 {
		t.Fatalf("nothing listening: exit %d, stderr %q", code, stderr.String())
	}
	if code := run([]string{"health", "extra"}, &stdout, &stderr); code != 2 {
		t.Fatalf("stray argument: exit %d, want 2", code)
	}
}
