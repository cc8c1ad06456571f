package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Prompts of the asking fixture: askPrompt asks its caller's user for a
// detail, keeping "kept", and renders with the answer; askPrivate does
// the same for holders of docs.secret alone.
const (
	askPrompt  = "docs.plan"
	askPrivate = "docs.plan_private"
)

// planPrompts serves the asking fixture's prompts, counting renderings.
type planPrompts struct{ renders atomic.Int32 }

func (p *planPrompts) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func (p *planPrompts) GetPrompt(_ context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	p.renders.Add(1)
	in := r.Input
	if in == nil || !slices.Contains(in.CanAsk, dispatch.AskElicit) {
		return dispatch.PromptResult{}, &dispatch.InputRequired{Missing: []string{"elicitation"}}
	}
	if ans, ok := in.Responses["detail"]; ok && string(in.State) == "kept" {
		return dispatch.PromptResult{Messages: []dispatch.PromptMessage{{Role: "user",
			Content: dispatch.Content{Type: dispatch.ContentText, Text: "Plan " + r.Args["topic"] + " with " + string(ans)}}}}, nil
	}
	return dispatch.PromptResult{}, &dispatch.InputRequired{State: []byte("kept"), Requests: []dispatch.InputRequest{{Key: "detail", Method: dispatch.AskElicit,
		Params: json.RawMessage(`{"mode":"form","message":"Which detail?","requestedSchema":{"type":"object","properties":{"detail":{"type":"string"}},"required":["detail"]}}`)}}}
}

func (p *planPrompts) Complete(context.Context, dispatch.CompleteRequest) (dispatch.Completion, error) {
	return dispatch.Completion{}, nil
}

// promptAskFixture is a handler over the asking prompts, their rounds
// sealed by the host's confirmer over a real approvals store.
func promptAskFixture(t *testing.T) (*fixture, *planPrompts) {
	t.Helper()
	reg := registry.New([]string{"docs"})
	for _, p := range []registry.Prompt{
		{Name: askPrompt, Description: "Plan, asking a detail.", Pack: "docs", Plugin: "core",
			Arguments: []registry.PromptArgument{{Name: "topic", Required: true}}},
		{Name: askPrivate, Description: "Plan in secret.", Pack: "docs", Permission: "docs.secret", Plugin: "core"},
	} {
		if err := reg.AddPrompt(p); err != nil {
			t.Fatal(err)
		}
	}
	pp := &planPrompts{}
	d, err := dispatch.New(reg, mcptest.Policy(), map[string]dispatch.Provider{"core": pp})
	if err != nil {
		t.Fatal(err)
	}
	s := testSealer(t, time.Minute)
	d.UseConfirmer(s)
	f := &fixture{t: t, logs: &mcptest.LogBuffer{}}
	f.h = New(d, Options{Version: "1.2.3-test", Logger: slogTo(f.logs)})
	return f, pp
}

// getPrompt is prompts/get of name with args, from a client of version
// ver declaring caps (at 2026-07-28), with extra params.
func (f *fixture) getPrompt(p dispatch.Principal, ver, name string, args, caps any, extra map[string]any) reply {
	f.t.Helper()
	return f.sendWithCaps(p, ver, rpc{method: "prompts/get", id: 3, params: map[string]any{"name": name, "arguments": args}}, caps, extra)
}

// TestPromptAsksOnTheWire: at 2026-07-28 a prompt that asks is answered
// input_required — the shape of a tools/call that asks, the plugin's
// request under its key and the gate's sealed state, and no messages —
// and the prompts/get sent again with the answer and the state is the
// rendered prompt. The state used, altered, or brought back by another
// caller or with other arguments is refused at step input, rendering
// nothing.
func TestPromptAsksOnTheWire(t *testing.T) {
	f, pp := promptAskFixture(t)
	args := map[string]any{"topic": "oslo"}
	rep := f.getPrompt(mcptest.Alice, Version20260728, askPrompt, args, askCaps, nil)
	reqs, s1 := inputRequired(t, rep)
	q, _ := reqs["detail"].(map[string]any)
	if len(reqs) != 1 || q["method"] != dispatch.AskElicit || !strings.Contains(jsonOf(q["params"]), `"requestedSchema"`) {
		t.Fatalf("round 1 asks %v", reqs)
	}
	res := rep.result(t)
	if _, has := res["messages"]; has {
		t.Fatalf("input_required carries messages: %s", rep.raw)
	}
	// The very shape a tools/call that asks answers.
	tool := askFixture(t)
	toolRes := tool.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, nil).result(t)
	if got, want := keysOf(res), keysOf(toolRes); !slices.Equal(got, want) {
		t.Fatalf("prompts/get input_required has %v; tools/call's has %v", got, want)
	}

	round2 := map[string]any{"requestState": s1, "inputResponses": map[string]any{"detail": named("maps")}}
	for name, tc := range map[string]struct {
		p     dispatch.Principal
		args  any
		state string
		why   string
	}{
		"tampered":        {mcptest.Alice, args, s1 + "-TAMPERED", "not one this server made"},
		"another token":   {mcptest.Bob, args, s1, "another token"},
		"other arguments": {mcptest.Alice, map[string]any{"topic": "rome"}, s1, "other arguments"},
	} {
		before := pp.renders.Load()
		rep := f.getPrompt(tc.p, Version20260728, askPrompt, tc.args, askCaps, map[string]any{"requestState": tc.state, "inputResponses": round2["inputResponses"]})
		if refusalStep(rep) != string(dispatch.StepInput) || !strings.Contains(string(rep.raw), tc.why) || pp.renders.Load() != before {
			t.Errorf("%s: %s; want a refusal at step input saying %q, nothing rendered", name, rep.raw, tc.why)
		}
	}
	rep = f.getPrompt(mcptest.Alice, Version20260728, askPrompt, args, askCaps, round2)
	res = rep.result(t)
	msgs, _ := res["messages"].([]any)
	if res["resultType"] != "complete" || len(msgs) != 1 || !strings.Contains(jsonOf(msgs[0]), `Plan oslo with {\"action\":\"accept\",\"content\":{\"name\":\"maps\"}}`) {
		t.Fatalf("round 2: %s; want the prompt rendered with the answer", rep.raw)
	}
	if rep := f.getPrompt(mcptest.Alice, Version20260728, askPrompt, args, askCaps, round2); refusalStep(rep) != string(dispatch.StepInput) ||
		!strings.Contains(string(rep.raw), "answered before") {
		t.Fatalf("the state again: %s; want it refused", rep.raw)
	}
	if !strings.Contains(f.logs.String(), "asked the caller's client for input") || !strings.Contains(f.logs.String(), askPrompt) {
		t.Errorf("the round is not in the log: %s", f.logs.String())
	}
}

