package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// holder holds every call it is given, as the approvals desk would.
type holder struct{ held int }

func (h *holder) Hold(context.Context, dispatch.Held) (dispatch.Holding, error) {
	h.held++
	return dispatch.Holding{ApprovalID: "ap_1", Result: json.RawMessage(`{"status":"pending_approval","approval_id":"ap_1","expires_at":"2026-12-03T00:00:00Z","message":"waits"}`)}, nil
}

// confirmFixture is the test platform with booking.cancel at
// review_required, questions sealed by the host's confirmer over a real
// approvals store, and a holder for the calls that cannot be asked.
func confirmFixture(t *testing.T) (*fixture, *holder) {
	t.Helper()
	f := newFixture(t, Options{})
	policy := mcptest.Policy()
	policy.Risk.Capabilities = map[string]registry.Risk{mcptest.Cancel: registry.RiskReviewRequired}
	if err := f.platform.Dispatcher.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	s := testSealer(t, time.Minute)
	h := &holder{}
	f.platform.Dispatcher.UseConfirmer(s)
	f.platform.Dispatcher.UseApprover(h)
	return f, h
}

// cancelCall is tools/call booking.cancel b-1, with extra params, from a
// client of version ver declaring caps.
func (f *fixture) cancelCall(p dispatch.Principal, ver string, caps any, extra map[string]any) reply {
	f.t.Helper()
	m := rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.Cancel, "arguments": map[string]any{"id": "b-1"}}}
	var msg map[string]any
	if err := json.Unmarshal(m.encode(ver), &msg); err != nil {
		f.t.Fatal(err)
	}
	params := msg["params"].(map[string]any)
	if meta, ok := params["_meta"].(map[string]any); ok {
		meta[metaClientCapabilities] = caps
	}
	for k, v := range extra {
		params[k] = v
	}
	body, _ := json.Marshal(msg)
	return f.do(p, http.MethodPost, m.headers(ver), body)
}

var elicitForm = map[string]any{"elicitation": map[string]any{}}

// TestConfirmationOnTheWire: at 2026-07-28 a client declaring elicitation
// gets an input_required result with one form elicitation and a state;
// sending the call again with the state and accept runs it; the same
// state again is refused at step risk.
func TestConfirmationOnTheWire(t *testing.T) {
	f, h := confirmFixture(t)
	rep := f.cancelCall(mcptest.Alice, Version20260728, elicitForm, nil)
	res, _ := rep.msg["result"].(map[string]any)
	if rep.status != http.StatusOK || res["resultType"] != "input_required" {
		t.Fatalf("first call: %d %s; want input_required", rep.status, rep.raw)
	}
	state, _ := res["requestState"].(string)
	reqs, _ := res["inputRequests"].(map[string]any)
	q, _ := reqs[confirmInput].(map[string]any)
	qp, _ := q["params"].(map[string]any)
	schema, _ := qp["requestedSchema"].(map[string]any)
	msg, _ := qp["message"].(string)
	if state == "" || len(reqs) != 1 || q["method"] != "elicitation/create" || qp["mode"] != "form" || schema["type"] != "object" ||
		!strings.Contains(msg, mcptest.Cancel) || !strings.Contains(msg, `"b-1"`) {
		t.Fatalf("input_required result: %s", rep.raw)
	}
	if _, ok := res["content"]; ok || h.held != 0 || f.platform.Cancelled("b-1") {
		t.Fatalf("the question ran (%v), held (%d) or carried content: %s", f.platform.Cancelled("b-1"), h.held, rep.raw)
	}
	answer := map[string]any{"requestState": state, "inputResponses": map[string]any{confirmInput: map[string]any{"action": "accept", "content": map[string]any{}}}}
	rep = f.cancelCall(mcptest.Alice, Version20260728, elicitForm, answer)
	res, _ = rep.msg["result"].(map[string]any)
	if res["resultType"] != "complete" || res["isError"] != false || !f.platform.Cancelled("b-1") {
		t.Fatalf("the accepted call: %s; want it run", rep.raw)
	}
	rep = f.cancelCall(mcptest.Alice, Version20260728, elicitForm, answer)
	if step := refusalStep(rep); step != string(dispatch.StepRisk) || !strings.Contains(string(rep.raw), "answered before") {
		t.Fatalf("the same answer again: %s; want a refusal at risk", rep.raw)
	}
}

