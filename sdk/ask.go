package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Asking the caller's client mid-call. A handler may need its caller's
// client to answer before it can finish: ask its user to fill in a form
// (Elicit), ask its model for a completion (Sample), or list the roots it
// works in (ListRoots). Each ask names a key the handler chooses. On MCP
// 2026-07-28 no server keeps anything between calls, so an ask does not
// wait: the first time, it returns an error wrapping ErrInputRequired,
// which the handler returns as is (after making any other asks it needs:
// every ask still unanswered when the handler returns goes to the client
// at once). The client answers and sends the same call again; the handler
// runs again from the start, and this time the same ask returns the
// answer. Answers are kept across rounds, so a handler that asks in turn
// (a second question that depends on the first answer) is written as
// straight-line code:
//
//	name, err := call.Elicit(ctx, "name", sdk.FormFor[struct{ Name string `json:"name"` }]("Who is this for?"))
//	if err != nil {
//		return Out{}, err
//	}
//	...
//
// A handler runs once per round, so what it does before its last ask runs
// again: ask before acting. A handler that needs more than the answers
// between rounds keeps it with SetRoundState. The host seals what the
// handler keeps with the call it belongs to: it comes back only with the
// same call (capability and arguments), from the same caller, unaltered,
// before it lapses, once.
//
// A prompt's Render asks the same way, with the Call it is given: the
// same asks, rounds, SetRoundState and errors, its rounds sealed to the
// prompt and its arguments. A Completer cannot ask: its asks return a
// *CannotAskError.
//
// Before 2026-07-28 the host runs the rounds itself: it sends the asks on
// the call's event stream and runs the handler again with the answers, so
// a handler is written the same way for every revision.
//
// A client that did not declare what an ask needs (form elicitation,
// sampling, roots; before 2026-07-28, one that answered the ask with an
// error, or a revision without it), and a call nobody can be asked about
// (an approved call, a nested call), make the ask return a
// *CannotAskError: a handler may go on without the answer, or return the
// error as is, and the call fails telling the client what it would have
// to declare.

// ErrInputRequired is wrapped by an ask whose answer has not come yet:
// return it as is, and the call asks its client.
var ErrInputRequired = errors.New("the call needs its caller's client to answer first")

// CannotAskError is an ask the caller's client cannot answer.
type CannotAskError struct {
	// Needs is the client capability the ask needs: "elicitation",
	// "sampling" or "roots".
	Needs string
}

func (e *CannotAskError) Error() string {
	return "the caller's client cannot be asked this: it did not declare " + e.Needs
}

// Form is a question for the caller's user (MCP form elicitation).
type Form struct {
	// Message is what the user reads.
	Message string
	// Schema is the requested schema: a JSON object schema of flat
	// properties (strings, numbers, integers, booleans, enums), which
	// clients render as a form. Nil asks for nothing but accept or
	// decline.
	Schema json.RawMessage
}

// FormFor is a Form whose schema is inferred from T, a struct of flat
// fields, the way a capability's input schema is.
func FormFor[T any](message string) Form {
	s, err := jsonschema.For[T](nil)
	if err != nil || s.Type != "object" {
		panic(fmt.Sprintf("sdk.FormFor: %T is not a struct of flat fields: %v", *new(T), err))
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("sdk.FormFor: %v", err))
	}
	return Form{Message: message, Schema: b}
}

// Elicitation actions.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// ElicitResult is the user's answer to a Form.
type ElicitResult struct {
	// Action is Accept, Decline or Cancel.
	Action string `json:"action"`
	// Content is what the user filled in when they accepted.
	Content json.RawMessage `json:"content,omitempty"`
}

// Accepted reports whether the user accepted the form.
func (r ElicitResult) Accepted() bool { return r.Action == Accept }

// Decode decodes the filled-in form into v.
func (r ElicitResult) Decode(v any) error {
	if len(r.Content) == 0 {
		return errors.New("the form came back without content")
	}
	if err := json.Unmarshal(r.Content, v); err != nil {
		return fmt.Errorf("the form's content: %w", err)
	}
	return nil
}

// SamplingMessage is one message of a SamplingRequest, text only.
type SamplingMessage struct {
	// Role is "user" or "assistant".
	Role string
	Text string
}

// SamplingRequest asks the client's model for a message.
type SamplingRequest struct {
	Messages     []SamplingMessage
	SystemPrompt string
	// MaxTokens bounds the answer; it is required, and 1 or more.
	MaxTokens   int
	Temperature *float64
}

