package mcptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
)

// Capability names the platform registers. Search is the platform
// contract's platform.search (sdk/platform); Slow, Broken, Panicking and
// ListNumbers are capabilities of this test platform only.
const (
	Search      = platform.SearchName
	BookingGet  = "booking.get"
	Cancel      = "booking.cancel"
	Rename      = "booking.rename"
	Slow        = "platform.slow"
	Broken      = "platform.broken"
	Panicking   = "platform.panic"
	ListNumbers = "platform.numbers"
	LLMAsk      = "llm.ask"
	// Ask asks its caller's client (WithAsks).
	Ask = "diag.ask"
)

// Principals the tests use. Each one reaches a different step of the gate.
var (
	// Admin may do everything and bypasses ownership.
	Admin = dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin, UserID: "u-admin"}
	// Alice is a customer with an action token; she owns booking b-1.
	Alice = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "u-alice"}
	// Bob is a customer with an action token; he owns booking b-2.
	Bob = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "u-bob"}
	// Reader has a read token bound to Alice.
	Reader = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: "u-alice"}
	// Anonymous is an action token bound to nobody.
	Anonymous = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction}
	// Guest has a role that holds no permission.
	Guest = dispatch.Principal{Role: "guest", Scope: dispatch.ScopeAction, UserID: "u-guest"}
)

// Platform is the in-memory provider plus the dispatcher gating it.
type Platform struct {
	Registry   *registry.Registry
	Dispatcher *dispatch.Dispatcher

	mu       sync.Mutex
	bookings map[string]*booking
	// SlowRelease, when non-nil, is what platform.slow waits on besides its
	// context, so a test can hold a call in flight.
	SlowRelease chan struct{}
	// SlowStarted, when non-nil, receives once per platform.slow call as it
	// starts waiting.
	SlowStarted chan struct{}
	// ChattyEnded, when non-nil, receives how each platform.chatty call
	// that holds ended: nil when released by ChattyRelease, else its
	// context's error.
	ChattyEnded   chan error
	ChattyRelease chan struct{}
}

type booking struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Title     string `json:"title"`
	Cancelled bool   `json:"cancelled"`
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

// Option adjusts the platform New builds.
type Option func(*setup)

type setup struct {
	records  bool
	rich     bool
	chatty   bool
	prompts  bool
	asks     bool
	packsOff []string
}

// WithAsks registers diag.ask (pack diag, permission diag.run), which
// asks its caller's user for a name in each of {"rounds": n} rounds (1
// when absent), keeping the names so far as its state, and answers
// {"names": [...], "round": r}; with {"also": true} it asks the client's
// roots in the first round too. A client that cannot elicit makes it
// fail for want of elicitation.
func WithAsks() Option { return func(s *setup) { s.asks = true } }

// WithRecords registers the catalogue capabilities platform.get and
// platform.list (pack "search", permission "catalogue.read", which
// customers hold and guests do not) over the records in Records.
func WithRecords() Option { return func(s *setup) { s.records = true } }

// WithPackOff disables pack, which New otherwise enables (all but llm).
func WithPackOff(pack string) Option {
	return func(s *setup) { s.packsOff = append(s.packsOff, pack) }
}

