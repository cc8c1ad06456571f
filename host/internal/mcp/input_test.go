package mcp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// askFixture is the test platform with diag.ask, its rounds sealed by the
// host's confirmer over a real approvals store.
func askFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, platform: mcptest.New(mcptest.WithAsks()), logs: &mcptest.LogBuffer{}}
	f.h = New(f.platform.Dispatcher, Options{Version: "1.2.3-test", Logger: slogTo(f.logs)})
	s := testSealer(t, time.Minute)
	f.platform.Dispatcher.UseConfirmer(s)
	f.platform.Dispatcher.UseApprover(&holder{})
	return f
}

var askCaps = map[string]any{"elicitation": map[string]any{}, "roots": map[string]any{}}

// askCall is tools/call diag.ask with args, from a client of version ver
// declaring caps, with extra params.
func (f *fixture) askCall(p dispatch.Principal, ver string, args, caps any, extra map[string]any) reply {
	f.t.Helper()
	return f.sendWithCaps(p, ver, rpc{method: "tools/call", id: 7, params: map[string]any{"name": mcptest.Ask, "arguments": args}}, caps, extra)
}

// inputRequired returns the requests and state of an input_required
// result, failing on anything else.
func inputRequired(t *testing.T, rep reply) (map[string]any, string) {
	t.Helper()
	res, _ := rep.msg["result"].(map[string]any)
	reqs, _ := res["inputRequests"].(map[string]any)
	state, _ := res["requestState"].(string)
	if rep.status != http.StatusOK || res["resultType"] != "input_required" || len(reqs) == 0 || state == "" {
		t.Fatalf("%d %s; want input_required with requests and a state", rep.status, rep.raw)
	}
	if _, ok := res["content"]; ok {
		t.Fatalf("input_required carries content: %s", rep.raw)
	}
	return reqs, state
}

func named(name string) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{"name": name}}
}

// TestAskRoundsOnTheWire: a call that asks its client twice takes three
// rounds, each an input_required result with the plugin's request under
// its key and a new sealed state; the last answers with every name. A
// state used, altered, or brought back by another token or with other
// arguments is refused at step input; none of them runs anything.
func TestAskRoundsOnTheWire(t *testing.T) {
	f := askFixture(t)
	args := map[string]any{"rounds": 2}
	reqs, s1 := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, args, askCaps, nil))
	q, _ := reqs["name1"].(map[string]any)
	if len(reqs) != 1 || q["method"] != dispatch.AskElicit || !strings.Contains(jsonOf(q["params"]), `"requestedSchema"`) {
		t.Fatalf("round 1 asks %v", reqs)
	}
	round2 := map[string]any{"requestState": s1, "inputResponses": map[string]any{"name1": named("Ada")}}
	reqs, s2 := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, args, askCaps, round2))
	if _, ok := reqs["name2"]; !ok || len(reqs) != 1 || s2 == s1 {
		t.Fatalf("round 2 asks %v with state %q; want name2 and a new state", reqs, s2)
	}
	for name, tc := range map[string]struct {
		p     dispatch.Principal
		args  any
		state string
		why   string
	}{
		"tampered":        {mcptest.Alice, args, s2 + "-TAMPERED", "not one this server made"},
		"another token":   {mcptest.Bob, args, s2, "another token"},
		"other arguments": {mcptest.Alice, map[string]any{"rounds": 3}, s2, "other arguments"},
		"the used state":  {mcptest.Alice, args, s1, "answered before"},
	} {
		rep := f.askCall(tc.p, Version20260728, tc.args, askCaps, map[string]any{"requestState": tc.state, "inputResponses": map[string]any{"name2": named("Eve")}})
		if refusalStep(rep) != string(dispatch.StepInput) || !strings.Contains(string(rep.raw), tc.why) {
			t.Errorf("%s: %s; want a refusal at step input saying %q", name, rep.raw, tc.why)
		}
	}
	rep := f.askCall(mcptest.Alice, Version20260728, args, askCaps, map[string]any{"requestState": s2, "inputResponses": map[string]any{"name2": named("Grace")}})
	res := rep.result(t)
	var out struct {
		Names []string `json:"names"`
		Round int      `json:"round"`
	}
	if err := json.Unmarshal([]byte(jsonOf(res["structuredContent"])), &out); err != nil || res["resultType"] != "complete" ||
		strings.Join(out.Names, ",") != "Ada,Grace" || out.Round != 2 {
		t.Fatalf("round 3: %s; want both names after two rounds", rep.raw)
	}
	rep = f.askCall(mcptest.Alice, Version20260728, args, askCaps, map[string]any{"requestState": s2, "inputResponses": map[string]any{"name2": named("Grace")}})
	if refusalStep(rep) != string(dispatch.StepInput) {
		t.Fatalf("the last state again: %s; want it refused", rep.raw)
	}
}

// TestAskRetryPassesTheGate: each round is a call through every step: a
// pack switched off between rounds refuses the answer, as to an unknown
// name.
func TestAskRetryPassesTheGate(t *testing.T) {
	f := askFixture(t)
	_, s1 := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, nil))
	policy := mcptest.Policy()
	policy.Packs["diag"] = false
	if err := f.platform.Dispatcher.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	rep := f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{"requestState": s1, "inputResponses": map[string]any{"name1": named("Ada")}})
	if !strings.Contains(string(rep.raw), `unknown tool \"diag.ask\"`) {
		t.Fatalf("the answer with the pack off: %s; want the answer to an unknown name", rep.raw)
	}
	// Back on, the state was not used up by the refusal.
	if err := f.platform.Dispatcher.SetPolicy(mcptest.Policy()); err != nil {
		t.Fatal(err)
	}
	rep = f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{"requestState": s1, "inputResponses": map[string]any{"name1": named("Ada")}})
	if res := rep.result(t); res["resultType"] != "complete" || !strings.Contains(string(rep.raw), "Ada") {
		t.Fatalf("the answer with the pack back on: %s", rep.raw)
	}
}

