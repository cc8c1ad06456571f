package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type none struct{}

type greeting struct {
	Text string `json:"text"`
}

// askingPlugin has the handlers the asking tests call: one question; two
// in turn, the second depending on the first, with a round state; three
// at once; one that goes on without what the client cannot answer.
func askingPlugin(runs *atomic.Int32) *sdk.Plugin {
	p := sdk.New("asker", "0.0.1")
	sdk.Add(p, sdk.Tool[none, greeting]{Name: "asker.one", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, _ none) (greeting, error) {
			runs.Add(1)
			ans, err := call.Elicit(ctx, "user_name", sdk.FormFor[struct {
				Name string `json:"name"`
			}]("What is your name?"))
			if err != nil {
				return greeting{}, err
			}
			var v struct {
				Name string `json:"name"`
			}
			if !ans.Accepted() {
				return greeting{Text: "no name"}, nil
			}
			if err := ans.Decode(&v); err != nil {
				return greeting{}, sdk.InvalidInput("%v", err)
			}
			return greeting{Text: "Hello, " + v.Name + "!"}, nil
		}})
	sdk.Add(p, sdk.Tool[none, greeting]{Name: "asker.turns", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, _ none) (greeting, error) {
			first, err := call.Elicit(ctx, "step1", sdk.Form{Message: "Step 1: What is your name?"})
			if err != nil {
				return greeting{}, err
			}
			kept := string(call.RoundState())
			call.SetRoundState([]byte("after-step1"))
			second, err := call.Elicit(ctx, "step2", sdk.Form{Message: "Step 2: What is your favorite color?"})
			if err != nil {
				return greeting{}, err
			}
			return greeting{Text: string(first.Content) + "|" + string(second.Content) + "|" + kept}, nil
		}})
	sdk.Add(p, sdk.Tool[none, greeting]{Name: "asker.many", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, _ none) (greeting, error) {
			name, err1 := call.Elicit(ctx, "user_name", sdk.Form{Message: "What is your name?"})
			hello, err2 := call.Sample(ctx, "greeting", sdk.SamplingRequest{MaxTokens: 50,
				Messages: []sdk.SamplingMessage{{Role: "user", Text: "Generate a greeting"}}})
			roots, err3 := call.ListRoots(ctx, "client_roots")
			if err := errors.Join(err1, err2, err3); err != nil {
				return greeting{}, err
			}
			return greeting{Text: string(name.Content) + "|" + hello.Text + "|" + roots[0].URI}, nil
		}})
	sdk.Add(p, sdk.Tool[none, greeting]{Name: "asker.whatever", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, _ none) (greeting, error) {
			var cannot *sdk.CannotAskError
			_, err := call.Elicit(ctx, "name", sdk.Form{Message: "Name?"})
			if err != nil && !errors.As(err, &cannot) {
				return greeting{}, err
			}
			s, err := call.Sample(ctx, "capital", sdk.SamplingRequest{MaxTokens: 100,
				Messages: []sdk.SamplingMessage{{Role: "user", Text: "What is the capital of France?"}}})
			if err != nil {
				return greeting{}, err
			}
			return greeting{Text: s.Text}, nil
		}})
	return p
}

// answerAll answers as the conformance suite's client does.
func answerAll(asked *[]string) func(key, method string, params json.RawMessage) (any, error) {
	return func(key, method string, params json.RawMessage) (any, error) {
		*asked = append(*asked, key+"="+method)
		switch method {
		case sdktest.Elicit:
			return map[string]any{"action": "accept", "content": map[string]any{"name": key}}, nil
		case sdktest.Sample:
			return map[string]any{"role": "assistant", "model": "m", "stopReason": "endTurn", "content": map[string]any{"type": "text", "text": "Paris"}}, nil
		}
		return map[string]any{"roots": []any{map[string]any{"uri": "file:///test/root", "name": "Test Root"}}}, nil
	}
}

var everything = []string{sdktest.Elicit, sdktest.Sample, sdktest.ListRoots}

