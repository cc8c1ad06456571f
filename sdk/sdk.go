package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"sync/atomic"

	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Kind says whether a capability only reads or acts for a user.
type Kind int

const (
	// Read capabilities change nothing. A token of any scope may call them.
	Read Kind = 1
	// Action capabilities change state on behalf of the caller's user; the
	// host admits only tokens of scope action (or admin) bound to a user.
	Action Kind = 2
)

// Risk is how much harm a call can do, and so what the host asks before
// running it. It is the plugin's default: the operator may raise or lower
// it per capability or per pack. The zero value is Safe.
type Risk int

const (
	// Safe calls run once the gate admits them.
	Safe Risk = Risk(capgatev1.Risk_RISK_SAFE)
	// ReviewRequired calls run once the caller's user confirms them in the
	// client, or a human approver approves them when the client cannot ask.
	ReviewRequired Risk = Risk(capgatev1.Risk_RISK_REVIEW_REQUIRED)
	// Dangerous calls run only once a human approver approves them.
	Dangerous Risk = Risk(capgatev1.Risk_RISK_DANGEROUS)
	// Blocked calls never run.
	Blocked Risk = Risk(capgatev1.Risk_RISK_BLOCKED)
)

// TaskSupport is whether a capability's calls may run as tasks: a client
// that speaks the MCP tasks extension gets a task handle at once and polls
// it while the call runs in the host's background. The handler is the same
// either way. The zero value is TaskForbidden.
type TaskSupport int

const (
	// TaskForbidden: every call runs while its caller waits.
	TaskForbidden TaskSupport = 0
	// TaskOptional: a call runs as a task when its client can poll one,
	// else while it waits. For work that may take long.
	TaskOptional TaskSupport = TaskSupport(capgatev1.TaskSupport_TASK_SUPPORT_OPTIONAL)
	// TaskRequired: a call runs only as a task; a client that cannot poll
	// one is told so and nothing runs.
	TaskRequired TaskSupport = TaskSupport(capgatev1.TaskSupport_TASK_SUPPORT_REQUIRED)
)

// Scope is what a caller's token may do, whatever its role.
type Scope string

const (
	// ScopeRead calls read capabilities only.
	ScopeRead Scope = "read"
	// ScopeAction calls actions too, for the token's user.
	ScopeAction Scope = "action"
	// ScopeAdmin acts on any user's records: the ownership step admits it.
	ScopeAdmin Scope = "admin"
)

// Principal is the caller, as the host authenticated it.
type Principal struct {
	Role  string
	Scope Scope
	// UserID is the user the caller acts for; empty for an unbound token.
	UserID string
}

// IsAdmin reports whether the caller has the admin scope, which may act on
// any user's records.
func (p Principal) IsAdmin() bool { return p.Scope == ScopeAdmin }

// Call describes the call a handler is serving.
type Call struct {
	Principal Principal
	// ID identifies the call in the host's logs and to the host when the
	// handler calls another capability (Call.Invoke).
	ID string

	host    hostConn  // nil in a plugin no host serves
	kept    *kept     // what the call's Owner kept for its Handler
	notices *notifier // nil when the caller wants no notice
	asks    *asking   // what the call may ask its client; nil when nothing
}

type kept struct{ v any }

// Keep holds v for the rest of the call. An Owner that loads the target
// to name its owner keeps it, and the Handler takes it back with Kept
// instead of loading it again: one read where there would be two. It only
// holds in an owner-checked call (Kept reports false otherwise, as for an
// admin caller, whose call asks no Owner), and goes with the call.
func (c Call) Keep(v any) {
	if c.kept != nil {
		c.kept.v = v
	}
}

// Kept returns what the call's Owner kept with Keep, if it is a T.
func Kept[T any](c Call) (T, bool) {
	if c.kept != nil {
		v, ok := c.kept.v.(T)
		return v, ok
	}
	var zero T
	return zero, false
}

