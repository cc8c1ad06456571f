package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/applog"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

const capabilitiesUsage = "usage: capgate capabilities -c FILE (-token-label LABEL | -role ROLE -scope read|action|admin [-user ID]) [-json]\n" +
	"       (or, with neither, the token in CAPGATE_TOKEN)"

// tokenEnv may hold a token's secret, so it never has to be typed on a
// command line, where other users and the shell's history see it.
const tokenEnv = "CAPGATE_TOKEN"

// verdict is the gate's answer for one capability, as -json writes it:
// every field always present, step and reason empty when allowed.
type verdict struct {
	Capability string `json:"capability"`
	Pack       string `json:"pack"`
	Kind       string `json:"kind"`
	Risk       string `json:"risk"`
	Allowed    bool   `json:"allowed"`
	Step       string `json:"step"`
	Reason     string `json:"reason"`
}

// capabilities prints what a principal may call on the host a
// configuration describes, and for everything else the step that refuses
// it and why: the gate's own answer (dispatch.Dispatcher.Check), from the
// plugins started as validate starts them.
func capabilities(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("capgate capabilities", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("c", "", "configuration file (YAML)")
	label := fs.String("token-label", "", "a configured token's label (tokens[N].label)")
	role := fs.String("role", "", "a configured role, with -scope")
	scope := fs.String("scope", "", "read, action or admin, with -role")
	user := fs.String("user", "", "the user the principal acts for, with -role (none when empty)")
	asJSON := fs.Bool("json", false, "one JSON object a line")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(stderr, capabilitiesUsage)
		return 2
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "capgate capabilities: %s\n%s\n", msg, capabilitiesUsage)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", clipArg(fs.Arg(0))))
	case *path == "":
		return usage("-c FILE is required")
	case set["token-label"] && (set["role"] || set["scope"] || set["user"]):
		return usage("give -token-label or -role and -scope, not both")
	case !set["token-label"] && (set["role"] != set["scope"]):
		return usage("-role and -scope go together")
	case set["user"] && !set["role"]:
		return usage("-user goes with -role and -scope")
	case set["scope"] && !dispatch.Scope(*scope).Valid():
		return usage(fmt.Sprintf("-scope %q is not one of read, action, admin", clipArg(*scope)))
	case set["token-label"] && *label == "", set["role"] && *role == "":
		return usage("an empty -token-label or -role names nothing")
	}
	secret := os.Getenv(tokenEnv)
	if !set["token-label"] && !set["role"] && secret == "" {
		return usage("say whose reach to show: -token-label, -role and -scope, or " + tokenEnv)
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var p dispatch.Principal
	var who string
	switch {
	case set["token-label"]:
		i := slices.IndexFunc(cfg.Tokens, func(t config.Token) bool { return t.Label == *label })
		if i < 0 {
			return usage(fmt.Sprintf("no token in %s is labelled %q; labelled: %s", *path, clipArg(*label), listed(labels(cfg.Tokens))))
		}
		t := cfg.Tokens[i]
		p = dispatch.Principal{Role: t.Role, Scope: t.Scope, UserID: t.UserID, Token: t.Label}
		who = fmt.Sprintf("token %q", t.Label)
	case set["role"]:
		if _, ok := cfg.Roles[*role]; !ok {
			return usage(fmt.Sprintf("role %q is not defined under roles in %s; defined: %s", clipArg(*role), *path, listed(slices.Sorted(maps.Keys(cfg.Roles)))))
		}
		p = dispatch.Principal{Role: *role, Scope: dispatch.Scope(*scope), UserID: *user}
		who = "principal"
	default:
		// Authenticated as the host would: the secret is hashed and looked
		// up, never printed.
		var ok bool
		if p, ok = auth.New(cfg.Tokens).Authenticate("Bearer " + secret); !ok {
			return usage(fmt.Sprintf("the token in %s is none of the tokens in %s", tokenEnv, *path))
		}
		who = fmt.Sprintf("token %q (from %s)", p.Token, tokenEnv)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The plugins' own records matter only when something goes wrong.
	log := applog.New(stderr, max(cfg.Log.Level, slog.LevelWarn), applog.Format(cfg.Log.Format))
	ins, err := app.Inspect(ctx, cfg, app.Options{Version: version, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintf(stderr, "capgate: %s describes a host that would not start; capgate validate -c %s lists every problem\n", *path, *path)
		return 1
	}
	for _, w := range ins.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	verdicts := reach(ins.Gate, p)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, v := range verdicts {
			if err := enc.Encode(v); err != nil {
				fmt.Fprintln(stderr, "capgate:", err)
				return 1
			}
		}
		return 0
	}
	allowed := 0
	for _, v := range verdicts {
		if v.Allowed {
			allowed++
		}
	}
	boundTo := "no user"
	if p.UserID != "" {
		boundTo = "user " + cell(p.UserID, 64)
	}
	fmt.Fprintf(stdout, "%s: role %s, scope %s, %s: %d of %d capabilities allowed\n\n", who, p.Role, p.Scope, boundTo, allowed, len(verdicts))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPABILITY\tKIND\tRISK\tVERDICT")
	for _, v := range verdicts {
		answer := "allowed"
		switch {
		case !v.Allowed:
			answer = "refused at " + cell(v.Step, 32) + ": " + cell(v.Reason, maxTableReason)
		case v.Risk == "dangerous":
			answer = "allowed, then held for an approver"
		case v.Risk == "review_required":
			answer = "allowed, then confirmed by the user (2026-07-28 clients that can ask) or held for an approver"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Capability, v.Kind, v.Risk, answer)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "capgate:", err)
		return 1
	}
	if ins.Switch.ActionsOff {
		fmt.Fprintf(stdout, "\nthe shared kill switch is off (set by %s): no action is allowed until `capgate actions on`\n", cell(ins.Switch.ChangedBy, 64))
	}
	return 0
}

// reach is the gate's verdict on every capability for p, in name order.
func reach(gate *dispatch.Dispatcher, p dispatch.Principal) []verdict {
	all := gate.Registry().All()
	out := make([]verdict, 0, len(all))
	for _, e := range all {
		v := verdict{Capability: e.Name, Pack: e.Pack, Kind: e.Kind.String(), Risk: string(gate.Risk(&e.Capability)), Allowed: true}
		if r := gate.Check(p, &e.Capability); r != nil {
			v.Allowed, v.Step, v.Reason = false, string(r.Step), r.Reason
		}
		out = append(out, v)
	}
	return out
}

func labels(tokens []config.Token) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = t.Label
	}
	return out
}

// listed names known values in a message, bounded: a file may configure
// a token per user.
func listed(names []string) string {
	const most = 20
	switch {
	case len(names) == 0:
		return "none"
	case len(names) > most:
		return strings.Join(names[:most], ", ") + fmt.Sprintf(", and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}
