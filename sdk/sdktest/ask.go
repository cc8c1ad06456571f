package sdktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/sdk"
)

// Methods a client may declare it answers (Asking.CanAsk).
const (
	Elicit    = dispatch.AskElicit
	Sample    = dispatch.AskSample
	ListRoots = dispatch.AskRoots
)

// Asking is a client that answers what a capability asks mid-call, or a
// prompt while it renders (sdk.Call.Elicit, Sample, ListRoots), for
// InvokeAsking and GetPromptAsking.
type Asking struct {
	// CanAsk lists the methods the client declares: Elicit, Sample,
	// ListRoots.
	CanAsk []string
	// Answer answers the request asked under key with the JSON result the
	// client would send (an elicitation's {"action","content"}, a
	// sampling message, {"roots":[...]}), marshalled; an error stops the
	// call with it.
	Answer func(key, method string, params json.RawMessage) (any, error)
	// MaxRounds bounds the rounds (10 when 0).
	MaxRounds int
}

// MissingCapabilityError is a call that needs what the client did not
// declare.
type MissingCapabilityError struct{ Needs []string }

func (e *MissingCapabilityError) Error() string {
	return fmt.Sprintf("the call needs the client to declare %v", e.Needs)
}

// InvokeAsking is Invoke from a client that can be asked: each round the
// capability asks, a is asked every request, and the call is sent again,
// through the whole gate, with the answers and the state sealed the round
// before, as an MCP client at 2026-07-28 does. It returns the result and
// how many rounds it took (1 when nothing was asked).
func (c *Client) InvokeAsking(ctx context.Context, capability string, pr sdk.Principal, args any, a Asking) (json.RawMessage, int, error) {
	raw, err := encode(args)
	if err != nil {
		return nil, 0, err
	}
	gateP := dispatch.Principal{Token: "sdktest", Role: pr.Role, Scope: dispatch.Scope(pr.Scope), UserID: pr.UserID}
	var res json.RawMessage
	n, err := a.run(ctx, capability, func(ctx context.Context) (err error) {
		res, err = c.host.invokeGate(ctx, gateP, capability, raw, 0)
		return err
	})
	if err != nil {
		return nil, n, fromGate(capability, err)
	}
	return res, n, nil
}

// run sends one call (send, through the gate) in as many rounds as it
// asks, a answering each round's requests: the call's outcome in the
// gate's terms, a *MissingCapabilityError, or why the rounds stopped.
func (a Asking) run(ctx context.Context, what string, send func(context.Context) error) (int, error) {
	maxRounds := a.MaxRounds
	if maxRounds <= 0 {
		maxRounds = 10
	}
	var (
		state     string
		responses map[string]json.RawMessage
	)
	for round := 1; round <= maxRounds; round++ {
		rctx := dispatch.WithInput(ctx, dispatch.Input{CanAsk: a.CanAsk, Responses: responses})
		if state != "" {
			rctx = dispatch.WithConfirmation(rctx, dispatch.Confirmation{State: state})
		}
		err := send(rctx)
		var (
			ni *dispatch.NeedsInput
			mc *dispatch.MissingCapability
		)
		switch {
		case errors.As(err, &ni):
		case errors.As(err, &mc):
			return round, &MissingCapabilityError{Needs: mc.Needs}
		default:
			return round, err
		}
		if a.Answer == nil {
			return round, fmt.Errorf("%s asked %d requests and the test answers none", what, len(ni.Requests))
		}
		state, responses = ni.State, map[string]json.RawMessage{}
		for _, r := range ni.Requests {
			ans, err := a.Answer(r.Key, r.Method, r.Params)
			if err != nil {
				return round, err
			}
			b, err := json.Marshal(ans)
			if err != nil {
				return round, fmt.Errorf("answer %q: %w", r.Key, err)
			}
			responses[r.Key] = b
		}
	}
	return maxRounds, fmt.Errorf("%s still asked after %d rounds", what, maxRounds)
}

// sealer keeps the rounds' states in memory, each bound to its call and
// used once, as the host's seal does with a key.
type sealer struct {
	mu     sync.Mutex
	n      int
	states map[string]sealed
}

type sealed struct {
	q    dispatch.Question
	st   dispatch.InputState
	used bool
}

func (s *sealer) SealInput(_ context.Context, q dispatch.Question, st dispatch.InputState) (string, dispatch.InputState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	st.ID, st.ExpiresAt = "in_"+strconv.Itoa(s.n), time.Now().Add(10*time.Minute)
	state := "sdktest-round-" + strconv.Itoa(s.n)
	if s.states == nil {
		s.states = map[string]sealed{}
	}
	s.states[state] = sealed{q: q, st: st}
	return state, st, nil
}

func (s *sealer) OpenInput(_ context.Context, state string, q dispatch.Question) (dispatch.InputState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.states[state]
	switch {
	case !ok:
		return dispatch.InputState{}, fmt.Errorf("%w: not a state this host made", dispatch.ErrConfirmationState)
	case v.q.Principal != q.Principal || v.q.Capability != q.Capability || string(v.q.Args) != string(q.Args):
		return dispatch.InputState{}, fmt.Errorf("%w: another call's round", dispatch.ErrConfirmationState)
	case v.used:
		return dispatch.InputState{}, fmt.Errorf("%w: the round was answered before", dispatch.ErrConfirmationState)
	}
	v.used = true
	s.states[state] = v
	return v.st, nil
}

// The gate asks no confirmation question in sdktest: a review_required
// call is refused at step risk, as before.
func (s *sealer) Ask(context.Context, dispatch.Question) (dispatch.Asked, error) {
	return dispatch.Asked{}, errors.New("sdktest puts no confirmation question")
}

func (s *sealer) Answered(context.Context, string, dispatch.Question) (string, error) {
	return "", fmt.Errorf("%w: sdktest puts no confirmation question", dispatch.ErrConfirmationState)
}
