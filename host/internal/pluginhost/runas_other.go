//go:build !linux

package pluginhost

import (
	"errors"
	"os/exec"
)

// runAsSupported is false: only Linux starts a plugin as another user
// (run_as); the config refuses the setting elsewhere.
const runAsSupported = false

func setCredential(*exec.Cmd, *RunAs) {}

func prepareDataDir(string, *RunAs) error {
	return errors.New("starting a plugin as another user is supported on Linux only")
}

func letThrough(string) error { return nil }

func unreachable(*RunAs, string, string) string { return "" }
