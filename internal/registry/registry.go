package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
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

// Risk is how much harm a call can do, and so what it takes to run it.
// The zero value is RiskSafe.
type Risk string

const (
	// RiskSafe runs once the gate admits it.
	RiskSafe Risk = "safe"
	// RiskReviewRequired runs once the caller's user confirms it in the
	// client, or a human approver approves it when the client cannot ask.
	RiskReviewRequired Risk = "review_required"
	// RiskDangerous runs only once a human approver approves it.
	RiskDangerous Risk = "dangerous"
	// RiskBlocked never runs.
	RiskBlocked Risk = "blocked"
)

// Risks are the levels, least first.
var Risks = []Risk{RiskSafe, RiskReviewRequired, RiskDangerous, RiskBlocked}

// Valid reports whether r is one of Risks (or empty, which is safe).
func (r Risk) Valid() bool { return r == "" || slices.Contains(Risks, r) }

// OrSafe is r with the empty level read as RiskSafe.
func (r Risk) OrSafe() Risk {
	if r == "" {
		return RiskSafe
	}
	return r
}

// RiskNames lists the levels for a message: "safe, review_required, ...".
func RiskNames() string {
	names := make([]string, len(Risks))
	for i, r := range Risks {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// TaskSupport is whether a capability's calls may run as tasks (the MCP
// tasks extension): answered at once with a handle the client polls while
// the call runs in the background. The zero value is TaskForbidden.
type TaskSupport string

const (
	// TaskForbidden: every call runs while its caller waits.
	TaskForbidden TaskSupport = ""
	// TaskOptional: a call runs as a task when its client can poll one.
	TaskOptional TaskSupport = "optional"
	// TaskRequired: a call runs only as a task.
	TaskRequired TaskSupport = "required"
)

// Capability is one thing a principal may call.
type Capability struct {
	// Name is unique across all plugins, lower-case segments joined by
	// dots: "booking.cancel" (the convention) or "echo_text" (see
	// ValidName).
	Name        string
	Description string
	Kind        Kind
	// InputSchema and OutputSchema are JSON Schema documents.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	// Pack is the operator toggle the capability belongs to.
	Pack string
	// Permission is what the caller's role must hold: a dotted name such as
	// "booking.read", never a wildcard (wildcards belong to roles). Empty
	// means any caller whose scope allows the kind.
	Permission string
	// OwnerGuarded makes the providing plugin decide, in the call itself,
	// whether the target belongs to the caller, refusing the call if not.
	OwnerGuarded bool
	// Destructive marks an action whose effect the caller cannot undo.
	Destructive bool
	// Risk is the plugin's default level for the capability; the
	// operator's policy may override it. Empty is RiskSafe.
	Risk Risk
	// TaskSupport is whether its calls may run as tasks.
	TaskSupport TaskSupport
	// Plugin names the plugin that provides the capability.
	Plugin string

	// Title is a short name for people (Name stays the identifier); empty
	// for none. At most MaxTitleLength characters.
	Title string
	// Icons are images a user interface may show beside the capability.
	Icons []Icon
	// IdempotentHint and OpenWorldHint, when set, are what clients are told
	// instead of the defaults the kind implies (a read is idempotent, an
	// action is not; a capability works on the platform's own data, not an
	// open world). Hints, never guarantees: the gate does not rely on them.
	IdempotentHint, OpenWorldHint *bool
}

// Entry is a registered capability with its compiled input schema.
type Entry struct {
	Capability
	input *jsonschema.Resolved
	// output is the compiled output schema, nil when none is declared.
	output *jsonschema.Resolved
	// inputFast and outputFast vouch for most valid values at a fraction
	// of the validator's cost (see fastCheck); nil when the schema uses a
	// keyword they do not handle.
	inputFast, outputFast *fastCheck
	// emptyErr is the input schema's verdict on the empty object, computed
	// once at Add: calls to tools that take no arguments are the common case
	// and need no decoding or schema walk.
	emptyErr error
	// maxString is the most characters any string in valid arguments may
	// have, or -1 when the schema leaves some string unbounded.
	maxString int
	// Sensitive are the argument paths the input schema marks with
	// SensitiveKeyword: keys from the root, "*" for any element or member.
	Sensitive [][]string
}

// NoArgs reports whether raw is an absent argument body: empty, blank, or
// the JSON null. Such a body stands for the empty object.
func NoArgs(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// ValidateArgs checks raw JSON arguments against the input schema. An absent
// body (see NoArgs) counts as the empty object, as MCP clients commonly
// omit arguments for tools that take none.
func (e *Entry) ValidateArgs(raw json.RawMessage) error {
	if NoArgs(raw) || string(bytes.TrimSpace(raw)) == "{}" {
		return e.emptyErr
	}
	if err := e.checkShape(raw); err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return errors.New("arguments must be a JSON object")
	}
	// The decoded value kept the last of two same-named members; what a
	// plugin or an approver reads of the raw bytes may not.
	if d := DuplicateMember(raw); d != nil {
		return d
	}
	if len(m) == 0 {
		return e.emptyErr
	}
	return validate(e.inputFast, e.input, m)
}

// ValidateResult checks a capability's JSON result against its output
// schema; with no output schema declared, any result passes. A
// mismatch is a bug in the providing plugin.
func (e *Entry) ValidateResult(raw json.RawMessage) error {
	if e.output == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("result is not valid JSON: %w", err)
	}
	if m, ok := v.(map[string]any); ok {
		return validate(e.outputFast, e.output, m)
	}
	// A value of another type is checked by the schema alone, which says
	// whether it admits it.
	return e.output.Validate(v)
}

// ObjectOutput reports whether the output schema admits only JSON objects
// (its root type is "object"), the only output schema MCP revisions
// before 2026-07-28 allow; false when there is none.
func (e *Entry) ObjectOutput() bool {
	if len(e.OutputSchema) == 0 {
		return false
	}
	var root struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(e.OutputSchema, &root) == nil && root.Type == "object"
}

// namePattern is the capability naming rule: one or more lower-case
// segments joined by dots, such as "booking.cancel" or "echo_text". A
// dotted name says which plugin's family it belongs to and is the
// convention; an undotted one is allowed because MCP tool names need no
// dot and fixtures written for other servers use plain snake_case. Either
// is a valid MCP tool name (at most MaxNameLength of [A-Za-z0-9_.-]), a
// single REST path segment, and a YAML key in the operator's policies,
// with nothing to escape in any of them.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// MaxNameLength is the longest capability name, the bound MCP sets on tool
// names.
const MaxNameLength = 128

// ValidName reports whether name follows the capability naming rule.
func ValidName(name string) bool {
	return len(name) <= MaxNameLength && namePattern.MatchString(name)
}

// permissionPattern is what a capability may require: the permission
// grammar roles use, without the wildcards.
var permissionPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*$`)

// Registry is the set of callable capabilities. Build it with Add, then treat
// it as read-only.
type Registry struct {
	byName  map[string]*Entry
	ordered []*Entry
	packs   map[string]bool
	res     resources
	prompts prompts
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
	if !ValidName(c.Name) {
		return fmt.Errorf("capability %q: name must be lower-case segments of [a-z][a-z0-9_]* joined by dots, like \"booking.get\" or \"echo_text\", at most %d characters", c.Name, MaxNameLength)
	}
	if prev, dup := r.byName[c.Name]; dup {
		return fmt.Errorf("capability %q: already provided by plugin %q", c.Name, prev.Plugin)
	}
	if c.Kind != Read && c.Kind != Action {
		return fmt.Errorf("capability %q: kind must be read or action", c.Name)
	}
	if !c.Risk.Valid() {
		return fmt.Errorf("capability %q: risk %q must be one of %s", c.Name, c.Risk, RiskNames())
	}
	if !r.packs[c.Pack] {
		return fmt.Errorf("capability %q: unknown pack %q (known: %s)", c.Name, c.Pack, strings.Join(r.KnownPacks(), ", "))
	}
	if c.Permission != "" && !permissionPattern.MatchString(c.Permission) {
		return fmt.Errorf("capability %q: permission %q must be a dotted name like \"booking.read\" (wildcards belong to roles)", c.Name, c.Permission)
	}
	if err := CheckPresentation(&c); err != nil {
		return fmt.Errorf("capability %q: %w", c.Name, err)
	}
	in, inFast, err := compile(c.InputSchema, true)
	if err != nil {
		return fmt.Errorf("capability %q: input schema: %w", c.Name, err)
	}
	var parsed jsonschema.Schema
	if err := json.Unmarshal(c.InputSchema, &parsed); err == nil {
		if err := CheckParamHeaders(&parsed); err != nil {
			return fmt.Errorf("capability %q: input schema: %w", c.Name, err)
		}
	}
	var (
		out     *jsonschema.Resolved
		outFast *fastCheck
	)
	if len(c.OutputSchema) > 0 {
		if out, outFast, err = compile(c.OutputSchema, false); err != nil {
			return fmt.Errorf("capability %q: output schema: %w", c.Name, err)
		}
	}
	e := &Entry{
		Capability: c, input: in, output: out, inputFast: inFast, outputFast: outFast,
		emptyErr: in.Validate(map[string]any{}), maxString: longestString(c.InputSchema),
		Sensitive: sensitivePaths(c.InputSchema),
	}
	r.byName[c.Name] = e
	i, _ := slices.BinarySearchFunc(r.ordered, c.Name, func(e *Entry, n string) int { return strings.Compare(e.Name, n) })
	r.ordered = slices.Insert(r.ordered, i, e)
	return nil
}

// compile resolves a declared schema for the general validator and, when
// it can, compiles its fast check too (nil when it cannot).
func compile(raw json.RawMessage, object bool) (*jsonschema.Resolved, *fastCheck, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil, errors.New("missing")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	// Arguments are always an object; a result may be any JSON value
	// (MCP 2026-07-28 takes any as structuredContent).
	if object && s.Type != "object" {
		if s.Types != nil {
			return nil, nil, fmt.Errorf("type must be \"object\", got %q", s.Types)
		}
		return nil, nil, fmt.Errorf("type must be \"object\", got %q", s.Type)
	}
	// The validator accepts only these dialects and would otherwise fail
	// every call at run time instead of failing the declaration now.
	if !dialects[s.Schema] {
		return nil, nil, fmt.Errorf("unsupported $schema %q (use draft 2020-12 or draft-07)", s.Schema)
	}
	if err := checkTypeNames(&s); err != nil {
		return nil, nil, err
	}
	// Compiled before Resolve, which may annotate the schema it is given.
	fast, _ := compileFast(&s, "#")
	res, err := s.Resolve(nil)
	if err != nil {
		return nil, nil, err
	}
	return res, fast, nil
}

// dialects are the $schema values the validator accepts, "" being the
// default, draft 2020-12.
var dialects = map[string]bool{
	"": true, "https://json-schema.org/draft/2020-12/schema": true,
	"http://json-schema.org/draft-07/schema#": true, "https://json-schema.org/draft-07/schema#": true,
}

// jsonTypes are the type names JSON Schema defines. The resolver does not
// check them, and a misspelt one would reject every value at call time.
var jsonTypes = map[string]bool{
	"null": true, "boolean": true, "object": true, "array": true,
	"number": true, "integer": true, "string": true,
}

// checkTypeNames reports the first unknown type name in s or any schema
// nested in it.
func checkTypeNames(s *jsonschema.Schema) error {
	for _, t := range append([]string{s.Type}, s.Types...) {
		if t != "" && !jsonTypes[t] {
			return fmt.Errorf("unknown type %q", t)
		}
	}
	var err error
	eachChild(s, func(c *jsonschema.Schema) bool {
		err = checkTypeNames(c)
		return err == nil
	})
	return err
}

var (
	schemaPtr   = reflect.TypeFor[*jsonschema.Schema]()
	schemaSlice = reflect.TypeFor[[]*jsonschema.Schema]()
	schemaMap   = reflect.TypeFor[map[string]*jsonschema.Schema]()
)

// eachChild calls f on every schema directly nested in s, whatever keyword
// holds it, until f returns false.
func eachChild(s *jsonschema.Schema, f func(*jsonschema.Schema) bool) {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		switch fv := v.Field(i); fv.Type() {
		case schemaPtr:
			if c := fv.Interface().(*jsonschema.Schema); c != nil && !f(c) {
				return
			}
		case schemaSlice:
			for _, c := range fv.Interface().([]*jsonschema.Schema) {
				if c != nil && !f(c) {
					return
				}
			}
		case schemaMap:
			m := fv.Interface().(map[string]*jsonschema.Schema)
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if c := m[k]; c != nil && !f(c) {
					return
				}
			}
		}
	}
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
