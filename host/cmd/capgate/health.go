package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// health probes a running capgate's GET /healthz: exit 0 on 200, 1
// otherwise. The image is distroless (no shell, curl or wget), so this is
// what a container healthcheck runs.
func health(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capgate health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "the /healthz URL to probe")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: capgate health [-url URL] [-timeout DURATION]")
		return 2
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(*url)
	if err != nil {
		fmt.Fprintln(stderr, "capgate health:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "capgate health: %s: HTTP %d %s\n", *url, resp.StatusCode, msg)
		return 1
	}
	fmt.Fprintln(stdout, msg)
	return 0
}
