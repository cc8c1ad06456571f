package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/switches"
)

const actionsUsage = "usage: capgate actions off|on|status -c FILE"

// actions throws, releases or shows the kill switch in the database FILE
// configures: every replica on that database applies a change within
// switches.PollInterval, a running host included.
func actions(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "off" && args[0] != "on" && args[0] != "status") {
		fmt.Fprintln(stderr, actionsUsage)
		return 2
	}
	verb := args[0]
	path, ok := configFlag("actions "+verb, args[1:], stderr)
	if !ok {
		return 2
	}
	cfg, ok := loadForStore(path, stderr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sw, err := switches.Open(ctx, cfg.Database.DSN, cfg.DataDir, nil)
	if err != nil {
		fmt.Fprintf(stderr, "capgate: database.dsn: %v\n", err)
		return 1
	}
	defer sw.Close()
	var st switches.State
	if verb == "status" {
		st, err = sw.Get(ctx)
	} else {
		st, err = sw.SetActionsOff(ctx, verb == "off", "cli:"+operator())
	}
	if err != nil {
		fmt.Fprintf(stderr, "capgate: %v\n", err)
		return 1
	}
	switch {
	case st.ActionsOff:
		fmt.Fprintf(stdout, "actions are off on every replica using this database (set by %s at %s); reads still work\n", cell(st.ChangedBy, 64), st.ChangedAt.Format(time.RFC3339))
	case !cfg.ActionsEnabled:
		fmt.Fprintf(stdout, "the shared switch is on, but %s sets actions_enabled: false, so actions stay off on the hosts it configures\n", path)
	default:
		fmt.Fprintln(stdout, "actions are on")
	}
	if verb != "status" {
		fmt.Fprintf(stdout, "running hosts apply the change within %s\n", switches.PollInterval)
	}
	return 0
}

// loadForStore loads the configuration at path for a command that opens a
// store the host keeps in its database, making sure data_dir exists; it
// reports a failure on stderr.
func loadForStore(path string, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, false
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		fmt.Fprintf(stderr, "capgate: data_dir: create %s: %v\n", cfg.DataDir, err)
		return nil, false
	}
	return cfg, true
}

// operator names who runs the command, for the switch's record.
func operator() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
