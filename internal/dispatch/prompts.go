package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/registry"
)

// ErrUnknownPrompt is returned for a prompt no plugin provides and, alike,
// for one the caller may not get: a token learns nothing of a prompt it
// cannot use, not even that it exists.
var ErrUnknownPrompt = errors.New("unknown prompt")

// PromptMessage is one message of a rendered prompt.
type PromptMessage struct {
	// Role is "user" or "assistant".
	Role    string
	Content Content
}

// PromptResult is a prompt as its plugin rendered it for one caller.
type PromptResult struct {
	// Description, when set, replaces the prompt's own for this rendering.
	Description string
	Messages    []PromptMessage
}

// PromptRequest is a prompt rendering the gate admitted, as a
// PromptProvider receives it.
type PromptRequest struct {
	Principal Principal
	Prompt    string
	// Args are the checked arguments: every required one present, none
	// undeclared, each within its bound.
	Args   map[string]string
	CallID string
	Origin Origin
	// Input, when set, is what the provider may ask the caller's client
	// while it renders, and the client's answers to the round before, as
	// Request.Input for a call; the provider answers *InputRequired to ask.
	// Nil when the client can be asked nothing.
	Input *InputRound
}

// CompleteRequest asks the provider of a prompt (or of a resource
// template) for suggestions for one of its arguments.
type CompleteRequest struct {
	Principal Principal
	// Prompt names the prompt whose argument is completed; empty when
	// ResourceTemplate names a template instead.
	Prompt, ResourceTemplate string
	// Argument is the argument (or template variable), Value what the
	// caller has typed so far, Context the other arguments already chosen.
	Argument, Value string
	Context         map[string]string
	CallID          string
	Origin          Origin
}

// Completion is the suggestions for an argument, best first.
type Completion struct {
	Values []string
	// Total is how many suggestions there are in all; 0 when unknown.
	Total   int
	HasMore bool
}

// MaxCompletionValues is the most suggestions one answer carries, as MCP
// bounds them.
const MaxCompletionValues = 100

// MaxCompletionValueBytes bounds one suggestion: longer ones are dropped.
const MaxCompletionValueBytes = 1024

// PromptProvider renders prompts and completes their arguments; the plugin
// host implements it per plugin. A *ToolError is returned as is.
type PromptProvider interface {
	GetPrompt(ctx context.Context, r PromptRequest) (PromptResult, error)
	Complete(ctx context.Context, r CompleteRequest) (Completion, error)
}

// MaxPromptMessages bounds a rendered prompt.
const MaxPromptMessages = 64

// VisiblePrompts returns the prompts p may get, in name order, under one
// policy: exactly those GetPrompt admits before it looks at arguments or
// rate limits.
func (d *Dispatcher) VisiblePrompts(p Principal) []*registry.Prompt {
	pol := d.policy.Load()
	all := d.reg.Prompts()
	out := make([]*registry.Prompt, 0, len(all))
	for _, pr := range all {
		c := pr.Capability()
		if check(pol, p, &c) == nil {
			out = append(out, pr)
		}
	}
	return out
}

// prompt is the gate's steps for a prompt: it exists and every
// argument-independent step admits p (else ErrUnknownPrompt, with the
// refusal for the record), and p has calls left. what names the call in
// a rate-limit refusal and the audit record.
func (d *Dispatcher) prompt(ctx context.Context, p Principal, name string, rec *promptRecord) (*registry.Prompt, PromptProvider, error) {
	pol := d.policy.Load()
	pr, ok := d.reg.LookupPrompt(name)
	if !ok {
		if r, err := d.chargeUnseen(ctx, pol, p, name); r != nil || err != nil {
			rec.refusal = r
			return nil, nil, cmp.Or[error](err, r)
		}
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownPrompt, cut(name))
	}
	rec.plugin = pr.Plugin
	c := pr.Capability()
	if r := check(pol, p, &c); r != nil {
		rec.refusal = r
		if lr, err := d.chargeUnseen(ctx, pol, p, name); lr != nil || err != nil {
			rec.refusal = lr
			return nil, nil, cmp.Or[error](err, lr)
		}
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownPrompt, name)
	}
	if r, err := d.limit(ctx, pol, p, pr.Name); r != nil || err != nil {
		if err != nil {
			return nil, nil, err
		}
		rec.refusal = r
		return nil, nil, r
	}
	pp, ok := d.providers[pr.Plugin].(PromptProvider)
	if !ok {
		return nil, nil, fmt.Errorf("prompt %q: plugin %q has no prompt provider", pr.Name, pr.Plugin)
	}
	return pr, pp, nil
}

