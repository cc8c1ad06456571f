package pluginhost

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
)

const runAsSupported = true

// setCredential makes cmd start as r; with no r it starts as the host.
// It keeps the SysProcAttr setParentDeathSignal made.
func setCredential(cmd *exec.Cmd, r *RunAs) {
	if r == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Groups is set even when empty: the host's own supplementary groups
	// (root's) must not pass to the plugin.
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: append([]uint32{}, r.Groups...)}
}

// prepareDataDir gives a plugin running as another user its data
// directory: its own, mode 0700, with the plugins directory above it
// passable (not listable) by other users so that it can get there. The
// directory alone changes hands, not what is in it: the host, as root,
// must not follow links a plugin may have left there.
func prepareDataDir(dataDir string, r *RunAs) error {
	if err := letThrough(filepath.Dir(dataDir)); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Lchown(dataDir, int(r.UID), int(r.GID)); err != nil {
		return fmt.Errorf("data dir: give %s to %s: %w", dataDir, r, err)
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	return nil
}

// letThrough lets every user pass through dir, without listing it.
func letThrough(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o001 != 0 {
		return nil
	}
	return os.Chmod(dir, fi.Mode().Perm()|0o001)
}

// unreachable says why r cannot run the binary at path or enter dir,
// judged by mode bits, or "" when they let it: the kernel's "permission
// denied" at start names neither the step nor the directory.
func unreachable(r *RunAs, path, dir string) string {
	if why := blocked(r, filepath.Dir(path)); why != "" {
		return why
	}
	if fi, err := os.Stat(path); err == nil && !allows(fi, r) {
		return fmt.Sprintf("%s may not execute %s (%s)", r, path, modeOf(fi))
	}
	return blocked(r, dir)
}

// blocked names the first directory, from the root down to dir, that r
// may not pass through.
func blocked(r *RunAs, dir string) string {
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for _, d := range slices.Backward(chain) {
		if fi, err := os.Stat(d); err == nil && !allows(fi, r) {
			return fmt.Sprintf("%s may not pass through %s (%s): give it search (x) permission there, or keep the plugin's binary and data_dir where it may",
				r, d, modeOf(fi))
		}
	}
	return ""
}

// allows reports whether fi's mode bits let r search it (a directory) or
// execute it (a file), as its owner, its group or another user.
func allows(fi fs.FileInfo, r *RunAs) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == r.UID:
		return perm&0o100 != 0
	case st.Gid == r.GID || slices.Contains(r.Groups, st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

func modeOf(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("mode %04o, owner %d:%d", fi.Mode().Perm(), st.Uid, st.Gid)
	}
	return fmt.Sprintf("mode %04o", fi.Mode().Perm())
}
