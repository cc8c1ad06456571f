package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/config"
)

const approvalsUsage = `usage:
  capgate approvals list -c FILE [-status S] [-user ID] [-limit N] [-json]
  capgate approvals show ID -c FILE [-json]
  capgate approvals approve ID -c FILE [-by USER] [-reason TEXT]
  capgate approvals reject ID -c FILE [-by USER] [-reason TEXT]`

// approvalsCmd lists, shows and decides the calls held for a human, in the
// database FILE configures. A running host on that database (any replica)
// runs an approved call within a second or so.
func approvalsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, approvalsUsage)
		return 2
	}
	verb, rest := args[0], args[1:]
	var id string
	switch verb {
	case "list":
	case "show", "approve", "reject":
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			fmt.Fprintf(stderr, "capgate approvals %s: name the request: capgate approvals %s ID -c FILE\n", verb, verb)
			return 2
		}
		id, rest = rest[0], rest[1:]
	default:
		fmt.Fprintln(stderr, approvalsUsage)
		return 2
	}
	fs := flag.NewFlagSet("capgate approvals "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "", "configuration file (YAML)")
	asJSON := fs.Bool("json", false, "print JSON, one request per line")
	status := fs.String("status", "", "list: only requests in this state (pending, approved, rejected, expired, running, done)")
	userID := fs.String("user", "", "list: only requests of this user")
	limit := fs.Int("limit", approvals.DefaultLimit, fmt.Sprintf("list: at most this many, newest first (1 to %d)", approvals.MaxLimit))
	by := fs.String("by", operator(), "approve, reject: the deciding user (never the asker: four eyes)")
	reason := fs.String("reason", "", "approve, reject: why, kept with the decision")
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, approvalsUsage)
		return 2
	}
	if *limit < 1 || *limit > approvals.MaxLimit {
		fmt.Fprintf(stderr, "capgate approvals: -limit must be from 1 to %d\n", approvals.MaxLimit)
		return 2
	}
	cfg, ok := loadForStore(*path, stderr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := approvals.Open(ctx, cfg.Database.DSN, cfg.DataDir, nil)
	if err != nil {
		fmt.Fprintf(stderr, "capgate: database.dsn: %v\n", err)
		return 1
	}
	defer store.Close()

	switch verb {
	case "list":
		list, err := store.List(ctx, approvals.Filter{UserID: *userID, Status: approvals.Status(*status), Limit: *limit})
		if err != nil {
			fmt.Fprintf(stderr, "capgate approvals list: %v\n", err)
			return approvalsExit(err)
		}
		if *asJSON {
			for _, a := range list {
				printApprovalJSON(stdout, a)
			}
			return 0
		}
		if len(list) == 0 {
			fmt.Fprintln(stdout, "no approval requests match")
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tCAPABILITY\tRISK\tUSER\tTOKEN\tCREATED\tEXPIRES")
		for _, a := range list {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(a.ID, 64), cell(string(a.Status), 16), cell(a.Capability, 96),
				cell(string(a.Risk), 32), cell(a.UserID, 64), cell(a.TokenLabel, 64),
				a.CreatedAt.Format(time.RFC3339), a.ExpiresAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		return 0
	case "show":
		a, err := store.Get(ctx, id)
		if err != nil {
			fmt.Fprintf(stderr, "capgate approvals show: %v\n", err)
			return approvalsExit(err)
		}
		if *asJSON {
			printApprovalJSON(stdout, a)
		} else {
			printApproval(stdout, a)
		}
		return 0
	}
	if strings.TrimSpace(*by) == "" {
		fmt.Fprintln(stderr, "capgate approvals: -by names the deciding user")
		return 2
	}
	d := approvals.Decision{Approve: verb == "approve", By: "cli:" + *by, ByUser: *by, Reason: *reason, AllowSelf: !cfg.Approvals.FourEyes}
	a, err := store.Decide(ctx, id, d)
	if err == nil || !errors.Is(err, approvals.ErrNotFound) {
		// The decision is in the trail with the call and its run, as one
		// made through the admin API is; like the host's other operator
		// events (reloads, the kill switch) it is kept even with
		// audit.enabled: false.
		if aerr := recordDecision(ctx, cfg, approvals.DecisionRecord("cli", d, id, a.Capability, err)); aerr != nil {
			fmt.Fprintf(stderr, "capgate approvals %s: the decision stands, but the audit trail could not record it: %v\n", verb, aerr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "capgate approvals %s: %v\n", verb, err)
		return approvalsExit(err)
	}
	printApproval(stdout, a)
	if a.Status == approvals.Approved {
		fmt.Fprintln(stdout, "a running host on this database runs it once, within a few seconds; follow it with capgate approvals show "+a.ID)
	}
	return 0
}

// recordDecision appends r to the audit trail FILE's database holds.
func recordDecision(ctx context.Context, cfg *config.Config, r audit.Record) error {
	st, err := audit.Open(ctx, cfg.Database.DSN, cfg.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Append(ctx, []audit.Record{r})
}

// approvalsExit is 2 for what the caller asked wrong, 1 otherwise.
func approvalsExit(err error) int {
	if errors.Is(err, approvals.ErrInvalid) {
		return 2
	}
	return 1
}

// maxShown bounds, in runes, the arguments and outcome show prints.
const maxShown = 64 << 10

// printApproval prints a for a terminal: every value its asker or a
// decider wrote goes through cell, so none can move the cursor, clear the
// screen or forge a line; the arguments are the redacted copy.
func printApproval(w io.Writer, a approvals.Approval) {
	fmt.Fprintf(w, "%s  %s\n", cell(a.ID, 64), cell(string(a.Status), 16))
	fmt.Fprintf(w, "  capability  %s (%s)\n", cell(a.Capability, 96), cell(string(a.Risk), 32))
	fmt.Fprintf(w, "  asked by    user %s, token %s (role %s, scope %s)\n", cell(a.UserID, 64), cell(a.TokenLabel, 64), cell(a.Role, 64), cell(a.Scope, 16))
	fmt.Fprintf(w, "  arguments   %s\n", cell(string(a.Shown), maxShown))
	fmt.Fprintf(w, "  created     %s, expires %s\n", a.CreatedAt.Format(time.RFC3339), a.ExpiresAt.Format(time.RFC3339))
	if a.DecidedBy != "" {
		fmt.Fprintf(w, "  decided     by %s at %s", cell(a.DecidedBy, 64), a.DecidedAt.Format(time.RFC3339))
		if a.Reason != "" {
			fmt.Fprintf(w, ": %s", cell(a.Reason, approvals.MaxReason))
		}
		fmt.Fprintln(w)
	}
	if a.Status == approvals.Done {
		switch a.Outcome.Kind {
		case approvals.OutcomeResult:
			fmt.Fprintf(w, "  outcome     ran at %s: %s\n", a.FinishedAt.Format(time.RFC3339), cell(string(a.Outcome.Result), maxShown))
		default:
			fmt.Fprintf(w, "  outcome     %s at %s: %s\n", cell(string(a.Outcome.Kind), 16), a.FinishedAt.Format(time.RFC3339), cell(a.Outcome.Message, maxShown))
		}
	}
}

// approvalJSON is a request as -json prints it.
type approvalJSON struct {
	ID         string          `json:"id"`
	Status     string          `json:"status"`
	Capability string          `json:"capability"`
	Risk       string          `json:"risk"`
	UserID     string          `json:"user_id"`
	Token      string          `json:"token"`
	Role       string          `json:"role"`
	Scope      string          `json:"scope"`
	Arguments  json.RawMessage `json:"arguments"`
	CreatedAt  time.Time       `json:"created_at"`
	ExpiresAt  time.Time       `json:"expires_at"`
	DecidedBy  string          `json:"decided_by,omitempty"`
	DecidedAt  *time.Time      `json:"decided_at,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Outcome    *outcomeJSON    `json:"outcome,omitempty"`
}

type outcomeJSON struct {
	Kind    string          `json:"kind"`
	Result  json.RawMessage `json:"result,omitempty"`
	Message string          `json:"message,omitempty"`
}

func printApprovalJSON(w io.Writer, a approvals.Approval) {
	out := approvalJSON{ID: a.ID, Status: string(a.Status), Capability: a.Capability, Risk: string(a.Risk), UserID: a.UserID,
		Token: a.TokenLabel, Role: a.Role, Scope: a.Scope, Arguments: a.Shown, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		DecidedBy: a.DecidedBy, Reason: a.Reason}
	if !json.Valid(out.Arguments) {
		out.Arguments, _ = json.Marshal(string(a.Shown))
	}
	if !a.DecidedAt.IsZero() {
		out.DecidedAt = &a.DecidedAt
	}
	if a.Status == approvals.Done {
		out.Outcome = &outcomeJSON{Kind: string(a.Outcome.Kind), Message: a.Outcome.Message}
		if json.Valid(a.Outcome.Result) {
			out.Outcome.Result = a.Outcome.Result
		}
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(w, "%s\n", b)
}
