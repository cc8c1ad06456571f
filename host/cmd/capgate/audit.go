package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/sdk/sqlstore"
)

const auditUsage = `usage: capgate audit -c FILE [-since T] [-until T] [-token LABEL] [-user ID]
                     [-capability NAME] [-decision admitted|refused] [-step STEP]
                     [-request ID] [-limit N] [-json] [-follow]`

// Defaults of capgate audit.
const (
	auditDefaultLimit = 50
	// followInterval is how often -follow polls the store.
	followInterval = 500 * time.Millisecond
	// auditOpenTimeout bounds opening the store and each query, so an
	// unreachable database ends the command instead of hanging it.
	auditOpenTimeout = 30 * time.Second
	// maxTableReason bounds a refusal's reason in the table; -json has it
	// whole.
	maxTableReason = 200
)

// readAudit is capgate audit: it prints the audit records FILE's store
// holds, newest first, or follows the trail until SIGINT or SIGTERM.
func readAudit(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runAudit(ctx, args, stdout, stderr, time.Now(), followInterval)
}

// auditCommand is a parsed capgate audit.
type auditCommand struct {
	path   string
	filter audit.Filter
	limit  int
	json   bool
	follow bool
}

// runAudit runs capgate audit with now as the reference of relative times;
// -follow polls every interval until ctx ends.
func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer, now time.Time, interval time.Duration) int {
	cmd, ok := parseAudit(args, now, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(cmd.path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	out := newAuditOutput(stdout, cmd.json)
	if cmd.follow {
		return followAudit(ctx, cfg, cmd, out, stderr, interval)
	}
	st, err := openAudit(ctx, cfg)
	if errors.Is(err, errNoTrail) {
		fmt.Fprintf(stderr, "capgate: %v\n", err)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "capgate: %v\n", err)
		return 1
	}
	defer st.Close()
	f := cmd.filter
	f.Limit = cmd.limit
	qctx, cancel := context.WithTimeout(ctx, auditOpenTimeout)
	defer cancel()
	page, err := st.Query(qctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "capgate: read the audit trail: %v\n", err)
		return 1
	}
	if len(page.Records) == 0 && !cmd.json {
		fmt.Fprintln(stdout, "no audit records match")
		return 0
	}
	out.header()
	for _, r := range page.Records {
		out.record(r)
	}
	if err := out.flush(); err != nil {
		fmt.Fprintf(stderr, "capgate: write: %v\n", err)
		return 1
	}
	if page.More {
		fmt.Fprintf(stderr, "capgate: more records match; these are the newest %d (raise -limit, up to %d, or narrow -since/-until)\n", cmd.limit, audit.MaxLimit)
	}
	return 0
}

// parseAudit reads the flags; on a problem it writes one naming the flag,
// and the usage, to stderr.
func parseAudit(args []string, now time.Time, stderr io.Writer) (auditCommand, bool) {
	var cmd auditCommand
	f := &cmd.filter
	fs := flag.NewFlagSet("capgate audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cmd.path, "c", "", "configuration file (YAML)")
	fs.Func("since", "records at or after this RFC 3339 time, or this long ago (30m, 1h, 7d)", func(s string) (err error) {
		f.Since, err = auditTimeFlag(s, now)
		return err
	})
	fs.Func("until", "records before this RFC 3339 time, or this long ago", func(s string) (err error) {
		f.Until, err = auditTimeFlag(s, now)
		return err
	})
	strFlag := func(name, usage string, dst *string, max int) {
		fs.Func(name, usage, func(s string) error {
			if len(s) > max {
				return fmt.Errorf("%d bytes; no record holds more than %d", len(s), max)
			}
			*dst = s
			return nil
		})
	}
	strFlag("token", "the token label (tokens[N].label)", &f.TokenLabel, audit.MaxLabelLen)
	strFlag("user", "the user id", &f.UserID, audit.MaxNameLen)
	strFlag("capability", "the capability, e.g. booking.create", &f.Capability, audit.MaxNameLen)
	strFlag("step", "the refusing step, e.g. permission", &f.Step, audit.MaxProtocolLen)
	strFlag("approval", "the records of one held call (ap_…: the call, its decisions and its run) or one in-band question (cf_…: the call asked and the call that answered)", &f.ApprovalID, audit.MaxIDLen)
	strFlag("request", "the request id", &f.RequestID, audit.MaxRequestIDLen)
	fs.Func("decision", "admitted or refused", func(s string) error {
		if s != string(audit.Admitted) && s != string(audit.Refused) {
			return errors.New("want admitted or refused")
		}
		f.Decision = audit.Decision(s)
		return nil
	})
	fs.IntVar(&cmd.limit, "limit", auditDefaultLimit, "the most records to print (with -follow: to start from)")
	fs.BoolVar(&cmd.json, "json", false, "one JSON object per record and line")
	fs.BoolVar(&cmd.follow, "follow", false, "keep printing records as they arrive, oldest first, until interrupted")

	fail := func(format string, a ...any) (auditCommand, bool) {
		fmt.Fprintf(stderr, "capgate audit: "+format+"\n%s\n", append(a, auditUsage)...)
		return auditCommand{}, false
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, auditUsage)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return auditCommand{}, false
		}
		return fail("%v", err)
	}
	switch {
	case cmd.path == "":
		return fail("-c FILE is required")
	case fs.NArg() > 0:
		return fail("unexpected argument %q", clipArg(fs.Arg(0)))
	case cmd.limit < 1 || cmd.limit > audit.MaxLimit:
		return fail("-limit %d is not between 1 and %d", cmd.limit, audit.MaxLimit)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since):
		return fail("-until %s is not after -since %s", f.Until.UTC().Format(time.RFC3339), f.Since.UTC().Format(time.RFC3339))
	case cmd.follow && !f.Until.IsZero():
		return fail("-until cannot be combined with -follow, which prints records as they arrive")
	}
	return cmd, true
}

