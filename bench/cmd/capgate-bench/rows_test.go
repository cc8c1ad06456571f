package main

import (
	"testing"
	"time"
)

func TestRowMedians(t *testing.T) {
	r := &row{runs: []*result{
		{rps: 300, p50: 3 * time.Millisecond, p99: 9 * time.Millisecond, requests: 1, checked: 1, cpu: cpuUse{server: 1, others: 0.1}},
		{rps: 100, p50: 1 * time.Millisecond, p99: 7 * time.Millisecond, requests: 1, checked: 1, cpu: cpuUse{server: 2, others: 0.2}},
		{rps: 200, p50: 2 * time.Millisecond, p99: 8 * time.Millisecond, requests: 1, checked: 1, cpu: cpuUse{server: 3, others: 0}},
	}}
	if r.rps() != 200 || r.p50() != 2*time.Millisecond || r.p99() != 8*time.Millisecond {
		t.Errorf("medians = %v %v %v", r.rps(), r.p50(), r.p99())
	}
	if lo, hi := r.rpsRange(); lo != 100 || hi != 300 {
		t.Errorf("range = %v–%v", lo, hi)
	}
	if r.serverCPU() != 2 || r.othersCPU() != 0.2 {
		t.Errorf("cpu = %v, %v", r.serverCPU(), r.othersCPU())
	}
	if !r.ok() {
		t.Error("valid runs not ok")
	}
	r.runs = append(r.runs, &result{rps: 400})
	if r.rps() != 250 || r.ok() {
		t.Errorf("even median = %v, ok = %v", r.rps(), r.ok())
	}
	var none *row
	if none.ok() {
		t.Error("nil row ok")
	}
}

// Undisturbed runs decide the figures; all runs do when none was.
func TestRowPrefersUndisturbedRuns(t *testing.T) {
	r := &row{runs: []*result{
		{rps: 100, requests: 1, checked: 1, cpu: cpuUse{server: 1, others: 0.9}},
		{rps: 300, requests: 1, checked: 1, cpu: cpuUse{server: 2, others: 0.1}},
		{rps: 200, requests: 1, checked: 1, cpu: cpuUse{server: 3, others: 0}},
	}}
	if r.rps() != 250 || r.quiet() != 2 || r.othersCPU() != 0.1 || r.serverCPU() != 2.5 {
		t.Errorf("rps %v, quiet %d, others %v, server %v", r.rps(), r.quiet(), r.othersCPU(), r.serverCPU())
	}
	if lo, hi := r.rpsRange(); lo != 100 || hi != 300 {
		t.Errorf("range over all runs = %v–%v", lo, hi)
	}
	r.runs[1].cpu.others, r.runs[2].cpu.others = 0.5, 0.3
	if r.rps() != 200 || r.quiet() != 0 || r.othersCPU() != 0.9 {
		t.Errorf("all disturbed: rps %v, quiet %d, others %v", r.rps(), r.quiet(), r.othersCPU())
	}
}
