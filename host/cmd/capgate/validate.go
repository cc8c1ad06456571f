package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/applog"
	"github.com/capgate/capgate/host/internal/config"
)

// validate checks a configuration file for everything serve would refuse
// and lists every problem, each named by its key path: the file itself,
// the plugin binaries, each plugin's config block (checked by the plugin,
// which opens none of its stores), and roles, packs and
// disabled_capabilities against what the plugins declare. It serves
// nothing and writes nothing to the data_dir.
func validate(args []string, stdout, stderr io.Writer) int {
	path, ok := configFlag("validate", args, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for i, p := range cfg.Plugins {
		for _, name := range p.EnvMissing {
			fmt.Fprintf(stderr, "warning: plugins[%d].env: %s is not set here, so plugin %q would start without it\n", i, name, p.Name)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The plugins' own records matter only when something goes wrong.
	log := applog.New(stderr, max(cfg.Log.Level, slog.LevelWarn), applog.Format(cfg.Log.Format))
	v, err := app.Validate(ctx, cfg, app.Options{Version: version, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "capgate:", err)
		return 1
	}
	for _, w := range v.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if len(v.Problems) > 0 {
		for _, p := range v.Problems {
			fmt.Fprintln(stderr, p)
		}
		fmt.Fprintf(stderr, "%s: %s\n", path, count(len(v.Problems), "problem"))
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok (%s, %s)\n", path, count(len(cfg.Tokens), "token"), count(len(cfg.Plugins), "plugin"))
	return 0
}
