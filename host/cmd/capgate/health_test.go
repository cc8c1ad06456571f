package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// healthServer is a real HTTP server answering /healthz with status and a
// body naming it, so a test sees which server a probe reached.
func healthServer(t *testing.T, name string, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(healthHandler(name, &status))
	t.Cleanup(srv.Close)
	return srv
}

func healthHandler(name string, status *int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(*status)
		if *status == http.StatusOK {
			fmt.Fprintf(w, `{"status":"ok","server":%q}`, name)
		} else {
			fmt.Fprintf(w, `{"status":"unavailable","server":%q,"plugins":[{"name":"booking","alive":false}]}`, name)
		}
	})
}

// unsetListen makes CAPGATE_LISTEN absent for the test (and restores it).
func unsetListen(t *testing.T) {
	t.Helper()
	t.Setenv("CAPGATE_LISTEN", "")
	os.Unsetenv("CAPGATE_LISTEN")
}

// writeConfig writes a minimal valid configuration listening on listen.
func writeConfig(t *testing.T, listen string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("listen: %q\n", listen)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedPort is a loopback address nothing listens on: taken, then freed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func runHealth(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"health"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHealth(t *testing.T) {
	unsetListen(t)
	status := http.StatusOK
	srv := httptest.NewServer(healthHandler("url", &status))
	defer srv.Close()

	if code, out, errs := runHealth("-url", srv.URL+"/healthz"); code != 0 || out != "{\"status\":\"ok\",\"server\":\"url\"}\n" {
		t.Fatalf("healthy: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	status = http.StatusServiceUnavailable
	if code, _, errs := runHealth("-url", srv.URL+"/healthz"); code != 1 || !strings.Contains(errs, "HTTP 503") ||
		!strings.Contains(errs, "booking") || !strings.Contains(errs, "from -url") {
		t.Fatalf("plugin dead: exit %d, stderr %q, want 1 naming HTTP 503, booking and -url", code, errs)
	}

	srv.Close()
	if code, _, errs := runHealth("-url", srv.URL+"/healthz"); code != 1 || !strings.Contains(errs, "connection refused") ||
		!strings.Contains(errs, srv.URL) {
		t.Fatalf("nothing listening: exit %d, stderr %q", code, errs)
	}
	if code, _, _ := runHealth("extra"); code != 2 {
		t.Fatalf("stray argument: exit %d, want 2", code)
	}
}

// Each source of the address, alone, reaches the host it names.
func TestHealthAddressSources(t *testing.T) {
	srv := healthServer(t, "target", http.StatusOK)
	addr := srv.Listener.Addr().String()

	t.Run("CAPGATE_LISTEN", func(t *testing.T) {
		t.Setenv("CAPGATE_LISTEN", addr)
		if code, out, errs := runHealth(); code != 0 || !strings.Contains(out, `"server":"target"`) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	t.Run("config listen", func(t *testing.T) {
		unsetListen(t)
		if code, out, errs := runHealth("-c", writeConfig(t, addr)); code != 0 || !strings.Contains(out, `"server":"target"`) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	t.Run("empty CAPGATE_LISTEN counts as unset, as in config.Load", func(t *testing.T) {
		t.Setenv("CAPGATE_LISTEN", "")
		if code, out, errs := runHealth("-c", writeConfig(t, addr)); code != 0 || !strings.Contains(out, `"server":"target"`) {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
	t.Run("default", func(t *testing.T) {
		// Probing the default for real would need 127.0.0.1:8080, which
		// a running demo on this machine may hold: check the resolution.
		unsetListen(t)
		target, from, err := healthTarget(false, "", "")
		if err != nil || target != "http://127.0.0.1:8080/healthz" || !strings.Contains(from, "default") {
			t.Fatalf("healthTarget() = %q, %q, %v; want the default http://127.0.0.1:8080/healthz", target, from, err)
		}
	})
}

// -url beats CAPGATE_LISTEN, which beats the file's listen (as it does in
// serve); the file decides only when neither is given.
func TestHealthPrecedence(t *testing.T) {
	byURL := healthServer(t, "url", http.StatusOK)
	byEnv := healthServer(t, "env", http.StatusOK)
	byFile := healthServer(t, "file", http.StatusOK)
	cfg := writeConfig(t, byFile.Listener.Addr().String())

	for _, tc := range []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"-url over CAPGATE_LISTEN and -c", byEnv.Listener.Addr().String(), []string{"-url", byURL.URL + "/healthz", "-c", cfg}, "url"},
		{"CAPGATE_LISTEN over -c", byEnv.Listener.Addr().String(), []string{"-c", cfg}, "env"},
		{"-c alone", "", []string{"-c", cfg}, "file"},
		// -url decides without reading the file, so a broken one is no matter.
		{"-url with an unreadable -c", "", []string{"-c", filepath.Join(t.TempDir(), "missing.yaml"), "-url", byURL.URL + "/healthz"}, "url"},
		// Nor is a broken file read when CAPGATE_LISTEN decides.
		{"CAPGATE_LISTEN with an unreadable -c", byEnv.Listener.Addr().String(), []string{"-c", filepath.Join(t.TempDir(), "missing.yaml")}, "env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == "" {
				unsetListen(t)
			} else {
				t.Setenv("CAPGATE_LISTEN", tc.env)
			}
			code, out, errs := runHealth(tc.args...)
			if code != 0 || !strings.Contains(out, fmt.Sprintf(`"server":%q`, tc.want)) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want server %q", code, out, errs, tc.want)
			}
		})
	}
}

// A wildcard listen address is probed on loopback of its family.
func TestHealthWildcardHosts(t *testing.T) {
	v4 := healthServer(t, "v4", http.StatusOK)
	_, port4, _ := net.SplitHostPort(v4.Listener.Addr().String())

	for _, listen := range []string{":" + port4, "0.0.0.0:" + port4} {
		t.Run(listen, func(t *testing.T) {
			t.Setenv("CAPGATE_LISTEN", listen)
			if code, out, errs := runHealth(); code != 0 || !strings.Contains(out, `"server":"v4"`) ||
				!strings.Contains(mustTarget(t), "http://127.0.0.1:"+port4+"/healthz") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
		t.Run("file "+listen, func(t *testing.T) {
			unsetListen(t)
			if code, out, errs := runHealth("-c", writeConfig(t, listen)); code != 0 || !strings.Contains(out, `"server":"v4"`) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}

	t.Run("[::]", func(t *testing.T) {
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			// No IPv6 loopback here: the resolution is still checked.
			t.Logf("no IPv6 loopback (%v): checking the URL only", err)
			t.Setenv("CAPGATE_LISTEN", "[::]:8080")
			if got := mustTarget(t); got != "http://[::1]:8080/healthz" {
				t.Fatalf("target = %q, want http://[::1]:8080/healthz", got)
			}
			return
		}
		status := http.StatusOK
		v6 := &httptest.Server{Listener: l, Config: &http.Server{Handler: healthHandler("v6", &status)}}
		v6.Start()
		defer v6.Close()
		_, port6, _ := net.SplitHostPort(l.Addr().String())
		t.Setenv("CAPGATE_LISTEN", "[::]:"+port6)
		if code, out, errs := runHealth(); code != 0 || !strings.Contains(out, `"server":"v6"`) ||
			mustTarget(t) != "http://[::1]:"+port6+"/healthz" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})
}

func mustTarget(t *testing.T) string {
	t.Helper()
	target, _, err := healthTarget(false, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return target
}

// A probe that cannot succeed exits 1 and says why and where the address
// came from.
func TestHealthFailuresNameTheSource(t *testing.T) {
	down := closedPort(t)
	sick := healthServer(t, "sick", http.StatusServiceUnavailable)
	sickAddr := sick.Listener.Addr().String()

	for _, tc := range []struct {
		name string
		env  string // "": unset
		args []string
		code int
		want []string
	}{
		{"unreachable, CAPGATE_LISTEN", down, nil, 1,
			[]string{"GET http://" + down + "/healthz", `CAPGATE_LISTEN="` + down + `"`, "connection refused"}},
		{"unreachable, config listen", "", []string{"-c", "CFG:" + down}, 1,
			[]string{"GET http://" + down + "/healthz", "listen in ", "connection refused"}},
		{"non-200, CAPGATE_LISTEN", sickAddr, nil, 1,
			[]string{"HTTP 503", "booking", `CAPGATE_LISTEN="` + sickAddr + `"`}},
		{"non-200, config listen", "", []string{"-c", "CFG:" + sickAddr}, 1,
			[]string{"HTTP 503", "booking", "listen in "}},
		{"CAPGATE_LISTEN not host:port", "localhost", nil, 1,
			[]string{`CAPGATE_LISTEN="localhost": must be host:port`}},
		{"CAPGATE_LISTEN port not a number", "127.0.0.1:http", nil, 1,
			[]string{`CAPGATE_LISTEN="127.0.0.1:http": port must be a number`}},
		{"CAPGATE_LISTEN port 0", "127.0.0.1:0", nil, 1,
			[]string{`CAPGATE_LISTEN="127.0.0.1:0": port 0 means a random port`, "-url"}},
		{"config listen port 0", "", []string{"-c", "CFG:0.0.0.0:0"}, 1,
			[]string{`listen "0.0.0.0:0" in `, "port 0 means a random port"}},
		{"config file missing", "", []string{"-c", "MISSING"}, 1,
			[]string{"reading the listen address from ", "missing.yaml"}},
		{"config file invalid listen", "", []string{"-c", "CFG:nonsense"}, 1,
			[]string{"reading the listen address from ", "listen", "must be host:port"}},
		{"-url not http", "", []string{"-url", "ftp://127.0.0.1/healthz"}, 1,
			[]string{`-url: "ftp://127.0.0.1/healthz" must be an http:// or https:// URL`}},
		{"-url empty", "", []string{"-url", ""}, 1, []string{"-url: is empty"}},
		{"-c empty", "", []string{"-c", ""}, 2, []string{"-c needs a configuration file"}},
		{"-timeout zero", "", []string{"-timeout", "0s", "-url", sick.URL}, 2, []string{"-timeout must be positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env == "" {
				unsetListen(t)
			} else {
				t.Setenv("CAPGATE_LISTEN", tc.env)
			}
			args := append([]string(nil), tc.args...)
			for i, a := range args {
				switch {
				case strings.HasPrefix(a, "CFG:"):
					args[i] = writeConfig(t, strings.TrimPrefix(a, "CFG:"))
				case a == "MISSING":
					args[i] = filepath.Join(t.TempDir(), "missing.yaml")
				}
			}
			code, out, errs := runHealth(args...)
			if code != tc.code || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and nothing on stdout", code, out, errs, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
		})
	}
}
