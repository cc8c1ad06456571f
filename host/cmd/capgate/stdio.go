package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/capgate/capgate/host/internal/applog"
	"github.com/capgate/capgate/host/internal/stdio"
)

const stdioUsage = `usage: capgate stdio [-url URL] [-check] [-cacert FILE] [-allow-insecure-http]
        [-timeout DURATION] [-max-message-bytes N] [-log-level LEVEL]

Speaks MCP over stdin and stdout to a local client (an editor, a desktop
assistant) and forwards every message to capgate's MCP endpoint with the
bearer token in CAPGATE_TOKEN. The URL is -url, else CAPGATE_URL, else
` + stdio.DefaultURL + `.
`

// stdioCmd runs the bridge: stdin and stdout carry JSON-RPC only, every
// word of its own goes to stderr. Exit 0 when stdin ends or on SIGINT or
// SIGTERM, 1 when stdin or stdout fails (or -check finds a problem), 2 for
// bad usage.
func stdioCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if flagged, ok := tokenFlag(args); ok {
		// Refused before anything else reads args, and never echoed: the
		// value is a secret that is now in the process list.
		fmt.Fprintf(stderr, "capgate stdio: %s is refused: a token on the command line is visible to every user of this machine (ps) and kept in shell histories and client logs; put it in %s (a client's server entry has an env block for it)\n", flagged, stdio.TokenEnv)
		return 2
	}
	fs, f := stdioFlags(stderr)
	rawURL, check, caFile, insecure, timeout, maxBytes, level := f.url, f.check, f.caFile, f.insecure, f.timeout, f.maxBytes, f.level
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "capgate stdio: %s\n%s", msg, stdioUsage)
		return 2
	}
	var lvl slog.Level
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", clipArg(fs.Arg(0))))
	case *timeout <= 0:
		return usage(fmt.Sprintf("-timeout must be positive, got %s", *timeout))
	case *maxBytes <= 0:
		return usage(fmt.Sprintf("-max-message-bytes must be positive, got %d", *maxBytes))
	case lvl.UnmarshalText([]byte(*level)) != nil:
		return usage(fmt.Sprintf("-log-level %q is not one of debug, info, warn, error", clipArg(*level)))
	}

	token, ok := os.LookupEnv(stdio.TokenEnv)
	if !ok || token == "" {
		fmt.Fprintf(stderr, "capgate stdio: %s is not set: put capgate's bearer token in it (in a client's config, the server entry's env block)\n", stdio.TokenEnv)
		return 2
	}
	target, from := *rawURL, "-url"
	if target == "" {
		if env := os.Getenv(stdio.URLEnv); env != "" {
			target, from = env, stdio.URLEnv
		} else {
			target, from = stdio.DefaultURL, "the default"
		}
	}
	var roots *x509.CertPool
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintf(stderr, "capgate stdio: -cacert: %v\n", err)
			return 2
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fmt.Fprintf(stderr, "capgate stdio: -cacert: %s holds no PEM certificate\n", *caFile)
			return 2
		}
	}
	// The log and the verdict line share stderr from two goroutines.
	stderr = &lockedWriter{w: stderr}
	log := applog.New(stderr, lvl, applog.Text)
	b, err := stdio.New(stdio.Options{
		URL: target, Token: token, AllowInsecureHTTP: *insecure, RootCAs: roots,
		MaxMessageBytes: *maxBytes, Timeout: *timeout, Version: version, Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "capgate stdio: %s: %v\n", from, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *check {
		s, err := b.Check(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "capgate stdio: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "ok: %s at %s takes the token\n", s, b.URL())
		return 0
	}

	log.Info("capgate stdio: forwarding MCP from stdin to capgate", slog.String("url", b.URL()), slog.String("url_from", from))
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		// The verdict on the URL and the token, while the client starts:
		// one plain line, the one to look for in a client's log.
		start := time.Now()
		s, err := b.Check(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			fmt.Fprintf(stderr, "capgate stdio: %v\n", err)
		default:
			log.Info("capgate stdio: "+s.String()+" takes the token", slog.String("url", b.URL()), slog.Duration("took", time.Since(start)))
		}
	}()
	// The verdict is said even when stdin ends first (a script's one
	// message): Check is bounded, and a signal ends it.
	defer func() { <-checked }()
	if err := b.Serve(ctx, stdin, stdout); err != nil {
		log.Error("capgate stdio stopped", slog.Any("err", err))
		return 1
	}
	return 0
}

// stdioOptions are the flags of capgate stdio.
type stdioOptions struct {
	url, caFile, level *string
	check, insecure    *bool
	timeout            *time.Duration
	maxBytes           *int64
}

// stdioFlags defines the flags of capgate stdio, writing complaints to
// stderr.
func stdioFlags(stderr io.Writer) (*flag.FlagSet, stdioOptions) {
	fs := flag.NewFlagSet("capgate stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, stdioUsage) }
	return fs, stdioOptions{
		url:      fs.String("url", "", "capgate's MCP endpoint (default: "+stdio.URLEnv+", else "+stdio.DefaultURL+")"),
		check:    fs.Bool("check", false, "check the URL and the token, say what answered, and exit: 0 when capgate takes the token, 1 when not"),
		caFile:   fs.String("cacert", "", "PEM file of the certificate authorities to trust for an https URL, instead of the system's"),
		insecure: fs.Bool("allow-insecure-http", false, "allow a plain http URL to another machine (the token would cross the network unencrypted)"),
		timeout:  fs.Duration("timeout", stdio.DefaultTimeout, "how long capgate may take to answer one message (or between two events of a stream)"),
		maxBytes: fs.Int64("max-message-bytes", stdio.DefaultMaxMessageBytes, "the largest message taken from the client: capgate's http.max_body_bytes"),
		level:    fs.String("log-level", "info", "debug, info, warn or error"),
	}
}

// tokenFlag finds a -token or --token argument (with or without a value)
// among args, before the flags are parsed: the flag package would echo
// the argument in its complaint.
func tokenFlag(args []string) (string, bool) {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && strings.EqualFold(name, "token") {
			return "-" + strings.ToLower(name), true
		}
	}
	return "", false
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
