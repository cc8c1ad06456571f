// Command probe is a test plugin that tries to read other processes'
// environments from /proc: the host's (its parent) and any pid it is given.
// It reports what it read and what refused it, so a test can see which
// secrets a plugin reaches.
package main

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/capgate/capgate/sdk"
)

type config struct {
	// Dumpable undoes what sdk.Serve set, as a plugin not built with the
	// SDK would be: the test's control that reading works at all.
	Dumpable bool `json:"dumpable"`
}

type in struct {
	// PIDs are the processes whose environment to read besides the host's.
	PIDs []int `json:"pids"`
}

// read is one attempt: the file's content, or the error refusing it.
type read struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Err     string `json:"err,omitempty"`
	Denied  bool   `json:"denied,omitempty"`
}

type out struct {
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	Reads []read `json:"reads"`
}

func main() {
	p := sdk.New("probe", "0.0.1")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		var c config
		if err := env.DecodeConfig(&c); err != nil {
			return err
		}
		if c.Dumpable {
			if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0); errno != 0 {
				return fmt.Errorf("prctl(PR_SET_DUMPABLE, 1): %w", errno)
			}
		}
		return nil
	})
	sdk.Add(p, sdk.Tool[in, out]{
		Name: "probe.environ", Description: "Read the host's and the given processes' environments.", Kind: sdk.Read, Pack: "probe",
		Handler: func(ctx context.Context, call sdk.Call, in in) (out, error) {
			o := out{UID: os.Getuid(), GID: os.Getgid()}
			for _, pid := range append([]int{os.Getppid()}, in.PIDs...) {
				r := read{Path: fmt.Sprintf("/proc/%d/environ", pid)}
				b, err := os.ReadFile(r.Path)
				if err != nil {
					r.Err, r.Denied = err.Error(), os.IsPermission(err)
				}
				r.Content = string(b)
				o.Reads = append(o.Reads, r)
			}
			return o, nil
		},
	})
	sdk.Serve(p)
}
