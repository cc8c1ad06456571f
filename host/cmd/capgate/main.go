// Command capgate is the capgate host: a permission-gated MCP server whose
// capabilities come from plugins.
//
//	capgate serve -c FILE       run the host
//	capgate validate -c FILE    check a configuration file
//	capgate search reindex -c FILE
//	                            rebuild the search index from the providers
//	capgate token new           print a fresh bearer token and its token_sha256
//	capgate actions off|on|status -c FILE
//	                            throw, release or show the kill switch
//	capgate audit -c FILE [-since T] [-json] [-follow] ...
//	                            print or follow the audit trail
//	capgate approvals list|show|approve|reject ... -c FILE
//	                            list and decide the calls held for a human
//	capgate capabilities -c FILE (-token-label LABEL | -role R -scope S [-user U]) [-json]
//	                            what a token may call, and what refuses the rest
//	capgate health [-url URL] [-c FILE]
//	                            probe a running host's /healthz (exit 0 on 200)
//	capgate stdio [-url URL]    MCP over stdin/stdout for local clients,
//	                            forwarded to capgate with CAPGATE_TOKEN
//	capgate version             print the build version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/applog"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/nodump"
	"github.com/capgate/capgate/sdk/platform"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

const usage = `capgate is a permission-gated MCP server for your platform.

Usage:
  capgate serve -c FILE       run the host with the configuration in FILE
  capgate validate -c FILE    check FILE and list every problem in it
  capgate search reindex -c FILE
                              rebuild the search index from the catalogue
                              providers (stop the server on that data_dir first)
  capgate token new           print a fresh bearer token and its token_sha256
  capgate actions off|on|status -c FILE
                              stop every action on every replica sharing
                              FILE's database (reads keep working), start
                              them again, or show the switch
  capgate audit -c FILE [-since T] [-until T] [-token LABEL] [-user ID]
        [-capability NAME] [-decision admitted|refused] [-step STEP]
        [-request ID] [-approval ID] [-limit N] [-json] [-follow]
                              print the newest audit records (-limit, default
                              50) that match, or -follow them as they arrive;
                              T is RFC 3339 or a time ago (30m, 1h, 7d)
  capgate approvals list -c FILE [-status S] [-user ID] [-limit N] [-json]
  capgate approvals show ID -c FILE [-json]
  capgate approvals approve|reject ID -c FILE [-by USER] [-reason TEXT]
                              list the calls held for a human, show one, or
                              decide it; a running host runs an approved call
                              once. -by (default: your login) may not be the
                              user who asked
  capgate capabilities -c FILE (-token-label LABEL | -role R -scope S [-user ID])
        [-json]               what the token (or a principal of role R at
                              scope S) may call, and for every other
                              capability the gate's step refusing it and why;
                              with neither flag, the token in CAPGATE_TOKEN
  capgate health [-url URL] [-c FILE]
                              probe a running host's /healthz: exit 0 on 200,
                              1 when a plugin died or nothing answers; it
                              probes -url, else CAPGATE_LISTEN, else FILE's
                              listen, else 127.0.0.1:8080 (a wildcard host
                              such as :8080 is probed on loopback)
  capgate stdio [-url URL] [-check]
                              speak MCP over stdin and stdout to a local
                              client (an editor, a desktop assistant) and
                              forward it to capgate's MCP endpoint (-url,
                              else CAPGATE_URL, else 127.0.0.1:8080) with the
                              token in CAPGATE_TOKEN; -check checks the URL
                              and the token and exits
  capgate version             print the build version
`

