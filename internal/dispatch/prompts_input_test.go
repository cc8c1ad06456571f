package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// sealedRounds is an InputSealer that refuses as the host's does: a state
// it did not make, one lapsed, one of another token, capability or
// arguments, one used before; its clock moves when a test says.
type sealedRounds struct {
	*asker
	mu     sync.Mutex
	now    time.Time
	sealed map[string]sealedRound
	used   map[string]bool
}

type sealedRound struct {
	q  dispatch.Question
	st dispatch.InputState
}

func newSealedRounds() *sealedRounds {
	return &sealedRounds{asker: newAsker(), now: time.Now(), sealed: map[string]sealedRound{}, used: map[string]bool{}}
}

func (s *sealedRounds) SealInput(_ context.Context, q dispatch.Question, st dispatch.InputState) (string, dispatch.InputState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.ID, st.ExpiresAt = fmt.Sprintf("in_%d", len(s.sealed)+1), s.now.Add(time.Minute)
	state := "sealed-" + st.ID
	s.sealed[state] = sealedRound{q: q, st: st}
	return state, st, nil
}

func (s *sealedRounds) OpenInput(_ context.Context, state string, q dispatch.Question) (dispatch.InputState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sealed[state]
	refuse := func(why string) (dispatch.InputState, error) {
		return dispatch.InputState{}, fmt.Errorf("%w: %s", dispatch.ErrConfirmationState, why)
	}
	switch {
	case !ok:
		return refuse("not one this server made")
	case !s.now.Before(r.st.ExpiresAt):
		return refuse("the round lapsed")
	case r.q.Principal != q.Principal:
		return refuse("asked of another token")
	case r.q.Capability != q.Capability:
		return refuse("asked about another capability")
	case string(r.q.Args) != string(q.Args):
		return refuse("asked about other arguments")
	case s.used[state]:
		return refuse("answered before")
	}
	s.used[state] = true
	return r.st, nil
}

func (s *sealedRounds) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sealed)
}

func (s *sealedRounds) question(state string) dispatch.Question {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealed[state].q
}

func (s *sealedRounds) later(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	s.mu.Unlock()
}

// planPrompts renders notes.plan asking its caller's user for a detail in
// the first round, keeping "kept", and renders with the answer in the
// second; ask, when set, replaces its answer to a first round. It serves
// notes.ask, a capability asking alike, too. It records every rendering.
type planPrompts struct {
	mu   sync.Mutex
	seen []dispatch.PromptRequest
	ask  *dispatch.InputRequired
}

var detailForm = json.RawMessage(`{"mode":"form","message":"Which detail?","requestedSchema":{"type":"object","properties":{"detail":{"type":"string"}}}}`)

func (p *planPrompts) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	return nil, &dispatch.InputRequired{State: []byte("kept"), Requests: []dispatch.InputRequest{{Key: "detail", Method: dispatch.AskElicit, Params: detailForm}}}
}

func (p *planPrompts) GetPrompt(_ context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	p.mu.Lock()
	p.seen = append(p.seen, r)
	ask := p.ask
	p.mu.Unlock()
	if r.Input == nil {
		return dispatch.PromptResult{}, &dispatch.InputRequired{Missing: []string{"elicitation"}}
	}
	if ans, ok := r.Input.Responses["detail"]; ok && string(r.Input.State) == "kept" {
		return dispatch.PromptResult{Messages: []dispatch.PromptMessage{{Role: "user",
			Content: dispatch.Content{Type: dispatch.ContentText, Text: "plan " + r.Args["topic"] + " with " + string(ans)}}}}, nil
	}
	if ask != nil {
		return dispatch.PromptResult{}, ask
	}
	return dispatch.PromptResult{}, &dispatch.InputRequired{State: []byte("kept"), Requests: []dispatch.InputRequest{{Key: "detail", Method: dispatch.AskElicit, Params: detailForm}}}
}

func (p *planPrompts) Complete(context.Context, dispatch.CompleteRequest) (dispatch.Completion, error) {
	return dispatch.Completion{}, nil
}

func (p *planPrompts) renders() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen)
}

func (p *planPrompts) last() dispatch.PromptRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

var (
	planner = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: "u-alice", Token: "alice-phone"}
	other   = dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: "u-bob", Token: "bob-phone"}
	keeper  = dispatch.Principal{Role: "owner", Scope: dispatch.ScopeRead, UserID: "u-owner", Token: "owner-laptop"}
)