// SamplingResult is the client's model's message.
type SamplingResult struct {
	Role  string `json:"role"`
	Model string `json:"model"`
	// StopReason is why the model stopped, e.g. "endTurn".
	StopReason string `json:"stopReason,omitempty"`
	// Content is the message's content as the client sent it; Text is its
	// text, when it is text.
	Content json.RawMessage `json:"content"`
	Text    string          `json:"-"`
}

// Root is a directory or file the client works in.
type Root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// Methods, and the capability each needs.
const (
	methodElicit = "elicitation/create"
	methodSample = "sampling/createMessage"
	methodRoots  = "roots/list"
)

var needs = map[string]string{methodElicit: "elicitation", methodSample: "sampling", methodRoots: "roots"}

// Bounds the host holds a round to (see the plugin contract).
const (
	maxAsks       = 16
	maxKept       = 12 << 10
	maxAskKeyLen  = 64
	maxAskMessage = 4 << 10
)

var askKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// asking is what a call may ask of its client, and what it asked.
type asking struct {
	can      map[string]bool
	answers  map[string]json.RawMessage // this round's, then the kept
	used     map[string]json.RawMessage // answers the handler took
	pending  map[string]*capgatev1.InputRequest
	own      []byte // the handler's state from the round before
	keep     []byte // the handler's state for the round after
	keepSet  bool
	failures []error // asks the handler made wrongly
}

// kept is the SDK's part of a round's state: the answers taken so far
// and the handler's own.
type keptState struct {
	Answers map[string]json.RawMessage `json:"a,omitempty"`
	Own     []byte                     `json:"s,omitempty"`
}

// newAsking reads what the host says a call may ask, nil when it may ask
// nothing.
func newAsking(req *capgatev1.InvokeRequest) *asking {
	return askingFor(req.GetRequestState(), req.GetInputResponses())
}

// askingFor reads a round as the host sends it, with a call or a prompt
// to render: nil when the client may be asked nothing.
func askingFor(rs *capgatev1.InputContext, responses map[string][]byte) *asking {
	if rs == nil {
		return nil
	}
	a := &asking{can: map[string]bool{}, answers: map[string]json.RawMessage{}, used: map[string]json.RawMessage{},
		pending: map[string]*capgatev1.InputRequest{}}
	for _, m := range rs.CanAsk {
		a.can[m] = true
	}
	if len(rs.State) > 0 {
		var k keptState
		// The host returns the state exactly as this SDK made it; one it
		// cannot read starts the rounds afresh.
		if json.Unmarshal(rs.State, &k) == nil {
			maps.Copy(a.answers, k.Answers)
			a.own = k.Own
		}
	}
	for k, v := range responses {
		a.answers[k] = v
	}
	return a
}

// ask returns the answer under key when it is one valid accepts, or
// records the request and returns ErrInputRequired: an answer that is not
// what was asked is asked again rather than failing the handler.
func (c Call) ask(key, method string, params func() (any, error), valid func(json.RawMessage) bool) (json.RawMessage, error) {
	a := c.asks
	if a == nil || !a.can[method] {
		return nil, &CannotAskError{Needs: needs[method]}
	}
	if len(key) > maxAskKeyLen || !askKey.MatchString(key) || strings.HasPrefix(key, "capgate_") {
		err := fmt.Errorf("ask key %q: want 1 to %d letters, digits, '_', '-' or '.', not starting capgate_", key, maxAskKeyLen)
		a.failures = append(a.failures, err)
		return nil, err
	}
	if ans, ok := a.answers[key]; ok && valid(ans) {
		a.used[key] = ans
		return ans, nil
	}
	if _, dup := a.pending[key]; !dup {
		p, err := params()
		if err == nil {
			var b []byte
			if b, err = json.Marshal(p); err == nil {
				a.pending[key] = &capgatev1.InputRequest{Method: method, Params: b}
			}
		}
		if err != nil {
			err = fmt.Errorf("ask %q: %w", key, err)
			a.failures = append(a.failures, err)
			return nil, err
		}
	}
	return nil, fmt.Errorf("ask %q: %w", key, ErrInputRequired)
}

// Elicit asks the caller's user to fill in f. It returns the user's
// answer when it came with this round; otherwise an error wrapping
// ErrInputRequired (return it as is), or a *CannotAskError.
func (c Call) Elicit(_ context.Context, key string, f Form) (ElicitResult, error) {
	raw, err := c.ask(key, methodElicit, func() (any, error) {
		if f.Message == "" || len(f.Message) > maxAskMessage {
			return nil, fmt.Errorf("a form's message must be 1 to %d bytes", maxAskMessage)
		}
		schema := f.Schema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if schema[0] != '{' || !json.Valid(schema) {
			return nil, errors.New("a form's schema must be a JSON object")
		}
		return map[string]any{"mode": "form", "message": f.Message, "requestedSchema": schema}, nil
	}, func(raw json.RawMessage) bool {
		var r ElicitResult
		return json.Unmarshal(raw, &r) == nil && (r.Action == Accept || r.Action == Decline || r.Action == Cancel)
	})
	if err != nil {
		return ElicitResult{}, err
	}
	var r ElicitResult
	_ = json.Unmarshal(raw, &r)
	return r, nil
}

