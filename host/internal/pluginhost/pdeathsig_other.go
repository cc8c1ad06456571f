//go:build !linux

package pluginhost

import "os/exec"

// setParentDeathSignal has no portable equivalent outside Linux; there the
// host's orderly shutdown is what stops plugins.
func setParentDeathSignal(*exec.Cmd) {}

func onSpawnThread(f func()) { f() }