func refusalStep(rep reply) string {
	e, _ := rep.msg["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	s, _ := d["step"].(string)
	return s
}

// TestConfirmationAnswers: decline and cancel are refusals; another
// principal's use of the state is refused; malformed answers are invalid
// params; an answer without the state is asked anew.
func TestConfirmationAnswers(t *testing.T) {
	f, _ := confirmFixture(t)
	ask := func() string {
		rep := f.cancelCall(mcptest.Alice, Version20260728, elicitForm, nil)
		res, _ := rep.msg["result"].(map[string]any)
		s, _ := res["requestState"].(string)
		if s == "" {
			t.Fatalf("no question: %s", rep.raw)
		}
		return s
	}
	answer := func(state string, action any) map[string]any {
		return map[string]any{"requestState": state, "inputResponses": map[string]any{confirmInput: map[string]any{"action": action}}}
	}
	for _, action := range []string{"decline", "cancel"} {
		rep := f.cancelCall(mcptest.Alice, Version20260728, elicitForm, answer(ask(), action))
		if refusalStep(rep) != string(dispatch.StepRisk) || !strings.Contains(string(rep.raw), "declined") {
			t.Errorf("%s: %s; want a refusal at risk", action, rep.raw)
		}
	}
	rep := f.cancelCall(mcptest.Bob, Version20260728, elicitForm, answer(ask(), "accept"))
	if refusalStep(rep) != string(dispatch.StepRisk) && refusalStep(rep) != string(dispatch.StepOwnership) {
		t.Errorf("bob with alice's state: %s; want refused", rep.raw)
	}
	for name, extra := range map[string]map[string]any{
		"state not a string":     {"requestState": 7},
		"responses not object":   {"requestState": "x", "inputResponses": []any{}},
		"answer without action":  {"requestState": "x", "inputResponses": map[string]any{confirmInput: map[string]any{}}},
		"answer unknown action":  answer("x", "maybe"),
		"answer not an object":   {"requestState": "x", "inputResponses": map[string]any{confirmInput: "yes"}},
		"state over the maximum": {"requestState": strings.Repeat("x", maxRequestStateBytes+1)},
	} {
		rep := f.cancelCall(mcptest.Alice, Version20260728, elicitForm, extra)
		e, _ := rep.msg["error"].(map[string]any)
		if code, _ := e["code"].(float64); int(code) != codeInvalidParams {
			t.Errorf("%s: %s; want invalid params", name, rep.raw)
		}
	}
	// Another server's answers are ignored, and a state with no answer
	// of ours is asked anew.
	rep = f.cancelCall(mcptest.Alice, Version20260728, elicitForm, map[string]any{"requestState": ask(), "inputResponses": map[string]any{"other": map[string]any{"action": "accept"}}})
	if res, _ := rep.msg["result"].(map[string]any); res["resultType"] != "input_required" {
		t.Errorf("a state without our answer: %s; want a new question", rep.raw)
	}
	if f.platform.Cancelled("b-1") {
		t.Fatal("a refused or unanswered call ran")
	}
}

// TestClientsThatCannotAskAreHeld: without form elicitation, or before
// 2026-07-28, a review_required call waits for an approver.
func TestClientsThatCannotAskAreHeld(t *testing.T) {
	f, h := confirmFixture(t)
	for _, c := range []struct {
		ver  string
		caps any
	}{
		{Version20260728, map[string]any{}},
		{Version20260728, map[string]any{"elicitation": map[string]any{"url": map[string]any{}}}},
		{Version20260728, map[string]any{"elicitation": true}},
		{Version20251125, elicitForm},
	} {
		rep := f.cancelCall(mcptest.Alice, c.ver, c.caps, nil)
		res, _ := rep.msg["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		if sc["status"] != "pending_approval" {
			t.Errorf("%s %v: %s; want it held", c.ver, c.caps, rep.raw)
		}
	}
	if h.held != 4 || f.platform.Cancelled("b-1") {
		t.Fatalf("held %d of 4, ran %v", h.held, f.platform.Cancelled("b-1"))
	}
	// A form declared beside url is a form.
	rep := f.cancelCall(mcptest.Alice, Version20260728, map[string]any{"elicitation": map[string]any{"url": map[string]any{}, "form": map[string]any{}}}, nil)
	if res, _ := rep.msg["result"].(map[string]any); res["resultType"] != "input_required" {
		t.Errorf("form and url: %s; want a question", rep.raw)
	}
}
