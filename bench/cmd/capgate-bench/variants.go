package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// variant is capgate with one thing more switched on, judged by what it
// costs the no-op tool against the plain capgate: its own row, measured
// next to the plain one in every round, and a check on interleaved
// bursts of the two.
type variant struct {
	key, name, what string
	// config turns the plain bench configuration into the variant's.
	config func(capgateConfig) capgateConfig
	// target is the least share of the plain capgate's req/s the variant
	// must keep; goal says it for the report.
	target float64
	goal   string
}

// variants are the configurations judged against the plain capgate.
var variants = []variant{
	{keyGoverned, "capgate governed", "the same, every call audited and rate-limited", governed, 1 - governanceTarget,
		fmt.Sprintf("governance costs ≤ %.0f%%: capgate governed", governanceTarget*100)},
	{keyMetrics, "capgate metrics", "the same, with Prometheus metrics on (metrics.listen)", withMetrics, 1 - metricsTarget,
		fmt.Sprintf("metrics cost ≤ %.0f%%: capgate metrics", metricsTarget*100)},
	// Traced has no target: what tracing every call costs is reported.
	{keyTraced, "capgate traced", "the same, every call traced (host and plugin spans, OTLP/HTTP)", withTraces, 0,
		"tracing every call: capgate traced"},
}

// governanceTarget is the most throughput the audit trail and rate limits
// may cost the no-op tool; metricsTarget what the metrics may.
const (
	governanceTarget = 0.05
	metricsTarget    = 0.03
)

// variantOf returns the variant of key.
func variantOf(key string) (variant, bool) {
	i := slices.IndexFunc(variants, func(v variant) bool { return v.key == key })
	if i < 0 {
		return variant{}, false
	}
	return variants[i], true
}

// burstPair is one pair of a variant's check: hello.greet's req/s on the
// plain capgate and on the variant in back-to-back bursts.
type burstPair struct{ plain, variant float64 }

// measureVariant starts the variant's capgate and measures hello.greet
// through it, just before or after the plain capgate, so the two runs of a
// round are side by side.
func (b *bench) measureVariant(ctx context.Context, v variant) {
	if !b.pending(v.key) {
		return
	}
	p, err := startCapgate(ctx, b.opts.bin, b.workDir, false, v.config, b.opts.startTimeout)
	if err != nil {
		b.fail(v.key, fmt.Errorf("start capgate: %w", err))
		return
	}
	defer func() {
		if err := p.stop(); err != nil {
			slog.Warn("stop capgate", "err", err)
		}
	}()
	j, err := greetJob(ctx, v.key, p)
	if err != nil {
		b.fail(v.key, err)
		return
	}
	b.measure(ctx, v.key, j)
}

// measurePairs is a variant's check. Both capgates run at once, idle but
// for the one under load, and take turns in short bursts, alternating
// which goes first: a drift of the machine (whole runs here differ by a
// quarter, minutes apart) then falls on both sides of nearly every pair,
// where runs of many seconds, one server after the other, carry it into
// the ratio.
func (b *bench) measurePairs(ctx context.Context, v variant) {
	if b.opts.pairs == 0 || !b.selected(keyCapgate) || !b.selected(v.key) {
		return
	}
	fail := func(err error) {
		b.pairsErr[v.key] = err
		slog.Error("interleaved pairs", "variant", v.key, "err", err)
	}
	var jobs [2]job // plain, the variant
	for i, config := range []func(capgateConfig) capgateConfig{nil, v.config} {
		p, err := startCapgate(ctx, b.opts.bin, b.workDir, false, config, b.opts.startTimeout)
		if err != nil {
			fail(fmt.Errorf("start capgate: %w", err))
			return
		}
		defer func() {
			if err := p.stop(); err != nil {
				slog.Warn("stop capgate", "err", err)
			}
		}()
		j, err := greetJob(ctx, fmt.Sprintf("pairs-%s-%d", v.key, i), p)
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
	slog.Info("interleaved pairs", "variant", v.key, "pairs", b.opts.pairs, "burst", wrkSeconds(b.opts.pairBurst))
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
				fail(fmt.Errorf("invalid burst on the %s capgate: %s", []string{"plain", v.key}[i], res.problem()))
				return
			}
			rps[i] = res.rps
		}
		b.pairs[v.key] = append(b.pairs[v.key], burstPair{plain: rps[0], variant: rps[1]})
	}
}

// variantLine judges a variant against the plain capgate: on the median
// ratio of the interleaved bursts when they ran, with the rounds' ratios
// for reference, else round by round as bookingLine does.
func variantLine(v variant, rows map[string]*row, selected []string, env environment) string {
	goal := fmt.Sprintf("%s ≥ %.2f× capgate", v.goal, v.target)
	if v.target == 0 {
		goal = v.goal + " ÷ capgate"
	}
	byRound := pairedLine(rows, selected, v.key, keyCapgate, v.target, goal+", by round")
	if v.target == 0 {
		// Reported, not judged.
		byRound = strings.Replace(byRound, "PASS  ", "INFO  ", 1)
		byRound = strings.Replace(byRound, " (needs ≥ 0.00×)", "", 1)
	}
	pairs := env.pairs[v.key]
	switch {
	case env.pairsErr[v.key] != nil:
		return fmt.Sprintf("FAIL  %s: the interleaved bursts failed: %v", goal, env.pairsErr[v.key])
	case len(pairs) == 0:
		return byRound
	}
	ratios := make([]float64, len(pairs))
	for i, p := range pairs {
		ratios[i] = p.variant / p.plain
	}
	slices.Sort(ratios)
	n := len(ratios)
	m := ratios[n/2]
	if n%2 == 0 {
		m = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	verdict := "FAIL"
	switch {
	case v.target == 0:
		verdict = "INFO"
	case m >= v.target:
		verdict = "PASS"
	}
	_, rounds, _ := strings.Cut(byRound, ", by round: ")
	if rounds != "" {
		rounds = "; by round (for reference): " + rounds
	}
	needs := fmt.Sprintf("; needs ≥ %.2f×", v.target)
	if v.target == 0 {
		needs = ""
	}
	return fmt.Sprintf("%s  %s, in %d interleaved pairs of %s bursts: median %.3f× (range %.2f–%.2f%s)%s",
		verdict, goal, n, env.pairBurst, m, ratios[0], ratios[n-1], needs, rounds)
}