// GetPrompt is the gate for rendering a prompt: the steps a read
// capability of the prompt's pack and permission passes, the arguments
// checked against the declaration, the state of the round before opened
// when the call brings one (refused at StepInput when the gate cannot
// accept it, as for a call), then the providing plugin. A prompt p may
// not see is ErrUnknownPrompt; bad arguments are a *ToolError
// (InvalidInput); a rate limit is a *Refusal. A provider that asks its
// caller's client (*InputRequired) makes it *NeedsInput, its state sealed
// to this rendering, or *MissingCapability. With an auditor the call
// leaves a Decision named "prompts/get:<name>", naming its round as a
// call's does.
func (d *Dispatcher) GetPrompt(ctx context.Context, p Principal, name string, args map[string]string) (res PromptResult, err error) {
	rec := d.startRecord(ctx, "prompts/get", name, args)
	defer func() { err = d.endRecord(rec, p, err) }()
	pr, pp, err := d.prompt(ctx, p, name, rec)
	if err != nil {
		return PromptResult{}, err
	}
	if err := pr.CheckArguments(args); err != nil {
		return PromptResult{}, &ToolError{Code: InvalidInput, Message: shorten(err.Error())}
	}
	if args == nil {
		args = map[string]string{}
	}
	q, err := promptQuestion(p, pr.Name, args)
	if err != nil {
		return PromptResult{}, err
	}
	round, err := d.openRound(ctx, pr.Name, q, &rec.round)
	if err != nil {
		return PromptResult{}, err
	}
	res, err = pp.GetPrompt(ctx, PromptRequest{Principal: p, Prompt: pr.Name, Args: args, CallID: rec.id, Origin: rec.origin, Input: round})
	if err != nil {
		var ir *InputRequired
		if errors.As(err, &ir) {
			return PromptResult{}, d.sealRound(ctx, pr.Name, pr.Plugin, q, round, ir, &rec.round)
		}
		return PromptResult{}, err
	}
	if err := checkPromptResult(&res); err != nil {
		return PromptResult{}, fmt.Errorf("plugin %q: prompt %s: %w", pr.Plugin, pr.Name, err)
	}
	return res, nil
}

// promptQuestion is what a prompt's rounds are sealed to: the principal,
// the prompt under the name its audit record takes ("prompts/get:<name>",
// which no capability can have, so a round of a prompt never opens as
// one of a call), and its arguments in one canonical form (a JSON object,
// its keys sorted).
func promptQuestion(p Principal, name string, args map[string]string) (Question, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return Question{}, fmt.Errorf("prompt %s: encode its arguments: %w", name, err)
	}
	return Question{Principal: p, Capability: "prompts/get:" + name, Args: raw}, nil
}

// checkPromptResult refuses what no client could be given: no messages,
// too many, or a role MCP does not have.
func checkPromptResult(res *PromptResult) error {
	switch n := len(res.Messages); {
	case n == 0:
		return errors.New("rendered no messages")
	case n > MaxPromptMessages:
		return fmt.Errorf("rendered %d messages, more than %d", n, MaxPromptMessages)
	}
	for i, m := range res.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("message %d: role %q is neither user nor assistant", i, cut(m.Role))
		}
	}
	return nil
}

