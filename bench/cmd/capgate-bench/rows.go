package main

import (
	"slices"
	"strings"
	"time"
)

// row is one server's outcome over the rounds.
type row struct {
	runs []*result
	// err is the first failure to set up or measure the server; it is not
	// tried again in later rounds.
	err error
}

func (r *row) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// ok reports whether the server was measured and every run was valid.
func (r *row) ok() bool {
	if r == nil || r.err != nil || len(r.runs) == 0 {
		return false
	}
	for _, x := range r.runs {
		if !x.valid() {
			return false
		}
	}
	return true
}

// problem says why the runs are not valid.
func (r *row) problem() string {
	var p []string
	for _, x := range r.runs {
		if !x.valid() {
			p = append(p, x.problem())
		}
	}
	return strings.Join(p, "; ")
}

// used are the runs the figures come from: those during which other
// processes left the machine alone (at most busyOthers cores), or all of
// them when every run was disturbed.
func (r *row) used() []*result {
	var quiet []*result
	for _, x := range r.runs {
		if x.cpu.others <= busyOthers {
			quiet = append(quiet, x)
		}
	}
	if len(quiet) == 0 {
		return r.runs
	}
	return quiet
}

// quiet is how many runs were undisturbed.
func (r *row) quiet() int {
	n := 0
	for _, x := range r.runs {
		if x.cpu.others <= busyOthers {
			n++
		}
	}
	return n
}

// rps is the median throughput over the used runs.
func (r *row) rps() float64 {
	return median(r.used(), func(x *result) float64 { return x.rps })
}

// p50 and p99 are the median latency percentiles over the used runs.
func (r *row) p50() time.Duration {
	return time.Duration(median(r.used(), func(x *result) float64 { return float64(x.p50) }))
}

func (r *row) p99() time.Duration {
	return time.Duration(median(r.used(), func(x *result) float64 { return float64(x.p99) }))
}

// rpsRange is the lowest and highest throughput over all the runs.
func (r *row) rpsRange() (lo, hi float64) {
	for i, x := range r.runs {
		if i == 0 || x.rps < lo {
			lo = x.rps
		}
		if i == 0 || x.rps > hi {
			hi = x.rps
		}
	}
	return lo, hi
}

// serverCPU is the mean CPU the server used over the used runs, in cores.
func (r *row) serverCPU() float64 {
	u := r.used()
	var sum float64
	for _, x := range u {
		sum += x.cpu.server
	}
	return sum / float64(max(1, len(u)))
}

// othersCPU is the most CPU other processes used during a used run, in
// cores.
func (r *row) othersCPU() float64 {
	var m float64
	for _, x := range r.used() {
		m = max(m, x.cpu.others)
	}
	return m
}

// median of f over runs; the mean of the middle two for an even count.
func median(runs []*result, f func(*result) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	v := make([]float64, len(runs))
	for i, x := range runs {
		v[i] = f(x)
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