// Sample asks the client's model for a message. It returns the message
// when it came with this round; otherwise an error wrapping
// ErrInputRequired (return it as is), or a *CannotAskError.
func (c Call) Sample(_ context.Context, key string, r SamplingRequest) (SamplingResult, error) {
	raw, err := c.ask(key, methodSample, func() (any, error) {
		if len(r.Messages) == 0 || r.MaxTokens < 1 {
			return nil, errors.New("a sampling request needs messages and MaxTokens of 1 or more")
		}
		type content struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		type message struct {
			Role    string  `json:"role"`
			Content content `json:"content"`
		}
		msgs := make([]message, len(r.Messages))
		for i, m := range r.Messages {
			if m.Role != "user" && m.Role != "assistant" {
				return nil, fmt.Errorf("message %d: role %q is neither user nor assistant", i, m.Role)
			}
			msgs[i] = message{Role: m.Role, Content: content{Type: "text", Text: m.Text}}
		}
		p := map[string]any{"messages": msgs, "maxTokens": r.MaxTokens}
		if r.SystemPrompt != "" {
			p["systemPrompt"] = r.SystemPrompt
		}
		if r.Temperature != nil {
			p["temperature"] = *r.Temperature
		}
		return p, nil
	}, func(raw json.RawMessage) bool {
		var res SamplingResult
		return json.Unmarshal(raw, &res) == nil && len(res.Content) > 0
	})
	if err != nil {
		return SamplingResult{}, err
	}
	var res SamplingResult
	_ = json.Unmarshal(raw, &res)
	var text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(res.Content, &text) == nil && text.Type == "text" {
		res.Text = text.Text
	}
	return res, nil
}

// ListRoots asks the client for its roots. It returns them when they came
// with this round; otherwise an error wrapping ErrInputRequired (return it
// as is), or a *CannotAskError.
func (c Call) ListRoots(_ context.Context, key string) ([]Root, error) {
	type roots struct {
		Roots []Root `json:"roots"`
	}
	raw, err := c.ask(key, methodRoots, func() (any, error) { return struct{}{}, nil }, func(raw json.RawMessage) bool {
		var r roots
		return json.Unmarshal(raw, &r) == nil && r.Roots != nil
	})
	if err != nil {
		return nil, err
	}
	var res roots
	_ = json.Unmarshal(raw, &res)
	return res.Roots, nil
}

// RoundState returns what the handler kept for this round with
// SetRoundState in the round before; nil in the first round.
func (c Call) RoundState() []byte {
	if c.asks == nil {
		return nil
	}
	return c.asks.own
}

// SetRoundState keeps b for the next round, when the call asks its
// client; with the answers so far it must fit in 12 KiB. Without it the next round
// gets this round's state again.
func (c Call) SetRoundState(b []byte) {
	if c.asks != nil {
		c.asks.keep, c.asks.keepSet = slices.Clone(b), true
	}
}

// inputRequired turns a handler's outcome into the call's request for
// input, nil when it asks nothing: a *CannotAskError returned as is
// fails the call naming what the client lacks; ErrInputRequired asks
// every ask left unanswered.
func (a *asking) inputRequired(err error) (*capgatev1.InputRequired, error) {
	var cannot *CannotAskError
	if errors.As(err, &cannot) {
		return &capgatev1.InputRequired{MissingCapabilities: []string{cannot.Needs}}, nil
	}
	if a == nil || !errors.Is(err, ErrInputRequired) {
		return nil, nil
	}
	if len(a.failures) > 0 {
		return nil, errors.Join(a.failures...)
	}
	if len(a.pending) == 0 {
		return nil, errors.New("the handler returned ErrInputRequired without an ask left unanswered")
	}
	if len(a.pending) > maxAsks {
		return nil, fmt.Errorf("the handler asked %d things in one round; at most %d", len(a.pending), maxAsks)
	}
	own := a.own
	if a.keepSet {
		own = a.keep
	}
	k := keptState{Answers: a.used, Own: own}
	state, err := json.Marshal(k)
	if err != nil {
		return nil, err
	}
	if len(state) > maxKept {
		return nil, fmt.Errorf("the answers so far and the round state are %d bytes; a round keeps at most %d", len(state), maxKept)
	}
	return &capgatev1.InputRequired{Requests: a.pending, State: state}, nil
}