// promptAskGate is a gate over notes.plan (anyone), notes.private (role
// owner) and notes.ask, their rounds sealed by s, recorded in the trail.
func promptAskGate(t *testing.T, s dispatch.Confirmer) (*dispatch.Dispatcher, *planPrompts, *trail) {
	t.Helper()
	reg := registry.New([]string{"notes"})
	if err := reg.Add(registry.Capability{Name: "notes.ask", Description: "Ask.", Kind: registry.Read, Pack: "notes",
		Plugin: "notes", InputSchema: json.RawMessage(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []registry.Prompt{
		{Name: "notes.plan", Pack: "notes", Plugin: "notes", Arguments: []registry.PromptArgument{{Name: "topic", Required: true}, {Name: "style"}}},
		{Name: "notes.private", Pack: "notes", Permission: "notes.private", Plugin: "notes", Arguments: []registry.PromptArgument{{Name: "topic"}}},
	} {
		if err := reg.AddPrompt(p); err != nil {
			t.Fatal(err)
		}
	}
	pp := &planPrompts{}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"notes": true},
		Roles: map[string][]string{"customer": {"notes.read"}, "owner": {"notes.*"}}}, map[string]dispatch.Provider{"notes": pp})
	if err != nil {
		t.Fatal(err)
	}
	tr := &trail{}
	d.UseAuditor(tr, true)
	if s != nil {
		d.UseConfirmer(s)
	}
	return d, pp, tr
}

var elicitOnly = dispatch.Input{CanAsk: []string{dispatch.AskElicit}}

// roundAnswer is a round's context: the client's answers and the state of
// the round before.
func roundAnswer(state string, detail string) context.Context {
	ctx := dispatch.WithInput(context.Background(), dispatch.Input{CanAsk: elicitOnly.CanAsk,
		Responses: map[string]json.RawMessage{"detail": json.RawMessage(`{"action":"accept","content":{"detail":"` + detail + `"}}`)}})
	return dispatch.WithConfirmation(ctx, dispatch.Confirmation{State: state})
}

