package main

import (
	"context"
	"fmt"
	"log/slog"
)

// burstPair is one pair of the governance check: hello.greet's req/s on
// the plain and the governed capgate in back-to-back bursts.
type burstPair struct{ plain, governed float64 }

// measureGovernancePairs is the governance check's own measurement. Both
// capgates run at once, idle but for the one under load, and take turns
// in short bursts, alternating which goes first: a drift of the machine
// (whole runs here differ by a quarter, minutes apart) then falls on both
// sides of nearly every pair, where runs of many seconds, one server
// after the other, carry it into the ratio.
func (b *bench) measureGovernancePairs(ctx context.Context) {
	if b.opts.pairs == 0 || !b.selected(keyCapgate) || !b.selected(keyGoverned) {
		return
	}
	fail := func(err error) {
		b.pairsErr = err
		slog.Error("governance pairs", "err", err)
	}
	var jobs [2]job // plain, governed
	for i, governed := range []bool{false, true} {
		p, err := startCapgate(ctx, b.opts.bin, b.workDir, false, governed, b.opts.startTimeout)
		if err != nil {
			fail(fmt.Errorf("start capgate: %w", err))
			return
		}
		defer func() {
			if err := p.stop(); err != nil {
				slog.Warn("stop capgate", "err", err)
			}
		}()
		j, err := greetJob(ctx, fmt.Sprintf("pairs-%d", i), p)
		if err != nil {
			fail(err)
			return
		}
		jobs[i] = j
	}
	var scripts [2]string
	for i, j := range jobs {
		var err error
		if scripts[i], err = b.load.script(j); err != nil {
			fail(err)
			return
		}
		if b.load.warmup > 0 {
			if _, _, err := b.load.wrk1(ctx, scripts[i], j, b.load.warmup); err != nil {
				fail(fmt.Errorf("warm-up: %w", err))
				return
			}
		}
	}
	slog.Info("governance pairs", "pairs", b.opts.pairs, "burst", wrkSeconds(b.opts.pairBurst))
	for n := range b.opts.pairs {
		var rps [2]float64
		for k := range 2 {
			i := (n + k) % 2 // the plain one first in even pairs
			out, _, err := b.load.wrk1(ctx, scripts[i], jobs[i], b.opts.pairBurst)
			if err != nil {
				fail(err)
				return
			}
			res, err := parseWrk(out)
			if err != nil {
				fail(fmt.Errorf("parse wrk output: %w\n%s", err, out))
				return
			}
			if !res.valid() {
				fail(fmt.Errorf("invalid burst on the %s capgate: %s", []string{"plain", "governed"}[i], res.problem()))
				return
			}
			rps[i] = res.rps
		}
		b.pairs = append(b.pairs, burstPair{plain: rps[0], governed: rps[1]})
	}
}
