package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/capgate/capgate/internal/registry"
)

// Asking the caller's client mid-call: a capability may need its caller's
// client to answer before it can finish — ask the user (elicitation), ask
// the client's model (sampling), or list the client's roots. At MCP
// 2026-07-28 this takes rounds and keeps nothing on the server: the
// provider answers *InputRequired, the gate seals the provider's state
// with the call it belongs to (InputSealer, the same seal as the gate's own
// confirmation question) and answers *NeedsInput, and the client sends the
// same call again with the answers and the sealed state. Every round is a
// new call through every step of the gate; only the sealed state links
// them, and it comes back only with the same call, from the same caller,
// unaltered, before it lapses, once. A prompt being rendered asks the
// same way (GetPrompt, PromptRequest.Input).

// Methods a call may ask its caller's client, as MCP names them.
const (
	AskElicit = "elicitation/create"
	AskSample = "sampling/createMessage"
	AskRoots  = "roots/list"
)

// Bounds of what a provider may ask in one round, and keep between rounds.
const (
	MaxInputRequests    = 16
	MaxInputKeyLength   = 64
	MaxInputParamsBytes = 64 << 10
	MaxInputStateBytes  = 12 << 10
	// MaxInputResponses bounds the answers a call brings back.
	MaxInputResponses = 32
)

var inputKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ValidInputKey reports whether k may name a request in a round (keys
// starting "capgate_" are the gate's own besides).
func ValidInputKey(k string) bool { return len(k) <= MaxInputKeyLength && inputKey.MatchString(k) }

// Input is what a call brings about asking its caller's client. Protocol
// adapters set it (WithInput) when the client can be asked in rounds; it
// is the caller's claim. The state of an earlier round travels in
// Confirmation.State, the one state a call sends back.
type Input struct {
	// CanAsk lists the methods (AskElicit, AskSample, AskRoots) the client
	// declared it answers.
	CanAsk []string
	// Responses are the client's answers, keyed as asked: each a JSON
	// object. The gate's own question's key is not among them.
	Responses map[string]json.RawMessage
}

type inputKeyType struct{}

// WithInput returns ctx carrying in for the call made with it.
func WithInput(ctx context.Context, in Input) context.Context {
	return context.WithValue(ctx, inputKeyType{}, in)
}

// InputOf returns the Input ctx carries, if any.
func InputOf(ctx context.Context) (Input, bool) {
	in, ok := ctx.Value(inputKeyType{}).(Input)
	return in, ok
}

// InputRound is what the provider of an admitted call learns about asking
// its caller's client (Request.Input).
type InputRound struct {
	// CanAsk lists the methods the client answers.
	CanAsk []string
	// Responses are the client's answers to the round before.
	Responses map[string]json.RawMessage
	// State is what the provider kept in the round before, unaltered;
	// Round counts the rounds before this one.
	State []byte
	Round int
}

// InputRequest is one request for the caller's client.
type InputRequest struct {
	Key    string
	Method string // AskElicit, AskSample or AskRoots
	Params json.RawMessage
}

// InputRequired is a provider's answer to a call that cannot finish until
// its caller's client answers: nothing is returned. Missing, when set,
// names the client capabilities ("elicitation", "sampling", "roots") the
// call cannot go on without, and the call fails with *MissingCapability.
type InputRequired struct {
	Requests []InputRequest
	State    []byte
	Missing  []string
}

func (e *InputRequired) Error() string {
	if len(e.Missing) > 0 {
		return "the call needs the client to support " + strings.Join(e.Missing, ", ")
	}
	return fmt.Sprintf("the call needs %d answers from its client", len(e.Requests))
}

// NeedsInput is the gate's answer to a call that asks its caller's client:
// nothing ran to completion; the client answers Requests and sends the
// call again with the answers and State.
type NeedsInput struct {
	Capability string
	// ID names the round in the audit trail.
	ID       string
	Requests []InputRequest
	// State is the sealed state the client sends back.
	State     string
	ExpiresAt time.Time
}

func (n *NeedsInput) Error() string {
	return fmt.Sprintf("%s needs %d answers from its caller's client (round %s)", n.Capability, len(n.Requests), n.ID)
}

// MissingCapability is a call that cannot go on because its caller's
// client did not declare what it would have to answer.
type MissingCapability struct {
	Capability string
	// Needs names the client capabilities: "elicitation", "sampling",
	// "roots".
	Needs []string
}

func (m *MissingCapability) Error() string {
	return fmt.Sprintf("%s needs the client to declare %s", m.Capability, strings.Join(m.Needs, ", "))
}

// StepInput is the refusal of a call that brings back a state the gate
// cannot accept for it.
const StepInput Step = "input"

// InputState is what a sealed round says beyond the call it is bound to.
type InputState struct {
	// ID names the round; Seal chooses it.
	ID string
	// Confirmed is the gate's question this call's user already said yes
	// to, so that the rounds after it are not asked again.
	Confirmed string
	// Plugin is the provider's own state; Round counts the rounds that
	// led to it.
	Plugin []byte
	Round  int
	// ExpiresAt is when the round lapses; Seal sets it.
	ExpiresAt time.Time
}

// InputSealer seals and opens the state of a call's rounds. The host's
// Confirmer is one, so both kinds of state share a key, a lifetime and a
// record of the states used.
type InputSealer interface {
	// SealInput seals s for q's call and returns the state the caller
	// sends back, with s's ID and ExpiresAt set.
	SealInput(ctx context.Context, q Question, s InputState) (string, InputState, error)
	// OpenInput opens state, brought back by q's call, and uses it up:
	// an error wrapping ErrNotInputState when it is a state of another
	// kind (the gate's question's), one wrapping ErrConfirmationState
	// saying why it cannot be accepted, or another when it could not tell.
	OpenInput(ctx context.Context, state string, q Question) (InputState, error)
}

// ErrNotInputState marks a state that is sound but not a round's.
var ErrNotInputState = errors.New("not the state of a round")

// inputRound reads the call's Input (WithInput), opening the state of the
// round before when it brings one; nil when the client can be asked
// nothing. A state the gate cannot accept is refused at StepInput.
func (d *Dispatcher) inputRound(ctx context.Context, e *registry.Entry, p Principal, args json.RawMessage, c *call) (*InputRound, error) {
	return d.openRound(ctx, e.Name, Question{Principal: p, Capability: e.Name, Args: args}, c)
}

// openRound is inputRound for any call that may ask: name is what the
// caller called, q what its rounds are sealed to.
func (d *Dispatcher) openRound(ctx context.Context, name string, q Question, c *call) (*InputRound, error) {
	in, ok := InputOf(ctx)
	if !ok {
		return nil, nil
	}
	r := &InputRound{CanAsk: in.CanAsk, Responses: in.Responses}
	cf, _ := ConfirmationOf(ctx)
	if cf.State == "" {
		// A first round, or answers to a round that kept no state: the
		// answers are the client's word either way.
		return r, nil
	}
	if d.inputs == nil {
		return nil, &Refusal{Step: StepInput, Capability: name, Reason: "this server keeps no rounds, so it made no such state; call again without it"}
	}
	st, err := d.inputs.OpenInput(ctx, cf.State, q)
	switch {
	case errors.Is(err, ErrNotInputState):
		// The gate's own question's state: the risk step opens it.
		return r, nil
	case errors.Is(err, ErrConfirmationState):
		return nil, &Refusal{Step: StepInput, Capability: name, Reason: err.Error()}
	case err != nil:
		return nil, fmt.Errorf("open the state of %s's round: %w", name, err)
	}
	r.State, r.Round = st.Plugin, st.Round
	c.inputID = st.ID
	if st.Confirmed != "" {
		c.inputConfirmed = st.Confirmed
	}
	return r, nil
}

// asked turns a provider's *InputRequired into the gate's answer: the
// requests checked against what the client can answer and the bounds, the
// state sealed to this call.
func (d *Dispatcher) asked(ctx context.Context, e *registry.Entry, req Request, ir *InputRequired, c *call) error {
	q := Question{Principal: req.Principal, Capability: e.Name, Args: req.Args}
	return d.sealRound(ctx, e.Name, e.Plugin, q, req.Input, ir, c)
}

// sealRound is asked for any call that may ask: name and plugin say what
// was called and who answers it, q what the round is sealed to, round
// what the provider was given.
func (d *Dispatcher) sealRound(ctx context.Context, name, plugin string, q Question, round *InputRound, ir *InputRequired, c *call) error {
	if len(ir.Missing) > 0 {
		needs := slices.Clone(ir.Missing)
		for _, n := range needs {
			if n != "elicitation" && n != "sampling" && n != "roots" {
				return fmt.Errorf("plugin %q: %s: needs client capability %q, which MCP does not have", plugin, name, shorten(n))
			}
		}
		slices.Sort(needs)
		return &MissingCapability{Capability: name, Needs: slices.Compact(needs)}
	}
	if round == nil {
		return fmt.Errorf("plugin %q: %s asked its caller's client, which cannot be asked", plugin, name)
	}
	if d.inputs == nil {
		return fmt.Errorf("%s asked its caller's client, and this server cannot seal a round", name)
	}
	if err := checkRequests(ir, round.CanAsk); err != nil {
		return fmt.Errorf("plugin %q: %s: %w", plugin, name, err)
	}
	st := InputState{Plugin: ir.State, Round: round.Round + 1}
	if c.confirmed {
		st.Confirmed = c.confirmID
	}
	state, st, err := d.inputs.SealInput(ctx, q, st)
	if err != nil {
		return fmt.Errorf("seal the round of %s: %w", name, err)
	}
	c.inputID, c.inputAsked = st.ID, true
	return &NeedsInput{Capability: name, ID: st.ID, Requests: ir.Requests, State: state, ExpiresAt: st.ExpiresAt}
}

// checkRequests holds a provider's requests to the contract: a few, each
// under a sound key, each a method the client declared, with an object of
// params.
func checkRequests(ir *InputRequired, canAsk []string) error {
	switch {
	case len(ir.Requests) == 0:
		return errors.New("asked its caller's client nothing")
	case len(ir.Requests) > MaxInputRequests:
		return fmt.Errorf("asked %d requests in one round; at most %d", len(ir.Requests), MaxInputRequests)
	case len(ir.State) > MaxInputStateBytes:
		return fmt.Errorf("kept %d bytes of state; at most %d", len(ir.State), MaxInputStateBytes)
	}
	seen := make(map[string]bool, len(ir.Requests))
	for _, r := range ir.Requests {
		switch {
		case !ValidInputKey(r.Key):
			return fmt.Errorf("request key %q is not 1 to %d letters, digits, '_', '-' or '.'", shorten(r.Key), MaxInputKeyLength)
		case strings.HasPrefix(r.Key, "capgate_"):
			return fmt.Errorf("request key %q: keys starting capgate_ are the gate's own", r.Key)
		case seen[r.Key]:
			return fmt.Errorf("request key %q used twice", r.Key)
		case !slices.Contains(canAsk, r.Method):
			return fmt.Errorf("request %q asks %q, which the client did not declare", r.Key, shorten(r.Method))
		case len(r.Params) > MaxInputParamsBytes:
			return fmt.Errorf("request %q has %d bytes of params; at most %d", r.Key, len(r.Params), MaxInputParamsBytes)
		case len(r.Params) == 0 || r.Params[0] != '{' || !json.Valid(r.Params):
			return fmt.Errorf("request %q: params must be a JSON object", r.Key)
		}
		seen[r.Key] = true
	}
	return nil
}