// maxDays bounds a duration in days: a hundred years is more than any
// trail holds, and far from overflowing time.Duration.
const maxDays = 36500

// auditTimeFlag parses a -since or -until value: an RFC 3339 time, or a
// duration before now (Go's units, and d for days: 7d, 1d12h).
func auditTimeFlag(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseAgo(s)
	if err != nil {
		return time.Time{}, errors.New("want an RFC 3339 time such as 2030-01-07T09:00:00Z, or a duration ago such as 30m, 1h or 7d")
	}
	return now.Add(-d), nil
}

// parseAgo parses a positive duration with an optional leading whole
// number of days.
func parseAgo(s string) (time.Duration, error) {
	var d time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		days, err := strconv.Atoi(s[:i])
		if err != nil || days < 0 || days > maxDays || s[:i] == "" || s[0] == '+' {
			return 0, errors.New("bad days")
		}
		d, s = time.Duration(days)*24*time.Hour, s[i+1:]
		if s == "" {
			s = "0s"
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil || rest < 0 || rest > maxDays*24*time.Hour {
		return 0, errors.New("bad duration")
	}
	if d += rest; d <= 0 {
		return 0, errors.New("not positive")
	}
	return d, nil
}

// errNoTrail: the SQLite file does not exist yet — the host creates it
// when it starts — so no record has been written: not a failure.
var errNoTrail = errors.New("no audit records yet")

// openAudit opens the audit store cfg configures. The SQLite file is
// never created here: reading must not leave a file, owned by whoever ran
// the command, where the host will keep its own.
func openAudit(ctx context.Context, cfg *config.Config) (audit.Store, error) {
	dsn := cfg.Database.DSN
	if dsn == "" {
		file := filepath.Join(cfg.DataDir, audit.FileName)
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist; the host creates it in data_dir when it starts", errNoTrail, file)
		}
	}
	octx, cancel := context.WithTimeout(ctx, auditOpenTimeout)
	defer cancel()
	st, err := audit.Open(octx, dsn, cfg.DataDir)
	if err != nil {
		if dsn != "" {
			return nil, fmt.Errorf("cannot reach the audit trail in database.dsn %s: %w", sqlstore.Redact(dsn), err)
		}
		return nil, fmt.Errorf("cannot open the audit trail in data_dir %s: %w", cfg.DataDir, err)
	}
	return st, nil
}