// Tool declares one capability with its typed handler.
//
// In and Out are Go types whose JSON Schemas become the capability's input
// and output schemas: `json` tags name the properties, fields with omitempty
// are optional, and a `jsonschema:"..."` tag describes a field to the agent.
// In must be a struct (or a pointer to one): MCP tool arguments are a JSON
// object. Out may be any type: MCP 2026-07-28 carries any JSON value as
// the structured result, and older revisions, which take only objects
// there, read another value as text. Out may also be Contents (content
// blocks alone: text, images, audio, links, embedded resources) or
// Rich[T] (blocks beside a structured T). Every string, array and map of In is
// bounded: a `capgate:"maxLength=64"` tag (see BoundsTag) declares a
// field's own bounds, and the defaults (DefaultMaxLength, ...) apply where
// none is given. The host refuses arguments over a bound before the handler
// runs, and agents see the bounds in the schema.
type Tool[In, Out any] struct {
	// Name is unique across the host: lower-case segments of
	// [a-z][a-z0-9_]* joined by dots, at most 128 characters. Dotted names
	// ("booking.cancel") are the convention; a plain one ("echo_text") is
	// allowed, as MCP tool names need no dot.
	Name string
	// Description tells an agent when to use the capability.
	Description string
	Kind        Kind
	// Pack is the operator toggle the capability belongs to; empty means
	// the plugin's pack (its name, unless Plugin.SetPack changed it).
	Pack string
	// Permission is what the caller's role must hold. Empty means any
	// authenticated caller whose scope allows the kind.
	Permission string
	// Destructive marks an action whose effect the caller cannot undo.
	Destructive bool
	// Risk is what a call takes to run (Safe when unset): Dangerous for a
	// call a human should approve first, such as one that moves money.
	Risk Risk
	// Title is a short name for people, shown by clients in place of Name
	// (which stays the identifier); at most 128 characters.
	Title string
	// Icons are images a client may show beside the capability: https
	// URLs or data: URIs of images, at most 8.
	Icons []Icon
	// IdempotentHint and OpenWorldHint, when set (new(true), new(false)),
	// replace what clients are told by default: a Read is idempotent and
	// an Action is not; no capability reaches an open world. Set
	// OpenWorldHint for one that talks to systems beyond the platform
	// (the web, a third party's API), IdempotentHint for an action that
	// may safely be repeated with the same arguments.
	IdempotentHint, OpenWorldHint *bool
	// InputSchema, when set, is the input schema itself, for what a Go
	// type cannot say (conditionals, composition, $anchor); In still
	// receives the arguments and should accept every value it admits.
	// It must be an object schema with every string, array and map
	// bounded (no defaults are added to it); sdk.Add panics otherwise.
	// Left empty, the schema is inferred from In.
	InputSchema json.RawMessage
	// Task is whether a call may run as a task (TaskForbidden when unset).
	Task TaskSupport
	// Handler runs the capability.
	Handler func(ctx context.Context, call Call, in In) (Out, error)
	// Owner, when set, makes the capability owner-guarded: it names the
	// user who owns the target in names, and the call is refused, before
	// Handler runs, to callers who are not that user (admin-scope callers
	// excepted, and Owner is then not asked). It returns NotFound for a
	// target that does not exist; a target owned by no one ("") is refused
	// to everyone. Owner and Handler run in the same call, on the same
	// decoded input.
	Owner func(ctx context.Context, call Call, in In) (userID string, err error)
}

// Env is what the host hands a plugin before its first call.
type Env struct {
	// DataDir is a directory that belongs to this plugin alone.
	DataDir string
	// Logger writes to the host's log, tagged with the plugin's name.
	Logger *slog.Logger
	// HostVersion is the capgate build version.
	HostVersion string
	// MaxResults is the host's max_results: the most items a listing
	// capability should return in one call. Never below 1.
	MaxResults int

	config json.RawMessage // the plugin's config block, as JSON
	read   *atomic.Bool    // whether the plugin has read config
	host   hostConn        // the host's services; nil when no host configured the plugin
}