// New builds the platform. The llm pack is registered but disabled, so
// llm.ask is refused at the pack step.
func New(opts ...Option) *Platform {
	var set setup
	for _, o := range opts {
		o(&set)
	}
	reg := registry.New([]string{"search", "booking", "llm", "diag", "docs", "docsoff"})
	caps := []registry.Capability{
		{
			Name: Search, Description: "Search the catalogue.", Kind: registry.Read,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":1}},"required":["query"],"additionalProperties":false}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"hits":{"type":"array"}},
				"required":["hits"]}`),
			Pack: "search", Permission: "search.read", Plugin: "core",
		},
		{
			Name: BookingGet, Description: "Read one booking.", Kind: registry.Read,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			Pack:        "booking", Permission: "booking.read", OwnerGuarded: true, Plugin: "core",
		},
		{
			Name: Cancel, Description: "Cancel a booking. \"Cannot\" be undone.", Kind: registry.Action,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
			Pack:        "booking", Permission: "booking.cancel", OwnerGuarded: true, Destructive: true, Plugin: "core",
		},
		{
			Name: Rename, Description: "Rename a booking.", Kind: registry.Action,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"}},"required":["id","title"]}`),
			Pack:        "booking", Permission: "booking.write", OwnerGuarded: true, Plugin: "core",
		},
		{Name: Slow, Description: "Wait until released or cancelled.", Kind: registry.Read, InputSchema: objectSchema, Pack: "diag", Permission: "diag.run", Plugin: "core"},
		{Name: Broken, Description: "Fail with an internal error.", Kind: registry.Read, InputSchema: objectSchema, Pack: "diag", Permission: "diag.run", Plugin: "core"},
		{Name: Panicking, Description: "Panic inside the provider.", Kind: registry.Read, InputSchema: objectSchema, Pack: "diag", Permission: "diag.run", Plugin: "core"},
		{Name: ListNumbers, Description: "Return a JSON array, not an object.", Kind: registry.Read, InputSchema: objectSchema, Pack: "diag", Permission: "diag.run", Plugin: "core"},
		{Name: LLMAsk, Description: "Ask the configured model.", Kind: registry.Read, InputSchema: objectSchema, Pack: "llm", Permission: "llm.ask", Plugin: "core"},
	}
	if set.records {
		caps = append(caps, recordCapabilities...)
	}
	if set.asks {
		caps = append(caps, registry.Capability{Name: Ask, Description: "Ask the caller's user for names.", Kind: registry.Read,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"rounds":{"type":"integer","minimum":1,"maximum":12},"also":{"type":"boolean"}}}`),
			Pack:        "diag", Permission: "diag.run", Plugin: "core"})
	}
	for _, c := range caps {
		if err := reg.Add(c); err != nil {
			panic(fmt.Sprintf("mcptest: %v", err))
		}
	}
	if set.rich {
		addRich(reg)
	}
	if set.chatty {
		addChatty(reg)
	}
	if set.prompts {
		addPrompts(reg)
	}
	p := &Platform{
		Registry: reg,
		bookings: map[string]*booking{
			"b-1": {ID: "b-1", Owner: Alice.UserID, Title: "Dentist"},
			"b-2": {ID: "b-2", Owner: Bob.UserID, Title: "Barber"},
		},
	}
	policy := Policy()
	for _, pack := range set.packsOff {
		policy.Packs[pack] = false
	}
	d, err := dispatch.New(reg, policy, map[string]dispatch.Provider{"core": p})
	if err != nil {
		panic(fmt.Sprintf("mcptest: %v", err))
	}
	p.Dispatcher = d
	return p
}

// Policy is the policy New's platform starts with: its packs on (llm
// off) and the roles admin, customer and guest.
func Policy() dispatch.Policy {
	return dispatch.Policy{
		Packs: map[string]bool{"search": true, "booking": true, "diag": true, "llm": false, "docs": true},
		Roles: map[string][]string{
			"admin":    {"*"},
			"customer": {"search.read", "catalogue.read", "booking.*", "diag.run"},
			"guest":    {},
		},
	}
}

type idArgs struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

var errBroken = errors.New("backend connection reset: dial tcp 10.1.2.3:5432 secret-dsn")

// Cancelled reports whether the booking id has been cancelled.
func (p *Platform) Cancelled(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.bookings[id]
	return ok && b.Cancelled
}

// Invoke implements dispatch.Provider.
func (p *Platform) Invoke(ctx context.Context, r dispatch.Request) (json.RawMessage, error) {
	capability, args := r.Capability, r.Args
	if res, ok := invokeRich(ctx, r); ok {
		return res, nil
	}
	if res, err, ok := p.invokeChatty(ctx, r); ok {
		return res, err
	}
	switch capability {
	case Search:
		return json.RawMessage(`{"hits":[{"id":"b-1","title":"Dentist <3 & \"co\""}]}`), nil
	case ListNumbers:
		return json.RawMessage(`[1, 2, 3]`), nil
	case Broken:
		return nil, fmt.Errorf("query bookings: %w", errBroken)
	case Panicking:
		panic("provider exploded")
	case Ask:
		return ask(r)
	case RecordGet:
		return getRecord(args)
	case RecordList:
		return listRecords(args)
	case Slow:
		if p.SlowStarted != nil {
			p.SlowStarted <- struct{}{}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("slow: %w", ctx.Err())
		case <-p.SlowRelease:
			return json.RawMessage(`{"done":true}`), nil
		}
	}
	var a idArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("decode args: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ok := p.bookings[a.ID]
	if !ok {
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: fmt.Sprintf("booking %q does not exist", a.ID)}
	}
	if err := r.Owned(b.Owner); err != nil {
		return nil, err
	}
	switch capability {
	case BookingGet:
	case Cancel:
		if b.Cancelled {
			return nil, &dispatch.ToolError{Code: dispatch.Conflict, Message: fmt.Sprintf("booking %q is already cancelled", a.ID)}
		}
		b.Cancelled = true
	case Rename:
		b.Title = a.Title
	default:
		return nil, fmt.Errorf("capability %q: not provided here", capability)
	}
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode booking: %w", err)
	}
	return out, nil
}

// Echo is a provider whose one read capability returns its arguments; it
// keeps benchmarks free of any work but the host's own.
type Echo struct{}

// Invoke implements dispatch.Provider.
func (Echo) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	return r.Args, nil
}

// EchoName is the one capability of NewEcho.
const EchoName = "bench.echo"

// NewEcho builds a dispatcher with one read capability served by Echo,
// open to every principal.
func NewEcho() *dispatch.Dispatcher {
	reg := registry.New([]string{"bench"})
	if err := reg.Add(registry.Capability{
		Name: EchoName, Description: "Return the arguments.", Kind: registry.Read,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}}}`),
		Pack:        "bench", Permission: "bench.run", Plugin: "bench",
	}); err != nil {
		panic(fmt.Sprintf("mcptest: %v", err))
	}
	d, err := dispatch.New(reg, dispatch.Policy{
		Packs: map[string]bool{"bench": true},
		Roles: map[string][]string{"customer": {"bench.run"}, "admin": {"*"}},
	}, map[string]dispatch.Provider{"bench": Echo{}})
	if err != nil {
		panic(fmt.Sprintf("mcptest: %v", err))
	}
	return d
}

