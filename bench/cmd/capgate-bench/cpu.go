package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The bench shares the machine with whatever else runs on it. To make that
// visible, every measured run records how much CPU the whole machine used,
// how much of it went to wrk and to the server under test, and so how much
// went to other processes: a run measured while others were busy is flagged
// in the report rather than silently reported low.

// clockTick is the unit of /proc CPU times (USER_HZ), 100 on Linux.
const clockTick = 10 * time.Millisecond

// cpuProbe returns the cumulative CPU time used by the server under test.
type cpuProbe func() (time.Duration, error)

// selfCPU is the CPU time of this process, which hosts the in-process
// servers.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// treeCPU returns a probe for the CPU time of pid and all its descendants
// (capgate and the plugins it started).
func treeCPU(pid int) cpuProbe {
	return func() (time.Duration, error) {
		procs, err := readProcs("/proc")
		if err != nil {
			return 0, err
		}
		children := map[int][]int{}
		for _, p := range procs {
			children[p.ppid] = append(children[p.ppid], p.pid)
		}
		var total time.Duration
		found := false
		var walk func(int)
		walk = func(id int) {
			if p, ok := procs[id]; ok {
				found = true
				total += p.cpu
			}
			for _, c := range children[id] {
				walk(c)
			}
		}
		walk(pid)
		if !found {
			return 0, fmt.Errorf("process %d not found in /proc", pid)
		}
		return total, nil
	}
}

type procStat struct {
	pid, ppid int
	cpu       time.Duration
	// start is when the process started, in clock ticks after boot: with
	// pid, it names a process even after its pid could have been reused.
	start int64
}

// readProcs reads pid, ppid and utime+stime of every process under root.
func readProcs(root string) (map[int]procStat, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	out := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		p, err := parseProcStat(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s/%d/stat: %w", root, pid, err)
		}
		out[p.pid] = p
	}
	return out, nil
}

// parseProcStat reads /proc/PID/stat: "pid (comm) state ppid ... utime stime
// ...", where comm may hold spaces and parentheses.
func parseProcStat(s string) (procStat, error) {
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return procStat{}, errors.New("no (comm)")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil {
		return procStat{}, fmt.Errorf("pid: %w", err)
	}
	// Fields after comm start at field 3 (state); ppid is 4, utime 14,
	// stime 15, starttime 22.
	f := strings.Fields(s[close+1:])
	if len(f) < 20 {
		return procStat{}, errors.New("too few fields")
	}
	ppid, err1 := strconv.Atoi(f[1])
	ut, err2 := strconv.ParseInt(f[11], 10, 64)
	st, err3 := strconv.ParseInt(f[12], 10, 64)
	start, err4 := strconv.ParseInt(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return procStat{}, err
	}
	return procStat{pid: pid, ppid: ppid, cpu: time.Duration(ut+st) * clockTick, start: start}, nil
}

// descendants lists the processes below pid.
func descendants(pid int) ([]procStat, error) {
	procs, err := readProcs("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]procStat{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procStat
	var walk func(int)
	walk = func(id int) {
		for _, c := range children[id] {
			out = append(out, c)
			walk(c.pid)
		}
	}
	walk(pid)
	return out, nil
}

// running reports whether p is still running: its pid exists and names a
// process started when p was.
func running(p procStat) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	now, err := parseProcStat(string(b))
	return err == nil && now.start == p.start
}

// killIfSame sends SIGKILL to p if it is still running, and is still the
// same process (its pid has not been reused).
func killIfSame(p procStat) error {
	if !running(p) {
		return nil
	}
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill plugin process %d: %w", p.pid, err)
	}
	slog.Warn("killed a plugin process capgate left running", "pid", p.pid)
	return nil
}

// machineBusy returns the CPU time all processors spent not idle, from
// /proc/stat.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read /proc/stat: %w", err)
	}
	return parseMachineBusy(string(b))
}

// parseMachineBusy sums user, nice, system and steal of the aggregate "cpu"
// line. Interrupt and softirq time are left out: on loopback they are mostly
// the bench's own traffic, which no process is charged for, and counting it
// would make every fast run look disturbed. Steal is in: it is CPU another
// tenant of the host took.
func parseMachineBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected /proc/stat first line %q", line)
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 8} { // user nice system (idle iowait irq softirq) steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat field %d: %w", i, err)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// cpuUse is where the machine's CPU went during one measured run, in cores
// (CPU seconds per second of the run).
type cpuUse struct {
	server, wrk, others float64
}

// cpuSample is the counters at one instant.
type cpuSample struct {
	at           time.Time
	busy, server time.Duration
}

func sampleCPU(server cpuProbe) (cpuSample, error) {
	busy, err := machineBusy()
	if err != nil {
		return cpuSample{}, err
	}
	srv, err := server()
	if err != nil {
		return cpuSample{}, fmt.Errorf("server CPU: %w", err)
	}
	return cpuSample{at: time.Now(), busy: busy, server: srv}, nil
}

// between computes the use from two samples and wrk's own CPU time.
func between(a, b cpuSample, wrk time.Duration) cpuUse {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return cpuUse{}
	}
	u := cpuUse{
		server: (b.server - a.server).Seconds() / secs,
		wrk:    wrk.Seconds() / secs,
	}
	u.others = max(0, (b.busy-a.busy).Seconds()/secs-u.server-u.wrk)
	return u
}

// waitQuiet waits, up to limit, until the machine is nearly idle (less than
// busyOthers cores busy over a second), so that a run starts on a quiet
// machine where it can. It returns the last busy figure it saw.
func waitQuiet(ctx context.Context, limit time.Duration) (float64, error) {
	deadline := time.Now().Add(limit)
	for {
		a, err := machineBusy()
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
		b, err := machineBusy()
		if err != nil {
			return 0, err
		}
		busy := (b - a).Seconds() / time.Since(t0).Seconds()
		if busy < busyOthers || time.Now().After(deadline) {
			return busy, nil
		}
	}
}