// DecodeConfig decodes the plugin's config block from the host config into
// v, refusing unknown keys so a misspelt option is an error at start-up
// rather than silently ignored. Configure calls it for you.
func (e Env) DecodeConfig(v any) error {
	e.markRead()
	if err := decodeStrict(e.config, v); err != nil {
		return fmt.Errorf("plugin config: %w", err)
	}
	return nil
}

// ConfigJSON returns the plugin's config block as JSON, for a plugin that
// decodes it itself and so takes on refusing what it does not know. A
// plugin that reads its block neither this way nor with DecodeConfig (or
// Configure) gets a start-up error for every key in it.
func (e Env) ConfigJSON() json.RawMessage {
	e.markRead()
	return e.config
}

func (e Env) markRead() {
	if e.read != nil {
		e.read.Store(true)
	}
}

// Plugin is a plugin under construction: create it with New, add tools, then
// Serve it.
type Plugin struct {
	name, version string
	pack          string
	tools         []*tool
	byName        map[string]*tool
	entities      []*capgatev1.EntityType
	providers     map[string]*Entity
	// resources and resourceTemplates are declared with AddResource and
	// AddResourceTemplate; the maps find their readers.
	resources          []*capgatev1.Resource
	resourceTemplates  []*capgatev1.ResourceTemplate
	resourceByURI      map[string]resourceDecl
	resourceByTemplate map[string]resourceDecl
	configure          func(context.Context, Env) error
	// checkConfig checks the config block without configuring the
	// plugin (capgate validate); set by Configure, cleared by an
	// OnConfigure of the author's own, whose function might open anything.
	checkConfig func(context.Context, Env) error
	start       func(context.Context, Env, Start) error
	closers     []func() error
	logger      *slog.Logger
	// prompts are the declared prompts, promptOrder their names in the
	// order declared; completers complete resource template variables.
	prompts     map[string]*prompt
	promptOrder []string
	completers  map[string]map[string]Completer
}

type tool struct {
	desc *capgatev1.Capability
	// invoke decodes args once, runs the ownership step when check is set
	// (refused reports a refusal: nothing ran), then the handler.
	invoke func(ctx context.Context, call Call, args json.RawMessage, check *capgatev1.OwnerCheck) (out answer, refused bool, err error)
}

// answer is a call's outcome as the contract carries it: the structured
// result and the content blocks.
type answer struct {
	result  json.RawMessage
	content []*capgatev1.Content
}

var (
	pluginName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	entityName = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
)

// New starts a plugin description. name is how operators refer to the
// plugin in logs; version is reported to the host.
func New(name, version string) *Plugin {
	if !pluginName.MatchString(name) {
		panic(fmt.Sprintf("sdk.New: plugin name %q must match %s", name, pluginName))
	}
	return &Plugin{
		name: name, version: version, pack: name, logger: newLogger(name),
		byName: map[string]*tool{}, providers: map[string]*Entity{},
		resourceByURI: map[string]resourceDecl{}, resourceByTemplate: map[string]resourceDecl{},
	}
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return p.name }

// SetPack sets the pack of the capabilities added after it that name none
// (Tool.Pack); it starts as the plugin's name.
func (p *Plugin) SetPack(pack string) { p.pack = pack }

// Logger returns the plugin's logger; its records reach the host's log.
func (p *Plugin) Logger() *slog.Logger { return p.logger }

// OnConfigure sets the function the host's configuration reaches. It runs
// once, before any call; an error stops the host's start-up with the
// message, so say which option is wrong.
func (p *Plugin) OnConfigure(f func(ctx context.Context, env Env) error) {
	p.configure, p.checkConfig = f, nil
}

