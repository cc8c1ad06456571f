//go:build unix

package events

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDir takes an exclusive flock on dir's lock file and records this
// process's id in it. The kernel drops the lock when the process dies, so
// a host killed with kill -9 does not lock out its successor.
func lockDir(dir string) (unlock func() error, err error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("events: embedded: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("events: embedded: lock %s: %w", path, err)
		}
		holder := "another capgate process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			switch pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); {
			case perr != nil:
			case pid == os.Getpid():
				holder = "this process (a bus already open on it)"
			default:
				holder = fmt.Sprintf("another capgate process (pid %d)", pid)
			}
		}
		return nil, fmt.Errorf("events: the event store %s is in use: %s holds its lock %s; stop it, or give this host a data_dir of its own", dir, holder, lockName)
	}
	// The pid is only for the error above; failing to write it is harmless.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil // closing the file releases the lock
}
