package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/host/internal/config"
)

const healthUsage = "usage: capgate health [-url URL] [-c FILE] [-timeout DURATION]"

// health probes a running capgate's GET /healthz: exit 0 on 200, 1
// otherwise. The image is distroless (no shell, curl or wget), so this is
// what a container healthcheck runs; it finds the host where serve would
// listen given the same environment and file (see healthTarget).
func health(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capgate health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rawURL := fs.String("url", "", "the /healthz URL to probe (default: from CAPGATE_LISTEN, else -c FILE's listen, else 127.0.0.1:8080)")
	path := fs.String("c", "", "configuration file whose listen address to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, healthUsage)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["c"] && *path == "" {
		fmt.Fprintln(stderr, "capgate health: -c needs a configuration file")
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "capgate health: -timeout must be positive, got %s\n", *timeout)
		return 2
	}
	target, from, err := healthTarget(set["url"], *rawURL, *path)
	if err != nil {
		fmt.Fprintln(stderr, "capgate health:", err)
		return 1
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(target)
	if err != nil {
		// *url.Error repeats the URL in Go's quoting; say it once, with
		// where the address came from.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		fmt.Fprintf(stderr, "capgate health: GET %s (%s): %v\n", target, from, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "capgate health: %s (%s): HTTP %d %s\n", target, from, resp.StatusCode, cell(msg, 4<<10))
		return 1
	}
	// What the endpoint answered reaches the terminal only scrubbed.
	fmt.Fprintln(stdout, cell(msg, 4<<10))
	return 0
}

// healthTarget picks the URL to probe and says where it came from, in the
// order an operator expects: -url; else CAPGATE_LISTEN, which beats the
// file's listen in serve too; else the listen of the file at path; else the
// built-in default. The file is read only when it decides the address, so a
// probe given the address needs no readable config.
func healthTarget(urlSet bool, rawURL, path string) (target, from string, err error) {
	if urlSet {
		if err := checkHealthURL(rawURL); err != nil {
			return "", "", fmt.Errorf("-url: %w", err)
		}
		return rawURL, "from -url", nil
	}
	env := config.EnvName("listen")
	// An empty variable counts as unset, as it does for config.Load.
	if addr := os.Getenv(env); addr != "" {
		u, err := listenURL(addr)
		if err != nil {
			return "", "", fmt.Errorf("%s=%q: %w", env, addr, err)
		}
		return u, fmt.Sprintf("address from %s=%q", env, addr), nil
	}
	if path != "" {
		cfg, err := config.Load(path)
		if err != nil {
			return "", "", fmt.Errorf("reading the listen address from %s: %w", path, err)
		}
		u, err := listenURL(cfg.Listen)
		if err != nil {
			return "", "", fmt.Errorf("listen %q in %s: %w", cfg.Listen, path, err)
		}
		return u, fmt.Sprintf("address from listen in %s", path), nil
	}
	addr := defaultListen()
	u, err := listenURL(addr)
	if err != nil {
		return "", "", fmt.Errorf("default listen %q: %w", addr, err)
	}
	return u, "default address " + addr, nil
}

// defaultListen is config's default listen, so the two never drift apart.
func defaultListen() string {
	for _, s := range config.Settings {
		if s.Key == "listen" {
			return s.Default
		}
	}
	return "127.0.0.1:8080"
}

// listenURL turns a listen address into the /healthz URL to probe. A
// wildcard host (":8080", "0.0.0.0:8080", "[::]:8080") binds every
// interface, loopback included, and is no address to connect to: it is
// probed on loopback of the same family.
func listenURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("must be host:port such as 127.0.0.1:8080")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil:
		return "", fmt.Errorf("port must be a number from 1 to 65535, got %q", port)
	case n == 0:
		return "", errors.New("port 0 means a random port, which cannot be found from here: pass -url")
	}
	if host == "" {
		host = "127.0.0.1"
	} else if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/healthz"}
	return u.String(), nil
}

func checkHealthURL(raw string) error {
	if raw == "" {
		return errors.New("is empty; give a URL such as http://127.0.0.1:8080/healthz")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%q is not a URL", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q must be an http:// or https:// URL", raw)
	case u.Host == "":
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}