// Start is what the host says when it starts a plugin.
type Start struct {
	// Rebuild asks the plugin to discard what it derived from other
	// plugins (an index, a cache) and rebuild it from its sources before
	// OnStart returns (`capgate search reindex` sets it).
	Rebuild bool
}

// OnStart sets the function run once every plugin is configured and the
// host's registries are complete, before the host serves: from here on
// the Env's Catalogue, Documents, Record and Subscribe answer. Long-running
// work (a subscription) belongs in a goroutine stopped by OnClose; an error
// stops the host's start-up with the message.
func (p *Plugin) OnStart(f func(ctx context.Context, env Env, s Start) error) { p.start = f }

// OnClose adds a function run when the host stops the plugin, in reverse
// order of registration (close what was opened last first).
func (p *Plugin) OnClose(f func() error) { p.closers = append(p.closers, f) }

// Add declares a capability. It panics on a declaration that can never work
// (no handler, a duplicate name, types without a JSON Schema), as these are
// programming errors found the first time the plugin starts.
func Add[In, Out any](p *Plugin, t Tool[In, Out]) {
	if t.Handler == nil {
		panic(fmt.Sprintf("sdk.Add %q: Handler is nil", t.Name))
	}
	if _, dup := p.byName[t.Name]; dup {
		panic(fmt.Sprintf("sdk.Add %q: capability declared twice", t.Name))
	}
	if t.Kind != Read && t.Kind != Action {
		panic(fmt.Sprintf("sdk.Add %q: Kind must be sdk.Read or sdk.Action", t.Name))
	}
	if t.Risk < 0 || t.Risk > Blocked {
		panic(fmt.Sprintf("sdk.Add %q: Risk must be sdk.Safe, sdk.ReviewRequired, sdk.Dangerous or sdk.Blocked", t.Name))
	}
	if t.Task != TaskForbidden && t.Task != TaskOptional && t.Task != TaskRequired {
		panic(fmt.Sprintf("sdk.Add %q: Task must be sdk.TaskForbidden, sdk.TaskOptional or sdk.TaskRequired", t.Name))
	}
	if t.Pack == "" {
		t.Pack = p.pack
	}
	var in []byte
	if len(t.InputSchema) > 0 {
		var err error
		if in, err = declaredSchema(t.InputSchema); err != nil {
			panic(fmt.Sprintf("sdk.Add %q: InputSchema: %v", t.Name, err))
		}
	} else {
		in = mustSchema[In](t.Name, "input", true)
	}
	var out []byte
	valueType, rich := richType[Out]()
	switch {
	case !rich:
		out = mustSchema[Out](t.Name, "output", false)
	case valueType != nil:
		out = mustSchemaOf(valueType, t.Name, "output", false)
	}
	if err := registry.CheckPresentation(&registry.Capability{Title: t.Title, Icons: registryIcons(t.Icons)}); err != nil {
		panic(fmt.Sprintf("sdk.Add %q: %v", t.Name, err))
	}
	kind := capgatev1.Kind_KIND_READ
	if t.Kind == Action {
		kind = capgatev1.Kind_KIND_ACTION
	}
	tl := &tool{
		desc: &capgatev1.Capability{
			Name:           t.Name,
			Description:    t.Description,
			Kind:           kind,
			InputSchema:    in,
			OutputSchema:   out,
			Pack:           t.Pack,
			Permission:     t.Permission,
			OwnerGuarded:   t.Owner != nil,
			Destructive:    t.Destructive,
			Risk:           capgatev1.Risk(t.Risk),
			Title:          t.Title,
			Icons:          wireIcons(t.Icons),
			IdempotentHint: t.IdempotentHint,
			OpenWorldHint:  t.OpenWorldHint,
			TaskSupport:    wireTaskSupport(t.Task),
		},
		invoke: func(ctx context.Context, call Call, raw json.RawMessage, check *capgatev1.OwnerCheck) (answer, bool, error) {
			in, err := decodeArgs[In](raw)
			if err != nil {
				return answer{}, false, err
			}
			if check != nil {
				call.kept = &kept{}
				if t.Owner == nil {
					// The host asks only for capabilities declared with
					// an Owner; refusing is the safe answer to a confused one.
					return answer{}, true, nil
				}
				owner, err := t.Owner(ctx, call, in)
				if err != nil {
					return answer{}, false, err
				}
				if owner == "" || owner != check.UserId {
					return answer{}, true, nil
				}
				if check.Only {
					// The step alone, before the host holds the call for
					// a human: nothing runs.
					return answer{result: json.RawMessage("{}")}, false, nil
				}
			}
			res, err := t.Handler(ctx, call, in)
			if err != nil {
				return answer{}, false, err
			}
			a, err := encodeAnswer(res, rich)
			if err != nil {
				return answer{}, false, fmt.Errorf("result of %s: %w", t.Name, err)
			}
			return a, false, nil
		},
	}
	p.tools = append(p.tools, tl)
	p.byName[t.Name] = tl
}

