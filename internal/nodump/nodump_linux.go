package nodump

import (
	"fmt"
	"syscall"
)

// Set marks the process not dumpable. Linux then makes its /proc/<pid>
// files (environ, mem, maps) root's, refuses ptrace from processes without
// CAP_SYS_PTRACE, and writes no core dump. It lasts until the process
// executes another program, so each process sets it for itself.
func Set() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}
