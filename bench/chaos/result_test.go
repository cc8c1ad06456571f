//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// result is what one fault did to the calls.
type result struct {
	fault
	start, end time.Time // the fault was on from start to end

	calls, failed, named int           // calls sent during the fault; failed ones; failed ones naming the dependency
	rateLimited          int           // failed ones refused at rate_limit
	failP50, failMax     time.Duration // how long a failed call took to answer
	okP50, okMax         time.Duration // how long a successful one took
	samples              []string      // distinct error texts, a few
	raw                  []string      // the first instance of each sample
	logLines             []string      // what the replicas logged for the samples' references
	recovered            bool
	recovery             time.Duration // from the end of the fault to the first call of an unbroken run of successes
	killSwitch           string
	lost                 lostWrites
}

type lostWrites struct {
	bookings, approvals, audit, events int // acknowledged, then missing
	eventsInFault                      int // events missing of bookings made while NATS was away or slow
}

// digits hides the numbers that make every instance of one error distinct.
var digits = regexp.MustCompile(`[0-9a-f]{8,}|\d+`)

func (r *result) measure(recs []record) {
	var fails, oks []time.Duration
	var lastFail time.Time
	seen := map[string]bool{}
	for _, rec := range recs {
		if rec.scenario != r.String() || rec.step == "kill_switch" {
			continue
		}
		if !rec.ok() && !rec.sent.Before(r.end) && rec.sent.After(lastFail) {
			lastFail = rec.sent
		}
		if rec.sent.Before(r.start) || !rec.sent.Before(r.end) {
			continue
		}
		r.calls++
		if rec.ok() {
			oks = append(oks, rec.took)
			continue
		}
		r.failed++
		fails = append(fails, rec.took)
		text := strings.ToLower(rec.err)
		for _, w := range depWords[r.dep] {
			if strings.Contains(text, w) {
				r.named++
				break
			}
		}
		if rec.step == "rate_limit" {
			r.rateLimited++
		}
		key := digits.ReplaceAllString(rec.err, "N")
		if len(key) > 240 {
			key = key[:240] + "…"
		}
		if !seen[key] && len(r.samples) < 4 {
			seen[key] = true
			r.samples = append(r.samples, key)
			r.raw = append(r.raw, rec.err)
		}
	}
	r.failP50, r.failMax = pct(fails)
	r.okP50, r.okMax = pct(oks)
	// Recovered at the first call after the last failure, if one came.
	if lastFail.IsZero() {
		r.recovered = true
		return
	}
	var first time.Time
	for _, rec := range recs {
		if rec.scenario == r.String() && rec.ok() && rec.sent.After(lastFail) && (first.IsZero() || rec.sent.Before(first)) {
			first = rec.sent
		}
	}
	if !first.IsZero() {
		r.recovered = true
		r.recovery = max(first.Sub(r.end), 0)
	}
}

func pct(ds []time.Duration) (p50, top time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)-1]
}

func (r *result) recoveryText() string {
	if !r.recovered {
		return "not recovered"
	}
	return fmt.Sprintf("%.1f s", r.recovery.Seconds())
}

func (r *result) summary() string {
	return fmt.Sprintf("%v on; %d calls, %d failed (%d naming %s, %d at rate_limit), failures answered in %v (max %v), successes in %v (max %v); recovery %s; kill switch: %s; samples: %q",
		r.end.Sub(r.start).Round(100*time.Millisecond), r.calls, r.failed, r.named, r.dep, r.rateLimited,
		r.failP50.Round(time.Millisecond), r.failMax.Round(time.Millisecond), r.okP50.Round(time.Millisecond), r.okMax.Round(time.Millisecond),
		r.recoveryText(), r.killSwitch, r.samples)
}

func renderReport(results []*result, total lostWrites, hold time.Duration, short bool, took time.Duration) string {
	var b strings.Builder
	run := "full"
	if short {
		run = "short"
	}
	fmt.Fprintf(&b, "# Dependency faults (`make chaos`, %s run, faults held %v, %v in all)\n\n", run, hold, took.Round(time.Second))
	fmt.Fprintf(&b, "Two replicas, %d load workers, each dependency behind a fault proxy.\n\n", workers)
	b.WriteString("| fault | lasted | calls during | failed | failures naming it | failed in (p50 / max) | succeeded in (p50 / max) | recovery | kill switch | lost bookings / approvals / audit / events |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		named := "—"
		if r.failed > 0 {
			named = fmt.Sprintf("%d%%", 100*r.named/r.failed)
		}
		ks := r.killSwitch
		if ks == "" {
			ks = "—"
		}
		ev := fmt.Sprint(r.lost.events)
		if r.lost.eventsInFault > 0 {
			ev += fmt.Sprintf(" (+%d made while NATS was away)", r.lost.eventsInFault)
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %d | %d | %s | %s / %s | %s / %s | %s | %s | %d / %d / %d / %s |\n",
			r, r.end.Sub(r.start).Seconds(), r.calls, r.failed, named,
			ms(r.failP50), ms(r.failMax), ms(r.okP50), ms(r.okMax), r.recoveryText(), ks,
			r.lost.bookings, r.lost.approvals, r.lost.audit, ev)
	}
	b.WriteString("\nErrors seen during each fault (numbers as N), and what a replica logged for an internal error's reference:\n\n")
	for _, r := range results {
		if len(r.samples) == 0 {
			continue
		}
		fmt.Fprintf(&b, "- %s:\n", r)
		for _, s := range r.samples {
			fmt.Fprintf(&b, "  - `%s`\n", strings.ReplaceAll(s, "`", "'"))
		}
		for _, s := range r.logLines {
			fmt.Fprintf(&b, "  - log: `%s`\n", strings.ReplaceAll(s, "`", "'"))
		}
	}
	fmt.Fprintf(&b, "\nIn all: %d acknowledged bookings, %d approvals, %d audit records, %d events lost; %d events missing of bookings made while NATS was away.\n",
		total.bookings, total.approvals, total.audit, total.events, total.eventsInFault)
	return b.String()
}

func ms(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

var reference = regexp.MustCompile(`reference ([A-Z0-9]+)`)

// explain finds, for each sample that names an internal error's reference,
// the line a replica logged with it: what an operator reads.
func (r *result) explain(replicas []*replica) {
	for _, raw := range r.raw {
		m := reference.FindStringSubmatch(raw)
		if m == nil {
			continue
		}
		for _, rep := range replicas {
			b, err := os.ReadFile(rep.log)
			if err != nil {
				continue
			}
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, m[1]) {
					line = strings.TrimSpace(line)
					if len(line) > 400 {
						line = line[:400] + "…"
					}
					r.logLines = append(r.logLines, line)
					break
				}
			}
		}
	}
}
