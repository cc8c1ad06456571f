package main

import (
	"fmt"
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
	if p.pid != 4242 || p.ppid != 17 || p.cpu != 325*clockTick || p.start != 1000 {
		t.Errorf("got %+v", p)
	}
	if _, err := parseProcStat("1 (x) S 0 1 1 0 -1 4194560 100 0 0 0 250 75"); err == nil {
		t.Error("short line parsed")
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
	var kids []procStat
	for deadline := time.Now().Add(5 * time.Second); len(kids) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var err error
		if kids, err = descendants(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if len(kids) != 1 {
		t.Fatalf("descendants = %+v, want the spinning shell", kids)
	}
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

// killIfSame kills the process it was given, and not another one that has
// the same pid but started at another time.
func TestKillIfSame(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseProcStat(string(b))
	if err != nil {
		t.Fatal(err)
	}
	other := p
	other.start++
	if err := killIfSame(other); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a process with another start time was killed")
	case <-time.After(100 * time.Millisecond):
	}
	if err := killIfSame(p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process was not killed")
	}
}