func main() {
	// The environment holds the plugins' secrets and the host's keys: no
	// plugin, nor any other process of this user, may read it from /proc.
	if err := nodump.Set(); err != nil {
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("other processes of this user can read capgate's environment", "err", err)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "token":
		return token(args[1:], stdout, stderr)
	case "search":
		return search(args[1:], stdout, stderr)
	case "health":
		return health(args[1:], stdout, stderr)
	case "actions":
		return actions(args[1:], stdout, stderr)
	case "audit":
		return readAudit(args[1:], stdout, stderr)
	case "approvals":
		return approvalsCmd(args[1:], stdout, stderr)
	case "capabilities":
		return capabilities(args[1:], stdout, stderr)
	case "stdio":
		return stdioCmd(args[1:], os.Stdin, stdout, stderr)
	case "version", "-v", "--version":
		fmt.Fprintln(stdout, "capgate", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "capgate: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func configFlag(name string, args []string, stderr io.Writer) (string, bool) {
	fs := flag.NewFlagSet("capgate "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "", "configuration file (YAML)")
	if err := fs.Parse(args); err != nil {
		return "", false
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "usage: capgate %s -c FILE\n", name)
		return "", false
	}
	return *path, true
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func token(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "new" {
		fmt.Fprintln(stderr, "usage: capgate token new")
		return 2
	}
	tok, sum, err := auth.NewToken()
	if err != nil {
		fmt.Fprintln(stderr, "capgate: generate token:", err)
		return 1
	}
	fmt.Fprintf(stdout, "token: %s\n\n# For the config file (keep the token itself out of it):\n- token_sha256: %s\n  role: CHANGE-ME\n  scope: read\n", tok, sum)
	return 0
}

// search runs the search subcommands; reindex is the only one.
func search(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "reindex" {
		fmt.Fprintln(stderr, "usage: capgate search reindex -c FILE")
		return 2
	}
	path, cfg, log, code := loadConfig("search reindex", args[1:], stderr)
	if cfg == nil {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Starting the plugins with Rebuild makes the search plugin empty its
	// index and sync it again from every provider before New returns.
	a, err := app.New(ctx, cfg, app.Options{Version: version, Logger: log, Rebuild: true})
	if err != nil {
		log.Error("capgate cannot rebuild the search index", "err", err)
		return 1
	}
	defer a.Close()
	plugin, ok := a.Provider(platform.SearchName)
	if !ok {
		fmt.Fprintf(stderr, "capgate: no plugin in %s provides %s: add the search plugin to plugins\n", path, platform.SearchName)
		return 1
	}
	fmt.Fprintf(stdout, "search index of plugin %q rebuilt\n", plugin)
	return 0
}

// loadConfig reads the -c flag of command and loads the file, with a logger
// as it configures. A nil cfg comes with the exit code: 2 for bad usage, 1
// for a bad file (the problems are written to stderr).
func loadConfig(command string, args []string, stderr io.Writer) (path string, cfg *config.Config, log *slog.Logger, code int) {
	path, ok := configFlag(command, args, stderr)
	if !ok {
		return "", nil, nil, 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return "", nil, nil, 1
	}
	return path, cfg, newLogger(cfg.Log, stderr), 0
}

func serve(args []string, stderr io.Writer) int {
	_, cfg, log, code := loadConfig("serve", args, stderr)
	if cfg == nil {
		return code
	}
	slog.SetDefault(log)
	tuneGC()

	// The first SIGINT/SIGTERM starts a graceful drain; a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hangups := takeHangups(log)
	defer hangups.stop()

	// The port first: taken, it fails now, before any plugin runs.
	ln, err := app.Listen(cfg)
	if err != nil {
		log.Error("capgate cannot start", "err", err)
		return 1
	}
	a, err := app.New(ctx, cfg, app.Options{Version: version, Logger: log})
	if err != nil {
		_ = ln.Close()
		log.Error("capgate cannot start", "err", err)
		return 1
	}
	hangups.reloads(a)
	go func() {
		<-ctx.Done()
		stop() // restore default signal handling: a second signal terminates
	}()
	if err := a.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("capgate stopped with an error", "err", err)
		return 1
	}
	return 0
}

// hangups takes SIGHUP, which would otherwise end the host without a word.
// Until the host is built it is logged and ignored; from then on it
// reloads the configuration file (App.Reload).
type hangups struct {
	log  *slog.Logger
	sig  chan os.Signal
	app  chan *app.App
	done chan struct{}
}

func takeHangups(log *slog.Logger) *hangups {
	h := &hangups{log: log, sig: make(chan os.Signal, 1), app: make(chan *app.App, 1), done: make(chan struct{})}
	signal.Notify(h.sig, syscall.SIGHUP)
	go func() {
		var a *app.App
		for {
			select {
			case a = <-h.app:
			case <-h.sig:
				if a == nil {
					log.Warn("SIGHUP received while starting: ignored; send it again once capgate is serving to reload the configuration")
					continue
				}
				log.Info("SIGHUP received: reloading the configuration")
				_, _ = a.Reload() // Reload logs what it applied, or every problem
			case <-h.done:
				return
			}
		}
	}()
	return h
}

// reloads makes SIGHUP reload a's configuration.
func (h *hangups) reloads(a *app.App) { h.app <- a }

func (h *hangups) stop() {
	signal.Stop(h.sig)
	close(h.done)
}

// tuneGC trades memory for CPU unless the operator chose (GOGC set): the
// host's live heap is a few megabytes, so the default target makes it
// collect thousands of times a second under load. Measured on 2 cores, 400
// cut the host's CPU per call by roughly a fifth.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// newLogger is the host's logger as the config sets it, every attribute
// bounded (applog).
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	return applog.New(w, c.Level, applog.Format(c.Format))
}