// CompletePrompt is the gate for completing an argument of a prompt: a
// prompt p may not get is ErrUnknownPrompt, as for GetPrompt; an argument
// the prompt does not declare, or a value or context over its bounds, is
// a *ToolError (InvalidInput). An argument its plugin does not complete
// has no suggestions, and the plugin is not asked.
func (d *Dispatcher) CompletePrompt(ctx context.Context, p Principal, name, argument, value string, given map[string]string) (res Completion, err error) {
	rec := d.startRecord(ctx, "completion/complete", name, map[string]string{"argument": argument, "value": value})
	defer func() { err = d.endRecord(rec, p, err) }()
	pr, pp, err := d.prompt(ctx, p, name, rec)
	if err != nil {
		return Completion{}, err
	}
	a, ok := pr.Argument(argument)
	if !ok {
		return Completion{}, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("prompt %s takes no argument %q", pr.Name, cut(argument))}
	}
	if err := a.CheckValue(value); err != nil {
		return Completion{}, &ToolError{Code: InvalidInput, Message: err.Error()}
	}
	// The context is a partial set of the prompt's arguments: what is
	// there must be declared and bounded, nothing is required.
	for k, v := range given {
		ca, ok := pr.Argument(k)
		if !ok {
			return Completion{}, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("prompt %s takes no argument %q (in the completion context)", pr.Name, cut(k))}
		}
		if err := ca.CheckValue(v); err != nil {
			return Completion{}, &ToolError{Code: InvalidInput, Message: err.Error() + " (in the completion context)"}
		}
	}
	if !a.Completes {
		return Completion{Values: []string{}}, nil
	}
	if given == nil {
		given = map[string]string{}
	}
	res, err = pp.Complete(ctx, CompleteRequest{Principal: p, Prompt: pr.Name, Argument: a.Name, Value: value,
		Context: given, CallID: rec.id, Origin: rec.origin})
	if err != nil {
		return Completion{}, err
	}
	return boundCompletion(res), nil
}

// boundCompletion keeps a provider's answer within what MCP allows: at
// most MaxCompletionValues values, each valid UTF-8 of bounded size.
func boundCompletion(c Completion) Completion {
	vals := make([]string, 0, min(len(c.Values), MaxCompletionValues))
	for _, v := range c.Values {
		if len(vals) == MaxCompletionValues {
			c.HasMore = true
			break
		}
		if utf8.ValidString(v) && len(v) <= MaxCompletionValueBytes {
			vals = append(vals, v)
		}
	}
	c.Values = vals
	if c.Total < 0 || (c.Total > 0 && c.Total < len(vals)) {
		c.Total = len(vals)
	}
	return c
}

// cut bounds a caller's string before it goes into a message.
func cut(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return cutAt(s, n) + "…"
}

// promptRecord is what the gate learns of a prompt call for its audit
// record.
type promptRecord struct {
	id, method, name string
	origin           Origin
	start            time.Time
	args             map[string]string
	plugin           string
	refusal          *Refusal
	// round is what the gate learns of the rendering's round, as of a
	// call's (its input fields alone).
	round call
}

func (d *Dispatcher) startRecord(ctx context.Context, method, name string, args map[string]string) *promptRecord {
	if len(name) > registry.MaxPromptNameLength {
		name = cutAt(name, registry.MaxPromptNameLength) + "…"
	}
	rec := &promptRecord{method: method, name: name, origin: OriginOf(ctx), args: args}
	if d.auditor != nil {
		rec.start = time.Now()
		rec.id = d.auditor.NewID(rec.start)
	}
	return rec
}