// TestPromptRoundSealedAndReopened: a prompt that asks its caller's
// client is NeedsInput, its state sealed to the caller, the prompt (under
// its record's name, apart from any capability) and its arguments in
// canonical form, and recorded as asked naming the round; the answers and
// the state come back to the provider with what it kept and the round,
// and the rendering's record names the same round.
func TestPromptRoundSealedAndReopened(t *testing.T) {
	s := newSealedRounds()
	d, pp, tr := promptAskGate(t, s)
	args := map[string]string{"topic": "oslo", "style": "brief"}
	_, err := d.GetPrompt(dispatch.WithInput(context.Background(), elicitOnly), planner, "notes.plan", args)
	var ni *dispatch.NeedsInput
	if !errors.As(err, &ni) || ni.Capability != "notes.plan" || ni.ID == "" || ni.State == "" || ni.ExpiresAt.IsZero() ||
		len(ni.Requests) != 1 || ni.Requests[0].Key != "detail" || ni.Requests[0].Method != dispatch.AskElicit {
		t.Fatalf("round 1: %v; want the request for a detail", err)
	}
	if in := pp.last().Input; in == nil || in.Round != 0 || in.State != nil || len(in.CanAsk) != 1 {
		t.Fatalf("round 1 gave the provider %+v; want what the client can answer, round 0", in)
	}
	q := s.question(ni.State)
	if q.Principal != planner || q.Capability != "prompts/get:notes.plan" || string(q.Args) != `{"style":"brief","topic":"oslo"}` {
		t.Fatalf("sealed to %+v (args %s); want the caller, the prompt's record name and the sorted arguments", q, q.Args)
	}
	recs := tr.take()
	if len(recs) != 1 || recs[0].Capability != "prompts/get:notes.plan" || !recs[0].AskedClient || recs[0].ApprovalID != ni.ID ||
		recs[0].Err != nil || recs[0].Refusal != nil {
		t.Fatalf("round 1 recorded %+v; want asked, naming %s", recs, ni.ID)
	}

	res, err := d.GetPrompt(roundAnswer(ni.State, "maps"), planner, "notes.plan", map[string]string{"style": "brief", "topic": "oslo"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.Text != `plan oslo with {"action":"accept","content":{"detail":"maps"}}` {
		t.Fatalf("round 2: %+v %v", res, err)
	}
	if in := pp.last().Input; in == nil || string(in.State) != "kept" || in.Round != 1 {
		t.Fatalf("round 2 gave the provider %+v; want the state kept and round 1", in)
	}
	recs = tr.take()
	if len(recs) != 1 || recs[0].AskedClient || recs[0].ApprovalID != ni.ID || recs[0].Err != nil || recs[0].Refusal != nil {
		t.Fatalf("round 2 recorded %+v; want the rendering, naming %s", recs, ni.ID)
	}

	// A client that can be asked nothing (an older revision) gives the
	// provider no round, and a prompt that must ask fails naming what the
	// client lacks, recorded as the caller's to fix.
	_, err = d.GetPrompt(context.Background(), planner, "notes.plan", args)
	var mc *dispatch.MissingCapability
	if !errors.As(err, &mc) || mc.Capability != "notes.plan" || strings.Join(mc.Needs, ",") != "elicitation" || pp.last().Input != nil {
		t.Fatalf("a client that cannot be asked: %v; want elicitation missing, no round given", err)
	}
	if recs := tr.take(); len(recs) != 1 || recs[0].Err == nil || recs[0].AskedClient {
		t.Fatalf("recorded %+v; want the failure", recs)
	}
}

// TestPromptStateRefusedAtInput: a state the gate cannot accept for this
// rendering — used, altered, lapsed, another caller's, other arguments',
// a call's round — is refused at step input, recorded so, and the prompt
// is not rendered.
func TestPromptStateRefusedAtInput(t *testing.T) {
	s := newSealedRounds()
	d, pp, tr := promptAskGate(t, s)
	ask := func() string {
		t.Helper()
		_, err := d.GetPrompt(dispatch.WithInput(context.Background(), elicitOnly), planner, "notes.plan", map[string]string{"topic": "oslo"})
		var ni *dispatch.NeedsInput
		if !errors.As(err, &ni) {
			t.Fatalf("round 1: %v", err)
		}
		return ni.State
	}
	used := ask()
	if _, err := d.GetPrompt(roundAnswer(used, "maps"), planner, "notes.plan", map[string]string{"topic": "oslo"}); err != nil {
		t.Fatal(err)
	}
	_, err := d.Invoke(dispatch.WithInput(context.Background(), elicitOnly), planner, "notes.ask", nil)
	var callRound *dispatch.NeedsInput
	if !errors.As(err, &callRound) {
		t.Fatalf("notes.ask: %v", err)
	}
	fresh, lapsing := ask(), ask()
	tr.take()
	for _, tc := range []struct {
		name  string
		p     dispatch.Principal
		topic string
		state string
		later time.Duration
		why   string
	}{
		{"used", planner, "oslo", used, 0, "answered before"},
		{"tampered", planner, "oslo", fresh + "-TAMPERED", 0, "not one this server made"},
		{"another caller", other, "oslo", fresh, 0, "another token"},
		{"other arguments", planner, "rome", fresh, 0, "other arguments"},
		{"a call's round", planner, "oslo", callRound.State, 0, "another capability"},
		{"lapsed", planner, "oslo", lapsing, 2 * time.Minute, "lapsed"},
	} {
		s.later(tc.later)
		before := pp.renders()
		_, err := d.GetPrompt(roundAnswer(tc.state, "x"), tc.p, "notes.plan", map[string]string{"topic": tc.topic})
		var r *dispatch.Refusal
		if !errors.As(err, &r) || r.Step != dispatch.StepInput || r.Capability != "notes.plan" || !strings.Contains(r.Reason, tc.why) {
			t.Errorf("%s: %v; want a refusal at step input saying %q", tc.name, err, tc.why)
		}
		if pp.renders() != before {
			t.Errorf("%s: the prompt was rendered", tc.name)
		}
		if recs := tr.take(); len(recs) != 1 || recs[0].Refusal == nil || recs[0].Refusal.Step != dispatch.StepInput {
			t.Errorf("%s: recorded %+v; want the refusal at input", tc.name, recs)
		}
	}

	// A gate that seals no rounds made no state, and says so.
	bare, _, _ := promptAskGate(t, nil)
	if _, err := bare.GetPrompt(roundAnswer("anything", "x"), planner, "notes.plan", map[string]string{"topic": "oslo"}); outcomeOf(err) != string(dispatch.StepInput) {
		t.Fatalf("a state at a gate without a sealer: %v; want a refusal at input", err)
	}
}

// TestPromptUnknownWithState: a prompt the caller may not get is unknown
// whatever state it brings — as one that does not exist — and the state
// is not opened, so it still answers the call it was sealed to.
func TestPromptUnknownWithState(t *testing.T) {
	s := newSealedRounds()
	d, pp, tr := promptAskGate(t, s)
	_, err := d.GetPrompt(dispatch.WithInput(context.Background(), elicitOnly), keeper, "notes.private", map[string]string{"topic": "vault"})
	var ni *dispatch.NeedsInput
	if !errors.As(err, &ni) {
		t.Fatalf("the owner's round 1: %v", err)
	}
	tr.take()
	before := pp.renders()
	for _, name := range []string{"notes.private", "notes.none"} {
		_, err := d.GetPrompt(roundAnswer(ni.State, "x"), planner, name, map[string]string{"topic": "vault"})
		if !errors.Is(err, dispatch.ErrUnknownPrompt) || err.Error() != fmt.Sprintf("unknown prompt %q", name) {
			t.Errorf("%s with the owner's state: %v; want it unknown", name, err)
		}
	}
	if pp.renders() != before {
		t.Fatal("a prompt the caller may not get was rendered")
	}
	recs := tr.take()
	if len(recs) != 2 || recs[0].Refusal == nil || recs[0].Refusal.Step != dispatch.StepPermission || recs[0].AskedClient || recs[0].ApprovalID != "" ||
		recs[1].Refusal == nil || recs[1].Refusal.Step != dispatch.StepUnknown {
		t.Fatalf("recorded %+v; want the permission refusal and the unknown prompt, naming no round", recs)
	}
	if res, err := d.GetPrompt(roundAnswer(ni.State, "gold"), keeper, "notes.private", map[string]string{"topic": "vault"}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("the owner's round 2: %+v %v; want the state unspent", res, err)
	}
}

// TestPromptRoundBounds: a prompt's requests are held to the rules a
// call's are — each failing as the plugin's bug, with nothing sealed and
// nothing asked of the client — and a capability MCP does not have, or an
// ask of a client that can be asked nothing, is the plugin's bug too.
func TestPromptRoundBounds(t *testing.T) {
	s := newSealedRounds()
	d, pp, tr := promptAskGate(t, s)
	one := func(key, method string, params json.RawMessage) []dispatch.InputRequest {
		return []dispatch.InputRequest{{Key: key, Method: method, Params: params}}
	}
	many := make([]dispatch.InputRequest, dispatch.MaxInputRequests+1)
	for i := range many {
		many[i] = dispatch.InputRequest{Key: fmt.Sprintf("k%d", i), Method: dispatch.AskElicit, Params: detailForm}
	}
	for _, tc := range []struct {
		name string
		ask  dispatch.InputRequired
		want string
	}{
		{"nothing", dispatch.InputRequired{}, "nothing"},
		{"too many", dispatch.InputRequired{Requests: many}, "at most"},
		{"bad key", dispatch.InputRequired{Requests: one("a b", dispatch.AskElicit, detailForm)}, "request key"},
		{"the gate's key", dispatch.InputRequired{Requests: one("capgate_confirm", dispatch.AskElicit, detailForm)}, "gate's own"},
		{"undeclared", dispatch.InputRequired{Requests: one("roots", dispatch.AskRoots, json.RawMessage(`{}`))}, "did not declare"},
		{"params not an object", dispatch.InputRequired{Requests: one("a", dispatch.AskElicit, json.RawMessage(`[1]`))}, "JSON object"},
		{"state too big", dispatch.InputRequired{Requests: one("a", dispatch.AskElicit, detailForm), State: make([]byte, dispatch.MaxInputStateBytes+1)}, "state"},
		{"no such capability", dispatch.InputRequired{Missing: []string{"telepathy"}}, "MCP does not have"},
	} {
		pp.mu.Lock()
		pp.ask = &tc.ask
		pp.mu.Unlock()
		_, err := d.GetPrompt(dispatch.WithInput(context.Background(), elicitOnly), planner, "notes.plan", map[string]string{"topic": "oslo"})
		var (
			ie *dispatch.InternalError
			ni *dispatch.NeedsInput
		)
		if !errors.As(err, &ie) || errors.As(err, &ni) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `plugin "notes"`) {
			t.Errorf("%s: %v; want the plugin's failure saying %q", tc.name, err, tc.want)
		}
		if s.count() != 0 {
			t.Fatalf("%s: a round was sealed", tc.name)
		}
		if recs := tr.take(); len(recs) != 1 || recs[0].Err == nil || recs[0].AskedClient {
			t.Errorf("%s: recorded %+v; want the failure", tc.name, recs)
		}
	}
}

// askAnyway asks whatever the round, as a plugin that ignores it might.
type askAnyway struct{ planPrompts }

func (a *askAnyway) GetPrompt(context.Context, dispatch.PromptRequest) (dispatch.PromptResult, error) {
	return dispatch.PromptResult{}, &dispatch.InputRequired{Requests: []dispatch.InputRequest{{Key: "detail", Method: dispatch.AskElicit, Params: detailForm}}}
}

// TestPromptAsksWithoutRound: a provider asking a client the gate gave
// it no round for (a revision that cannot ask) fails, asking nothing.
func TestPromptAsksWithoutRound(t *testing.T) {
	reg := registry.New([]string{"notes"})
	if err := reg.AddPrompt(registry.Prompt{Name: "notes.plan", Pack: "notes", Plugin: "notes"}); err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"notes": true}, Roles: map[string][]string{"customer": {"notes.read"}}},
		map[string]dispatch.Provider{"notes": &askAnyway{}})
	if err != nil {
		t.Fatal(err)
	}
	d.UseConfirmer(newSealedRounds())
	_, err = d.GetPrompt(context.Background(), planner, "notes.plan", nil)
	var ni *dispatch.NeedsInput
	if err == nil || errors.As(err, &ni) || !strings.Contains(err.Error(), "cannot be asked") {
		t.Fatalf("%v; want the plugin's failure", err)
	}
}