// TestAskRounds: each handler's asks reach the client, the answers come
// back through the whole gate, and the handler finishes; answers are kept
// across rounds, with the handler's round state.
func TestAskRounds(t *testing.T) {
	var runs atomic.Int32
	c := sdktest.Start(t, askingPlugin(&runs), nil)
	ctx := context.Background()
	alice := sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "alice"}
	for _, tc := range []struct {
		capability string
		rounds     int
		asked      string
		text       string
	}{
		{"asker.one", 2, "user_name=elicitation/create", "Hello, user_name!"},
		{"asker.turns", 3, "step1=elicitation/create,step2=elicitation/create", `{"name":"step1"}|{"name":"step2"}|after-step1`},
		{"asker.many", 2, "client_roots=roots/list,greeting=sampling/createMessage,user_name=elicitation/create", `{"name":"user_name"}|Paris|file:///test/root`},
	} {
		var asked []string
		res, rounds, err := c.InvokeAsking(ctx, tc.capability, alice, nil, sdktest.Asking{CanAsk: everything, Answer: answerAll(&asked)})
		var out greeting
		if err != nil || json.Unmarshal(res, &out) != nil || out.Text != tc.text || rounds != tc.rounds || strings.Join(asked, ",") != tc.asked {
			t.Errorf("%s: %s %v after %d rounds asking %v; want %q after %d asking %s", tc.capability, res, err, rounds, asked, tc.text, tc.rounds, tc.asked)
		}
	}
	if runs.Load() != 2 {
		t.Errorf("asker.one ran %d times; want once a round", runs.Load())
	}
}

// TestAskDeclinedAndCannot: a declined form reaches the handler; a
// client that cannot answer makes the ask a *CannotAskError, which a
// handler may go on without or return as is, failing the call naming
// what is missing; a plain Invoke can be asked nothing.
func TestAskDeclinedAndCannot(t *testing.T) {
	var runs atomic.Int32
	c := sdktest.Start(t, askingPlugin(&runs), nil)
	ctx := context.Background()
	alice := sdk.Principal{Role: "customer", Scope: sdk.ScopeRead, UserID: "alice"}
	res, _, err := c.InvokeAsking(ctx, "asker.one", alice, nil, sdktest.Asking{CanAsk: everything,
		Answer: func(string, string, json.RawMessage) (any, error) { return map[string]any{"action": "decline"}, nil }})
	if err != nil || !strings.Contains(string(res), "no name") {
		t.Fatalf("declined: %s %v", res, err)
	}
	var asked []string
	res, _, err = c.InvokeAsking(ctx, "asker.whatever", alice, nil, sdktest.Asking{CanAsk: []string{sdktest.Sample}, Answer: answerAll(&asked)})
	if err != nil || !strings.Contains(string(res), "Paris") || strings.Join(asked, ",") != "capital=sampling/createMessage" {
		t.Fatalf("sampling only: %s %v asking %v; want only the sampling asked", res, err, asked)
	}
	_, _, err = c.InvokeAsking(ctx, "asker.one", alice, nil, sdktest.Asking{CanAsk: []string{sdktest.Sample}, Answer: answerAll(&asked)})
	var missing *sdktest.MissingCapabilityError
	if !errors.As(err, &missing) || strings.Join(missing.Needs, ",") != "elicitation" {
		t.Fatalf("no elicitation: %v; want it missing", err)
	}
	if _, err := c.Invoke(ctx, "asker.one", alice, nil); err == nil {
		t.Fatal("a call that cannot ask succeeded")
	}
	// Answers that are not what was asked are asked again.
	n := 0
	_, rounds, err := c.InvokeAsking(ctx, "asker.one", alice, nil, sdktest.Asking{CanAsk: everything, MaxRounds: 3,
		Answer: func(string, string, json.RawMessage) (any, error) { n++; return map[string]any{"action": "maybe"}, nil }})
	if err == nil || rounds != 3 || n != 3 {
		t.Fatalf("malformed answers: %v after %d rounds; want asked again each round", err, rounds)
	}
}
