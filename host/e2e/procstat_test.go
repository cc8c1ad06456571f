package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// procMem is a process's memory as the kernel counts it in
// /proc/PID/status: what is resident now (VmRSS) and the most that ever was
// (VmHWM, the high-water mark since the process started).
type procMem struct {
	RSS, HWM int64 // bytes
}

// readProcMem reads pid's memory from /proc/PID/status.
func readProcMem(pid int) (procMem, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procMem{}, err
	}
	var m procMem
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		default:
			continue
		}
		f := bytes.Fields(rest) // "12345 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return procMem{}, fmt.Errorf("/proc/%d/status: unexpected %s line %q", pid, name, sc.Bytes())
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return procMem{}, fmt.Errorf("/proc/%d/status: %s: %v", pid, name, err)
		}
		*dst = kb << 10
	}
	if m.RSS == 0 || m.HWM == 0 {
		return procMem{}, fmt.Errorf("/proc/%d/status has no VmRSS or VmHWM (a zombie?)", pid)
	}
	return m, nil
}

// fmtMiB formats a byte count in MiB for a test log.
func fmtMiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// rssSampler polls a process's VmRSS every few milliseconds and keeps the
// largest value seen, for the peak of a phase of a test when the process's
// lifetime high-water mark (VmHWM) may come from an earlier one.
type rssSampler struct {
	pid  int
	peak atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

// sampleRSS starts sampling pid's VmRSS; Stop ends it and returns the peak.
func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{})}
	s.sample()
	s.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.sample()
			}
		}
	})
	return s
}

func (s *rssSampler) sample() {
	m, err := readProcMem(s.pid)
	if err != nil {
		return
	}
	for {
		p := s.peak.Load()
		if m.RSS <= p || s.peak.CompareAndSwap(p, m.RSS) {
			return
		}
	}
}

// Stop ends the sampling and returns the largest VmRSS seen, in bytes.
func (s *rssSampler) Stop() int64 {
	close(s.stop)
	s.wg.Wait()
	s.sample()
	return s.peak.Load()
}