// TestAskAnswers: answers without a state are the client's word and
// count; unknown keys are ignored; a missing answer is asked again; a
// malformed one is invalid params.
func TestAskAnswers(t *testing.T) {
	f := askFixture(t)
	rep := f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{"inputResponses": map[string]any{
		"name1": named("Ada"), "unknown_extra_key": map[string]any{"action": "accept"}, "bad key!": 1}})
	if res := rep.result(t); res["resultType"] != "complete" || !strings.Contains(string(rep.raw), "Ada") {
		t.Fatalf("answer without state, extra keys: %s; want it complete", rep.raw)
	}
	reqs, _ := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{"inputResponses": map[string]any{"wrong_key": named("x")}}))
	if _, ok := reqs["name1"]; !ok {
		t.Fatalf("a missing answer asks %v; want name1 again", reqs)
	}
	for name, extra := range map[string]map[string]any{
		"a number":     {"inputResponses": map[string]any{"name1": 12345}},
		"not a map":    {"inputResponses": []any{1}},
		"state number": {"requestState": 7},
	} {
		if rep := f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, extra); rep.errorCode(t) != codeInvalidParams {
			t.Errorf("%s: %s; want invalid params", name, rep.raw)
		}
	}
	// Several requests at once; a second caller's round is its own.
	reqs, _ = inputRequired(t, f.askCall(mcptest.Bob, Version20260728, map[string]any{"also": true}, askCaps, nil))
	if r, _ := reqs["roots"].(map[string]any); len(reqs) != 2 || r["method"] != dispatch.AskRoots {
		t.Fatalf("two requests at once: %v", reqs)
	}
}

// TestAskNeedsCapability: a client that declared no elicitation gets the
// revision's missing-capability error naming it (HTTP 400); an older
// revision, which cannot ask in rounds, gets a tool error saying so; a
// plugin asking what the client did not declare fails as the plugin's
// bug, never reaching the client.
func TestAskNeedsCapability(t *testing.T) {
	f := askFixture(t)
	rep := f.askCall(mcptest.Alice, Version20260728, map[string]any{}, map[string]any{"sampling": map[string]any{}}, nil)
	e := rep.errorObj(t)
	data, _ := e["data"].(map[string]any)
	need, _ := data["requiredCapabilities"].(map[string]any)
	if rep.status != http.StatusBadRequest || e["code"] != float64(codeMissingCapability) || need["elicitation"] == nil {
		t.Fatalf("no elicitation declared: %d %s", rep.status, rep.raw)
	}
	rep = f.askCall(mcptest.Alice, Version20251125, map[string]any{}, nil, nil)
	if res := rep.result(t); res["isError"] != true || !strings.Contains(toolText(t, res), "elicitation") {
		t.Fatalf("at 2025-11-25: %s; want a tool error naming elicitation", rep.raw)
	}
	rep = f.askCall(mcptest.Alice, Version20260728, map[string]any{"also": true}, map[string]any{"elicitation": map[string]any{}}, nil)
	if res := rep.result(t); res["isError"] != true || res["resultType"] == "input_required" {
		t.Fatalf("roots asked of a client without them: %s; want the call failed", rep.raw)
	}
	if !strings.Contains(f.logs.String(), "which the client did not declare") {
		t.Errorf("the plugin's bug is not in the log: %s", f.logs.String())
	}
	// Neither list answers input_required.
	for _, m := range []string{"tools/list", "prompts/list"} {
		rep := f.send(mcptest.Alice, Version20260728, rpc{method: m, id: 1, params: map[string]any{}})
		if strings.Contains(string(rep.raw), "input_required") {
			t.Errorf("%s: %s", m, rep.raw)
		}
	}
}

// TestAskAfterConfirmation: a review_required call that asks its client
// asks its user to confirm first; after the yes, its rounds carry the
// yes, so the user is not asked again, and the call finishes.
func TestAskAfterConfirmation(t *testing.T) {
	f := askFixture(t)
	policy := mcptest.Policy()
	policy.Risk.Capabilities = map[string]registry.Risk{mcptest.Ask: registry.RiskReviewRequired}
	if err := f.platform.Dispatcher.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	reqs, cf := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, nil))
	if _, ok := reqs[confirmInput]; !ok {
		t.Fatalf("round 1 asks %v; want the gate's question", reqs)
	}
	reqs, s := inputRequired(t, f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{
		"requestState": cf, "inputResponses": map[string]any{confirmInput: map[string]any{"action": "accept"}}}))
	if _, ok := reqs["name1"]; !ok || len(reqs) != 1 {
		t.Fatalf("after the yes: %v; want the plugin's question", reqs)
	}
	rep := f.askCall(mcptest.Alice, Version20260728, map[string]any{}, askCaps, map[string]any{"requestState": s, "inputResponses": map[string]any{"name1": named("Ada")}})
	if res := rep.result(t); res["resultType"] != "complete" || !strings.Contains(string(rep.raw), "Ada") {
		t.Fatalf("the plugin's answer: %s; want it complete without asking again", rep.raw)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
