package registry

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Prompt is a message template a plugin offers, which a client shows its
// user and the plugin renders with the caller's arguments. The gate admits
// a caller to it as to a read capability of its Pack and Permission.
type Prompt struct {
	// Name is lower-case segments joined by dots, unique among prompts and
	// capabilities (the operator's kill switch names either).
	Name        string
	Title       string
	Description string
	Arguments   []PromptArgument
	Pack        string
	// Permission is what the caller's role must hold; empty means none.
	Permission string
	// Plugin names the plugin that renders the prompt.
	Plugin string
}

// PromptArgument is one string argument of a prompt.
type PromptArgument struct {
	// Name is as the client sends it: letters, digits, '_', '-' and '.'.
	Name        string
	Title       string
	Description string
	Required    bool
	// Completes says the plugin suggests values for it.
	Completes bool
	// MaxLength bounds the value in characters; 0 is
	// DefaultPromptArgumentLength.
	MaxLength int
}

// Bounds of a prompt declaration and of the values a caller sends it.
const (
	MaxPromptNameLength         = 128
	MaxPromptTitleBytes         = 256
	MaxPromptDescriptionBytes   = 4096
	MaxPromptArguments          = 32
	MaxPromptArgumentNameLength = 64
	// DefaultPromptArgumentLength is an argument's bound when it declares
	// none; MaxPromptArgumentLength is the most one may declare.
	DefaultPromptArgumentLength = 4096
	MaxPromptArgumentLength     = 64 << 10
)

// promptNamePattern is the capability naming rule, dots optional: MCP
// prompt names need none, and fixtures written for other servers use plain
// snake_case.
var promptNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// promptArgPattern is what an argument may be called: an identifier in
// the styles clients use ("arg1", "resourceUri", "check-in").
var promptArgPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// Capability is p as the gate checks it: a read capability of its name,
// pack and permission.
func (p *Prompt) Capability() Capability {
	return Capability{Name: p.Name, Kind: Read, Pack: p.Pack, Permission: p.Permission, Plugin: p.Plugin}
}

// Argument returns the declared argument called name.
func (p *Prompt) Argument(name string) (*PromptArgument, bool) {
	for i := range p.Arguments {
		if p.Arguments[i].Name == name {
			return &p.Arguments[i], true
		}
	}
	return nil, false
}

// Limit is the most characters a value of a may have.
func (a *PromptArgument) Limit() int {
	if a.MaxLength > 0 {
		return a.MaxLength
	}
	return DefaultPromptArgumentLength
}

// CheckValue reports what is wrong with v as a value of a.
func (a *PromptArgument) CheckValue(v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("argument %q is not valid UTF-8", a.Name)
	}
	if n := utf8.RuneCountInString(v); n > a.Limit() {
		return fmt.Errorf("argument %q has %d characters, more than its limit of %d", a.Name, n, a.Limit())
	}
	return nil
}

// CheckArguments reports what is wrong with args as p's arguments: a
// required one missing, one p does not declare, a value over its bound.
// The message names arguments the caller sent only when p declares them,
// so it never echoes an unbounded name.
func (p *Prompt) CheckArguments(args map[string]string) error {
	for name, v := range args {
		a, ok := p.Argument(name)
		if !ok {
			if len(name) > MaxPromptArgumentNameLength {
				name = name[:MaxPromptArgumentNameLength] + "…"
			}
			return fmt.Errorf("prompt %s takes no argument %q (it takes: %s)", p.Name, name, p.argumentNames())
		}
		if err := a.CheckValue(v); err != nil {
			return err
		}
	}
	for _, a := range p.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			return fmt.Errorf("prompt %s needs argument %q", p.Name, a.Name)
		}
	}
	return nil
}

func (p *Prompt) argumentNames() string {
	if len(p.Arguments) == 0 {
		return "none"
	}
	names := make([]string, len(p.Arguments))
	for i, a := range p.Arguments {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}

// prompts is the registry's set of prompts.
type prompts struct {
	byName  map[string]*Prompt
	ordered []*Prompt
}

// AddPrompt validates p and registers it. The error names every problem
// of the declaration at once. Capabilities are registered first: a prompt
// may not take a capability's name, as the operator's switches and
// policies name either.
func (r *Registry) AddPrompt(p Prompt) error {
	if err := r.checkPrompt(&p); err != nil {
		return err
	}
	if r.prompts.byName == nil {
		r.prompts.byName = map[string]*Prompt{}
	}
	p.Arguments = slices.Clone(p.Arguments)
	r.prompts.byName[p.Name] = &p
	i, _ := slices.BinarySearchFunc(r.prompts.ordered, p.Name, func(e *Prompt, n string) int { return strings.Compare(e.Name, n) })
	r.prompts.ordered = slices.Insert(r.prompts.ordered, i, &p)
	return nil
}

func (r *Registry) checkPrompt(p *Prompt) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case len(p.Name) > MaxPromptNameLength || !promptNamePattern.MatchString(p.Name):
		bad("name must be lower-case segments of [a-z][a-z0-9_]* joined by dots, like \"booking.plan_visit\", at most %d characters", MaxPromptNameLength)
	case r.prompts.byName[p.Name] != nil:
		bad("already provided by plugin %q", r.prompts.byName[p.Name].Plugin)
	case r.byName[p.Name] != nil:
		bad("a capability of plugin %q has this name", r.byName[p.Name].Plugin)
	}
	checkText := func(what, s string, limit int) {
		if !utf8.ValidString(s) {
			bad("%s is not valid UTF-8", what)
		} else if len(s) > limit {
			bad("%s is %d bytes, more than %d", what, len(s), limit)
		}
	}
	checkText("title", p.Title, MaxPromptTitleBytes)
	checkText("description", p.Description, MaxPromptDescriptionBytes)
	if !r.packs[p.Pack] {
		bad("unknown pack %q (known: %s)", p.Pack, strings.Join(r.KnownPacks(), ", "))
	}
	if p.Permission != "" && !permissionPattern.MatchString(p.Permission) {
		bad("permission %q must be a dotted name like \"booking.read\" (wildcards belong to roles)", p.Permission)
	}
	if len(p.Arguments) > MaxPromptArguments {
		bad("%d arguments, more than %d", len(p.Arguments), MaxPromptArguments)
	}
	seen := map[string]bool{}
	for i, a := range p.Arguments {
		where := fmt.Sprintf("argument %d", i)
		if len(a.Name) <= MaxPromptArgumentNameLength && promptArgPattern.MatchString(a.Name) {
			where = fmt.Sprintf("argument %q", a.Name)
		} else {
			bad("%s: name must match %s, at most %d characters", where, promptArgPattern, MaxPromptArgumentNameLength)
		}
		if seen[a.Name] {
			bad("%s: declared twice", where)
		}
		seen[a.Name] = true
		checkText(where+": title", a.Title, MaxPromptTitleBytes)
		checkText(where+": description", a.Description, MaxPromptDescriptionBytes)
		if a.MaxLength < 0 || a.MaxLength > MaxPromptArgumentLength {
			bad("%s: max length %d is outside 0 to %d", where, a.MaxLength, MaxPromptArgumentLength)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("prompt %q: %w", p.Name, errors.Join(errs...))
}

// LookupPrompt returns the named prompt.
func (r *Registry) LookupPrompt(name string) (*Prompt, bool) {
	p, ok := r.prompts.byName[name]
	return p, ok
}

// Prompts returns every prompt in name order. The slice is shared: do not
// modify it.
func (r *Registry) Prompts() []*Prompt { return r.prompts.ordered }