// ask is diag.ask: one name a round, the names so far its state.
func ask(r dispatch.Request) (json.RawMessage, error) {
	in := r.Input
	if in == nil || !slices.Contains(in.CanAsk, dispatch.AskElicit) {
		return nil, &dispatch.InputRequired{Missing: []string{"elicitation"}}
	}
	var a struct {
		Rounds int  `json:"rounds"`
		Also   bool `json:"also"`
	}
	if err := json.Unmarshal(r.Args, &a); err != nil {
		return nil, err
	}
	a.Rounds = max(a.Rounds, 1)
	var names []string
	if len(in.State) > 0 {
		if err := json.Unmarshal(in.State, &names); err != nil {
			return nil, fmt.Errorf("diag.ask: its state came back altered: %w", err)
		}
	}
	key := fmt.Sprintf("name%d", len(names)+1)
	if raw, ok := in.Responses[key]; ok {
		var e struct {
			Action  string `json:"action"`
			Content struct {
				Name string `json:"name"`
			} `json:"content"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Action == "accept" {
			names = append(names, e.Content.Name)
		}
	}
	if len(names) >= a.Rounds {
		return json.Marshal(map[string]any{"names": names, "round": in.Round})
	}
	state, _ := json.Marshal(names)
	reqs := []dispatch.InputRequest{{Key: fmt.Sprintf("name%d", len(names)+1), Method: dispatch.AskElicit,
		Params: json.RawMessage(`{"mode":"form","message":"Which name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`)}}
	if a.Also && len(names) == 0 {
		reqs = append(reqs, dispatch.InputRequest{Key: "roots", Method: dispatch.AskRoots, Params: json.RawMessage(`{}`)})
	}
	return nil, &dispatch.InputRequired{State: state, Requests: reqs}
}