// endRecord records a prompt call's decision when an auditor is in use,
// and returns the error its caller gets: a failure that is neither the
// gate's no nor the caller's to fix becomes an *InternalError naming the
// record. The record keeps the real refusal behind an ErrUnknownPrompt.
func (d *Dispatcher) endRecord(rec *promptRecord, p Principal, err error) error {
	if d.auditor == nil {
		return err
	}
	args, _ := json.Marshal(rec.args)
	dec := Decision{
		ID: rec.id, Origin: rec.origin, Time: rec.start, Latency: time.Since(rec.start), Principal: p,
		Capability: rec.method + ":" + rec.name, Plugin: rec.plugin, Args: args,
	}
	switch {
	case rec.round.inputAsked:
		dec.ApprovalID, dec.AskedClient = rec.round.inputID, true
	case rec.round.inputID != "":
		dec.ApprovalID = rec.round.inputID
	}
	switch {
	case err == nil:
	case rec.refusal != nil:
		dec.Refusal = rec.refusal
	case errors.Is(err, ErrUnknownPrompt), errors.Is(err, ErrUnknownResourceTemplate):
		dec.Plugin = ""
		dec.Refusal = &Refusal{Step: StepUnknown, Capability: dec.Capability, Reason: "no plugin provides this"}
	default:
		// As a call's: a refusal (at StepInput), a question for the
		// client, a missing capability, a tool error, or internal.
		err = classify(&dec, err)
	}
	d.auditor.Record(dec)
	return err
}

// ErrUnknownResourceTemplate is returned for completing a variable of a
// resource template no plugin declares and, alike, of one the caller may
// not read.
var ErrUnknownResourceTemplate = errors.New("unknown resource template")

// CompleteResourceTemplate is the gate for completing a variable of a
// plugin's resource template: the caller must pass the steps of a read of
// the template (else ErrUnknownResourceTemplate), the variable must be the
// template's and the value and context bounded (else a *ToolError), and
// the rate limit admit the call (else a *Refusal). The providing plugin
// then suggests values; one without a completer for the variable has
// none. With an auditor the call leaves a Decision named
// "completion/complete:<template>".
func (d *Dispatcher) CompleteResourceTemplate(ctx context.Context, p Principal, uriTemplate, variable, value string, given map[string]string) (res Completion, err error) {
	rec := d.startRecord(ctx, "completion/complete", uriTemplate, map[string]string{"argument": variable, "value": value})
	defer func() { err = d.endRecord(rec, p, err) }()
	t, ok := d.reg.ResourceTemplate(uriTemplate)
	if !ok {
		return Completion{}, fmt.Errorf("%w %q", ErrUnknownResourceTemplate, cut(uriTemplate))
	}
	rec.plugin = t.Plugin
	pol := d.policy.Load()
	c := t.Capability()
	if r := check(pol, p, &c); r != nil {
		rec.refusal = r
		return Completion{}, fmt.Errorf("%w %q", ErrUnknownResourceTemplate, cut(uriTemplate))
	}
	vars := t.Variables()
	bounded := registry.PromptArgument{Name: variable}
	if !slices.Contains(vars, variable) {
		return Completion{}, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("resource template %s has no variable %q", cut(uriTemplate), cut(variable))}
	}
	if err := bounded.CheckValue(value); err != nil {
		return Completion{}, &ToolError{Code: InvalidInput, Message: err.Error()}
	}
	for k, v := range given {
		ca := registry.PromptArgument{Name: k}
		if !slices.Contains(vars, k) {
			return Completion{}, &ToolError{Code: InvalidInput, Message: fmt.Sprintf("resource template %s has no variable %q (in the completion context)", cut(uriTemplate), cut(k))}
		}
		if err := ca.CheckValue(v); err != nil {
			return Completion{}, &ToolError{Code: InvalidInput, Message: err.Error() + " (in the completion context)"}
		}
	}
	if r, err := d.limit(ctx, pol, p, c.Name); r != nil || err != nil {
		if err != nil {
			return Completion{}, err
		}
		rec.refusal = r
		return Completion{}, r
	}
	pp, ok := d.providers[t.Plugin].(PromptProvider)
	if !ok {
		return Completion{}, fmt.Errorf("resource template %q: plugin %q has no completion provider", t.URITemplate, t.Plugin)
	}
	if given == nil {
		given = map[string]string{}
	}
	res, err = pp.Complete(ctx, CompleteRequest{Principal: p, ResourceTemplate: t.URITemplate, Argument: variable, Value: value,
		Context: given, CallID: rec.id, Origin: rec.origin})
	if err != nil {
		return Completion{}, err
	}
	return boundCompletion(res), nil
}
