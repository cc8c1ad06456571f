package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Kind says whether a capability only reads or acts on someone's behalf.
type Kind uint8

const (
	// Read capabilities change nothing.
	Read Kind = iota + 1
	// Action capabilities change state for the bound user.
	Action
)

func (k Kind) String() string {
	switch k {
	case Read:
		return "read"
	case Action:
		return "action"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Capability is one thing a principal may call.
type Capability struct {
	// Name is dotted and unique across all plugins, e.g. "booking.cancel".
	Name        string
	Description string
	Kind        Kind
	// InputSchema and OutputSchema are JSON Schema documents.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Pack is the operator toggle the capability belongs to.
	Pack string
	// Permission is what the caller's role must hold.
	Permission string
	// OwnerGuarded asks the providing plugin who owns the target before the
	// call, and refuses callers who are not that user.
	OwnerGuarded bool
	// Destructive marks an action whose effect the caller cannot undo.
	Destructive bool
	// Plugin names the plugin that provides the capability.
	Plugin string
}

// Entry is a registered capability with its compiled input schema.
type Entry struct {
	Capability
	input *jsonschema.Resolved
}

// ValidateArgs checks raw JSON arguments against the input schema. An absent
// body (nil or "null") counts as the empty object, as MCP clients commonly
// omit arguments for tools that take none.
func (e *Entry) ValidateArgs(raw json.RawMessage) error {
	var v any
	if len(raw) == 0 || string(raw) == "null" {
		v = map[string]any{}
	} else if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("arguments must be a JSON object")
	}
	return e.input.Validate(v)
}

// namePattern is the capability naming rule: lower-case dotted segments.
// It is also a valid MCP tool name.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

// Registry is the set of callable capabilities. Build it with Add, then treat
// it as read-only.
type Registry struct {
	byName  map[string]*Entry
	ordered []*Entry
	packs   map[string]bool
}

// New returns an empty registry that accepts capabilities of the given packs.
func New(knownPacks []string) *Registry {
	r := &Registry{byName: map[string]*Entry{}, packs: map[string]bool{}}
	for _, p := range knownPacks {
		r.packs[p] = true
	}
	return r
}

// Add validates c and registers it. The error says what is wrong with the
// declaration, so the host can refuse to start with a message that names the
// plugin and the capability.
func (r *Registry) Add(c Capability) error {
	if !namePattern.MatchString(c.Name) {
		return fmt.Errorf("capability %q: name must be lower-case dotted segments like \"booking.get\"", c.Name)
	}
	if prev, dup := r.byName[c.Name]; dup {
		return fmt.Errorf("capability %q: already provided by plugin %q", c.Name, prev.Plugin)
	}
	if c.Kind != Read && c.Kind != Action {
		return fmt.Errorf("capability %q: kind must be read or action", c.Name)
	}
	if !r.packs[c.Pack] {
		return fmt.Errorf("capability %q: unknown pack %q (known: %s)", c.Name, c.Pack, strings.Join(r.KnownPacks(), ", "))
	}
	in, err := compile(c.InputSchema)
	if err != nil {
		return fmt.Errorf("capability %q: input schema: %w", c.Name, err)
	}
	if len(c.OutputSchema) > 0 {
		if _, err := compile(c.OutputSchema); err != nil {
			return fmt.Errorf("capability %q: output schema: %w", c.Name, err)
		}
	}
	e := &Entry{Capability: c, input: in}
	r.byName[c.Name] = e
	i, _ := slices.BinarySearchFunc(r.ordered, c.Name, func(e *Entry, n string) int { return strings.Compare(e.Name, n) })
	r.ordered = slices.Insert(r.ordered, i, e)
	return nil
}

func compile(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		return nil, errors.New("missing")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("type must be \"object\", got %q", s.Type)
	}
	res, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Lookup returns the named capability.
func (r *Registry) Lookup(name string) (*Entry, bool) {
	e, ok := r.byName[name]
	return e, ok
}

// All returns every capability in name order. The slice is shared: do not
// modify it.
func (r *Registry) All() []*Entry { return r.ordered }

// KnownPacks returns the packs capabilities may belong to, sorted.
func (r *Registry) KnownPacks() []string {
	out := make([]string, 0, len(r.packs))
	for p := range r.packs {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