// followAudit prints the newest cmd.limit matching records, or every one
// since -since, then each matching record as it is committed, polling
// every interval, until ctx ends. A store that fails while followed is
// reported once and polled on.
func followAudit(ctx context.Context, cfg *config.Config, cmd auditCommand, out *auditOutput, stderr io.Writer, interval time.Duration) int {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			return true
		}
	}

	st, err := openAudit(ctx, cfg)
	if errors.Is(err, errNoTrail) {
		fmt.Fprintf(stderr, "capgate: %v; waiting for it\n", err)
		// The host may be creating the file: what fails meanwhile is
		// tried again, and reported once.
		reported := false
		for err != nil {
			if !wait() {
				return 0
			}
			if st, err = openAudit(ctx, cfg); err != nil && !errors.Is(err, errNoTrail) && !reported && ctx.Err() == nil {
				fmt.Fprintf(stderr, "capgate: %v; trying again every %s\n", err, interval)
				reported = true
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintf(stderr, "capgate: %v\n", err)
		return 1
	}
	defer st.Close()

	out.header()
	f := cmd.filter
	f.Order, f.Limit = audit.OldestFirst, audit.MaxLimit
	if f.Since.IsZero() {
		// The newest records first, then on from the newest of them.
		nf := cmd.filter
		nf.Limit = cmd.limit
		page, err := queryAudit(ctx, st, nf)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "capgate: read the audit trail: %v\n", err)
			return 1
		}
		for _, r := range slices.Backward(page.Records) {
			out.record(r)
		}
		if len(page.Records) > 0 {
			f.After = page.Records[0].Seq
		}
		if err := out.flush(); err != nil {
			fmt.Fprintf(stderr, "capgate: write: %v\n", err)
			return 1
		}
	}
	failing := false
	for {
		page, err := queryAudit(ctx, st, f)
		switch {
		case ctx.Err() != nil:
			return 0
		case err != nil:
			if !failing {
				fmt.Fprintf(stderr, "capgate: reading the audit trail failed, retrying every %s: %v\n", interval, err)
			}
			failing = true
		default:
			if failing {
				fmt.Fprintln(stderr, "capgate: reading the audit trail again")
			}
			failing = false
			for _, r := range page.Records {
				out.record(r)
			}
			f.After = page.Next
			if err := out.flush(); err != nil {
				fmt.Fprintf(stderr, "capgate: write: %v\n", err)
				return 1
			}
			if page.More {
				continue // a backlog: read on at once
			}
		}
		if !wait() {
			return 0
		}
	}
}

func queryAudit(ctx context.Context, st audit.Store, f audit.Filter) (audit.Page, error) {
	qctx, cancel := context.WithTimeout(ctx, auditOpenTimeout)
	defer cancel()
	return st.Query(qctx, f)
}

// auditOutput writes records as a table or as JSON lines.
type auditOutput struct {
	w       *bufio.Writer
	enc     *json.Encoder
	headed  bool
	jsonOut bool
}

func newAuditOutput(w io.Writer, jsonOut bool) *auditOutput {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &auditOutput{w: bw, enc: enc, jsonOut: jsonOut}
}

// auditRow lays out a table line; the reason, for refusals, ends it.
const auditRow = "%-20s  %-24s  %-24s  %-16s  %-16s  %8s"

func (o *auditOutput) header() {
	if o.jsonOut || o.headed {
		return
	}
	o.headed = true
	fmt.Fprintf(o.w, auditRow+"\n", "TIME", "DECISION", "CAPABILITY", "TOKEN", "USER", "LATENCY")
}

// record writes r. The table never shows the arguments: they may be large
// and are for -json.
func (o *auditOutput) record(r audit.Record) {
	if o.jsonOut {
		// The record's fields are strings, numbers and valid JSON args:
		// encoding cannot fail, and a write error is reported by flush.
		_ = o.enc.Encode(server.NewAuditRecord(r))
		return
	}
	line := fmt.Sprintf(auditRow, r.Time.UTC().Format("2006-01-02T15:04:05Z"), cell(decisionCell(r), 64),
		cell(r.Capability, 96), cell(r.TokenLabel, 64), cell(r.UserID, 64), latencyCell(r.Latency))
	if r.Decision == audit.Refused && r.Reason != "" {
		line += "  " + cell(r.Reason, maxTableReason)
	}
	o.w.WriteString(strings.TrimRight(line, " "))
	o.w.WriteByte('\n')
}

func (o *auditOutput) flush() error { return o.w.Flush() }

// decisionCell says how the gate decided and how an admitted call ended.
func decisionCell(r audit.Record) string {
	switch {
	case r.Decision == audit.Refused:
		return "refused at " + r.Step
	case r.Outcome == audit.OutcomeToolError:
		return "tool error " + r.ErrorCode
	case r.Outcome == audit.OutcomeInternalError:
		return "internal " + r.ErrorRef
	case r.Outcome == audit.OutcomeHeld:
		return "held " + r.ApprovalID
	case r.Outcome == audit.OutcomeAsked:
		return "asked " + r.ApprovalID
	default:
		return string(r.Outcome)
	}
}

// cell makes a value safe for one line of a terminal: control and format
// characters (escapes, newlines, bidirectional overrides) become U+FFFD,
// and it is cut to max runes. Empty is "-".
func cell(s string, max int) string {
	if s == "" {
		return "-"
	}
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == max {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// latencyCell rounds a latency to three significant figures or so.
func latencyCell(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// clipArg bounds an argument quoted back in a message.
func clipArg(s string) string { return cell(s, 64) }
