package dispatch

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckRequests: a provider's round is held to the contract — each
// bound and rule refused, naming what is wrong — and a sound one passes.
func TestCheckRequests(t *testing.T) {
	form := json.RawMessage(`{"mode":"form","message":"Name?","requestedSchema":{"type":"object"}}`)
	one := func(key, method string, params json.RawMessage) []InputRequest {
		return []InputRequest{{Key: key, Method: method, Params: params}}
	}
	many := make([]InputRequest, MaxInputRequests+1)
	for i := range many {
		many[i] = InputRequest{Key: "k" + strings.Repeat("x", i), Method: AskElicit, Params: form}
	}
	can := []string{AskElicit, AskSample}
	for _, tc := range []struct {
		name string
		ir   InputRequired
		want string
	}{
		{"nothing", InputRequired{}, "nothing"},
		{"too many", InputRequired{Requests: many}, "at most"},
		{"state too big", InputRequired{Requests: one("a", AskElicit, form), State: make([]byte, MaxInputStateBytes+1)}, "state"},
		{"bad key", InputRequired{Requests: one("a b", AskElicit, form)}, "request key"},
		{"long key", InputRequired{Requests: one(strings.Repeat("a", MaxInputKeyLength+1), AskElicit, form)}, "request key"},
		{"the gate's key", InputRequired{Requests: one("capgate_confirm", AskElicit, form)}, "gate's own"},
		{"twice", InputRequired{Requests: append(one("a", AskElicit, form), one("a", AskSample, form)...)}, "twice"},
		{"undeclared", InputRequired{Requests: one("a", AskRoots, json.RawMessage(`{}`))}, "did not declare"},
		{"unknown method", InputRequired{Requests: one("a", "tools/call", json.RawMessage(`{}`))}, "did not declare"},
		{"params not an object", InputRequired{Requests: one("a", AskElicit, json.RawMessage(`[1]`))}, "JSON object"},
		{"params not JSON", InputRequired{Requests: one("a", AskElicit, json.RawMessage(`{"a":`))}, "JSON object"},
		{"params too big", InputRequired{Requests: one("a", AskElicit, json.RawMessage(`{"a":"`+strings.Repeat("x", MaxInputParamsBytes)+`"}`))}, "bytes of params"},
	} {
		err := checkRequests(&tc.ir, can)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := checkRequests(&InputRequired{Requests: append(one("a", AskElicit, form), one("b.c-d_e", AskSample, json.RawMessage(`{}`))...)}, can); err != nil {
		t.Errorf("a sound round: %v", err)
	}
}