// encodeAnswer encodes a handler's result: a rich one (Contents, Rich) as
// its blocks and its value (null for Contents), any other as the value.
func encodeAnswer(res any, rich bool) (answer, error) {
	if !rich {
		b, err := encodeResult(res)
		if err != nil {
			return answer{}, fmt.Errorf("encode: %w", err)
		}
		return answer{result: b}, nil
	}
	blocks, value, hasValue := res.(richResult).parts()
	content, err := wireContents(blocks)
	if err != nil {
		return answer{}, err
	}
	a := answer{result: json.RawMessage("null"), content: content}
	if hasValue {
		if a.result, err = encodeResult(value); err != nil {
			return answer{}, fmt.Errorf("encode: %w", err)
		}
	}
	return a, nil
}

// mustSchema infers T's JSON Schema; an input schema also gets its bounds
// (BoundsTag and the defaults) and x-mcp-header annotations.
func mustSchema[T any](name, which string, input bool) []byte {
	return mustSchemaOf(reflect.TypeFor[T](), name, which, input)
}

// mustSchemaOf is mustSchema for the Go type t.
func mustSchemaOf(t reflect.Type, name, which string, input bool) []byte {
	b, err := schemaFor(t, input)
	if err != nil {
		panic(fmt.Sprintf("sdk.Add %q: %s schema: %v", name, which, err))
	}
	return b
}

// Icon is an image a client may show beside a capability.
type Icon struct {
	// Src is an https URL or a data: URI ("data:image/png;base64,...",
	// at most 8 KiB) of the image.
	Src string
	// MIMEType is the image's media type, e.g. "image/png"; optional.
	MIMEType string
	// Sizes are the sizes the image fits, "48x48" or "any"; optional.
	Sizes []string
	// Theme is "light" or "dark", the background the icon is drawn for, or
	// empty for any.
	Theme string
}

func registryIcons(in []Icon) []registry.Icon {
	out := make([]registry.Icon, len(in))
	for i, ic := range in {
		out[i] = registry.Icon(ic)
	}
	return out
}

func wireIcons(in []Icon) []*capgatev1.Icon {
	var out []*capgatev1.Icon
	for _, ic := range in {
		out = append(out, &capgatev1.Icon{Src: ic.Src, MimeType: ic.MIMEType, Sizes: ic.Sizes, Theme: ic.Theme})
	}
	return out
}

func decodeArgs[In any](raw json.RawMessage) (In, error) {
	var in In
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return in, InvalidInput("arguments do not fit the input schema: %v", err)
	}
	return in, nil
}

// wireTaskSupport is t on the wire, forbidden said outright rather than
// left unset.
func wireTaskSupport(t TaskSupport) capgatev1.TaskSupport {
	if t == TaskForbidden {
		return capgatev1.TaskSupport_TASK_SUPPORT_FORBIDDEN
	}
	return capgatev1.TaskSupport(t)
}
