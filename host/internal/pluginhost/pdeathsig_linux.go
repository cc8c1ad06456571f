package pluginhost

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// setParentDeathSignal asks the kernel to send the plugin SIGTERM if the host
// dies without stopping it (kill -9, a crash), so no plugin outlives its host.
// The plugin also gets a process group of its own: a Ctrl-C or a SIGTERM sent
// to the host's group must reach the host alone, which then drains in-flight
// calls before it stops the plugins itself.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}

var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

// onSpawnThread runs f on one OS thread that lives as long as the host.
// Linux delivers the parent-death signal when the *thread* that forked the
// child exits, and the Go runtime may retire threads; forking from a locked
// thread that never exits makes the signal mean "the host died".
func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must not be reused or retired
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); f() }
	<-done
}
