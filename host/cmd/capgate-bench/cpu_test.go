package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// comm may hold spaces and parentheses.
	p, err := parseProcStat("4242 (capgate (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 9 0 1000 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if p.pid != 4242 || p.ppid != 17 || p.cpu != 325*clockTick {
		t.Errorf("got %+v", p)
	}
	if _, err := parseProcStat("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}

func TestParseMachineBusy(t *testing.T) {
	got, err := parseMachineBusy("cpu  100 5 50 9000 40 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := 156 * clockTick; got != want {
		t.Errorf("busy = %v, want %v", got, want)
	}
	if _, err := parseMachineBusy("intr 1 2 3"); err == nil {
		t.Error("non-cpu line parsed")
	}
}

// treeCPU counts a child's CPU time under its parent.
func TestTreeCPUCountsChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// A shell whose child spins until the test kills their process group.
	cmd := exec.Command("sh", "-c", "sh -c 'while :; do :; done' & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	probe := treeCPU(cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := probe()
		if err != nil {
			t.Fatal(err)
		}
		if got >= 100*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tree CPU stayed at %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestBetween(t *testing.T) {
	t0 := time.Unix(0, 0)
	a := cpuSample{at: t0, busy: 10 * time.Second, server: 1 * time.Second}
	b := cpuSample{at: t0.Add(10 * time.Second), busy: 28 * time.Second, server: 12 * time.Second}
	u := between(a, b, 5*time.Second)
	if u.server != 1.1 || u.wrk != 0.5 || u.others < 0.19 || u.others > 0.21 {
		t.Errorf("use = %+v", u)
	}
}