// TestPromptAsksRules: a prompt the caller may not get is the unknown
// prompt whatever state and answers come with it; malformed answers are
// -32602; a client that declared no elicitation gets -32021 naming it
// (HTTP 400); before 2026-07-28 a prompt that asks is -32602 saying what
// it needs and where it can ask, whatever the request carries; and
// prompts/list never answers input_required.
func TestPromptAsksRules(t *testing.T) {
	f, pp := promptAskFixture(t)
	_, s := inputRequired(t, f.getPrompt(mcptest.Admin, Version20260728, askPrivate, nil, askCaps, nil))
	answer := map[string]any{"requestState": s, "inputResponses": map[string]any{"detail": named("x")}}
	before := pp.renders.Load()
	hidden := f.getPrompt(mcptest.Alice, Version20260728, askPrivate, nil, askCaps, answer)
	plain := f.getPrompt(mcptest.Alice, Version20260728, askPrivate, nil, askCaps, nil)
	if hidden.errorCode(t) != codeInvalidParams || string(hidden.raw) != string(plain.raw) || !strings.Contains(string(hidden.raw), `unknown prompt \"`+askPrivate) ||
		pp.renders.Load() != before {
		t.Fatalf("a prompt alice may not get, with the admin's state: %s; without: %s; want the same unknown prompt, nothing rendered", hidden.raw, plain.raw)
	}
	if res := f.getPrompt(mcptest.Admin, Version20260728, askPrivate, nil, askCaps, answer).result(t); res["resultType"] != "complete" {
		t.Fatalf("the admin's answer after alice brought the state: %v; want it unspent", res)
	}

	for name, extra := range map[string]map[string]any{
		"an answer not an object": {"inputResponses": map[string]any{"detail": 12345}},
		"answers not an object":   {"inputResponses": []any{1}},
		"state not a string":      {"requestState": 7},
	} {
		if rep := f.getPrompt(mcptest.Alice, Version20260728, askPrompt, map[string]any{"topic": "a"}, askCaps, extra); rep.errorCode(t) != codeInvalidParams {
			t.Errorf("%s: %s; want invalid params", name, rep.raw)
		}
	}

	rep := f.getPrompt(mcptest.Alice, Version20260728, askPrompt, map[string]any{"topic": "a"}, map[string]any{"sampling": map[string]any{}}, nil)
	e := rep.errorObj(t)
	data, _ := e["data"].(map[string]any)
	need, _ := data["requiredCapabilities"].(map[string]any)
	if rep.status != http.StatusBadRequest || e["code"] != float64(codeMissingCapability) || need["elicitation"] == nil || len(need) != 1 {
		t.Fatalf("no elicitation declared: %d %s", rep.status, rep.raw)
	}

	for _, ver := range allVersions[:4] {
		rep := f.getPrompt(mcptest.Alice, ver, askPrompt, map[string]any{"topic": "a"}, nil, map[string]any{
			"requestState": s, "inputResponses": map[string]any{"detail": named("x")}})
		msg, _ := rep.errorObj(t)["message"].(string)
		if rep.status != http.StatusOK || rep.errorCode(t) != codeInvalidParams || !strings.Contains(msg, askPrompt+" needs the client to support elicitation") ||
			!strings.Contains(msg, Version20260728) {
			t.Errorf("@%q: %d %s; want -32602 naming elicitation and 2026-07-28", ver, rep.status, rep.raw)
		}
	}

	for _, ver := range allVersions {
		rep := f.sendWithCaps(mcptest.Admin, ver, rpc{method: "prompts/list", id: 1, params: map[string]any{}}, askCaps, map[string]any{
			"requestState": s, "inputResponses": map[string]any{"detail": named("x")}})
		res := rep.result(t)
		if ps, _ := res["prompts"].([]any); len(ps) != 2 || strings.Contains(string(rep.raw), "input_required") {
			t.Errorf("prompts/list @%q: %s; want the two prompts listed", ver, rep.raw)
		}
	}
}
