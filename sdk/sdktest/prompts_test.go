package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

type noteArgs struct {
	Note  string `json:"note" jsonschema:"the note to discuss" capgate:"maxLength=20"`
	Style string `json:"style,omitempty" jsonschema:"how to answer"`
}

type listIn struct{}
type listOut struct {
	Notes []string `json:"notes"`
}

// notesPlugin has a prompt whose note argument completes from the notes
// the caller may list, read through the gate as the caller.
func notesPlugin() *sdk.Plugin {
	p := sdk.New("notes", "1")
	sdk.Add(p, sdk.Tool[listIn, listOut]{
		Name: "notes.list", Kind: sdk.Read, Permission: "notes.read",
		Handler: func(ctx context.Context, call sdk.Call, in listIn) (listOut, error) {
			if call.Principal.UserID == "bob" {
				return listOut{Notes: []string{"bobs-plan"}}, nil
			}
			return listOut{Notes: []string{"groceries", "garden", "alices-secret"}}, nil
		},
	})
	sdk.AddPrompt(p, sdk.Prompt[noteArgs]{
		Name: "notes.discuss", Title: "Discuss a note", Description: "talk about one of your notes",
		Permission: "notes.read",
		Render: func(ctx context.Context, call sdk.Call, in noteArgs) ([]sdk.PromptMessage, error) {
			if in.Note == "missing" {
				return nil, sdk.NotFound("no note %q", in.Note)
			}
			return []sdk.PromptMessage{
				sdk.UserSays(sdk.Text("Discuss " + in.Note + " as " + call.Principal.UserID + " in style " + in.Style)),
				sdk.UserSays(sdk.EmbeddedText("notes://"+in.Note, "text/plain", "the note's text")),
				sdk.AssistantSays(sdk.Image([]byte{1, 2, 3}, "image/png")),
			}, nil
		},
		Complete: map[string]sdk.Completer{
			"note": func(ctx context.Context, call sdk.Call, partial string, _ map[string]string) ([]string, error) {
				raw, err := call.Invoke(ctx, "notes.list", listIn{})
				if err != nil {
					return nil, err
				}
				var out listOut
				if err := json.Unmarshal(raw, &out); err != nil {
					return nil, err
				}
				var vals []string
				for _, n := range out.Notes {
					if strings.HasPrefix(n, partial) {
						vals = append(vals, n)
					}
				}
				return vals, nil
			},
		},
	})
	sdk.AddPrompt(p, sdk.Prompt[struct{}]{
		Name: "notes.admin_digest", Description: "a digest for admins", Permission: "notes.admin",
		Render: func(context.Context, sdk.Call, struct{}) ([]sdk.PromptMessage, error) {
			return []sdk.PromptMessage{sdk.UserSays(sdk.Text("digest"))}, nil
		},
	})
	return p
}

func TestPromptRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := sdktest.NewHost(t)
	h.Roles = map[string][]string{"reader": {"notes.read"}, "admin": {"notes.*"}, "nobody": nil}
	c, err := h.Add(notesPlugin(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := c.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Prompts) != 2 {
		t.Fatalf("described %d prompts", len(d.Prompts))
	}
	args := d.Prompts[0].Arguments
	if len(args) != 2 || args[0].Name != "note" || !args[0].Required || !args[0].Completes || args[0].MaxLength != 20 ||
		args[0].Description != "the note to discuss" || args[1].Name != "style" || args[1].Required || args[1].Completes {
		t.Fatalf("arguments %v", args)
	}

	alice := sdk.Principal{Role: "reader", Scope: sdk.ScopeRead, UserID: "alice"}
	msgs, err := c.GetPrompt(ctx, "notes.discuss", alice, map[string]string{"note": "garden", "style": "brief"})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 3 || msgs[0].Role != sdk.User || msgs[0].Type != "text" || msgs[0].Text != "Discuss garden as alice in style brief" ||
		msgs[1].Type != "resource" || msgs[1].URI != "notes://garden" || msgs[1].Text != "the note's text" ||
		msgs[2].Role != sdk.Assistant || msgs[2].Type != "image" || msgs[2].MIMEType != "image/png" {
		t.Fatalf("messages %+v", msgs)
	}
	// The host checks the arguments before the plugin sees them.
	for want, a := range map[string]map[string]string{
		`needs argument "note"`:   {"style": "x"},
		`takes no argument "zzz"`: {"note": "a", "zzz": "b"},
		"more than its limit":     {"note": strings.Repeat("n", 21)},
	} {
		_, err := c.GetPrompt(ctx, "notes.discuss", alice, a)
		if sdk.CodeOf(err) != sdk.CodeInvalidInput || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want invalid input with %q", a, err, want)
		}
	}
	if _, err := c.GetPrompt(ctx, "notes.discuss", alice, map[string]string{"note": "missing"}); !sdk.IsNotFound(err) {
		t.Errorf("the plugin's NotFound: got %v", err)
	}

	// Completion asks notes.list as the caller: each sees their own.
	got, err := c.Complete(ctx, "notes.discuss", "note", "g", nil, alice)
	if err != nil || !slices.Equal(got.Values, []string{"groceries", "garden"}) || got.Total != 2 || got.HasMore {
		t.Fatalf("alice's completion %+v, %v", got, err)
	}
	bob := sdk.Principal{Role: "reader", Scope: sdk.ScopeRead, UserID: "bob"}
	if got, err := c.Complete(ctx, "notes.discuss", "note", "", nil, bob); err != nil || !slices.Equal(got.Values, []string{"bobs-plan"}) {
		t.Fatalf("bob's completion %+v, %v", got, err)
	}
	// An argument without a completer has no suggestions; one the prompt
	// lacks is the caller's mistake.
	if got, err := c.Complete(ctx, "notes.discuss", "style", "b", nil, alice); err != nil || len(got.Values) != 0 {
		t.Fatalf("style completion %+v, %v", got, err)
	}
	if _, err := c.Complete(ctx, "notes.discuss", "nope", "", nil, alice); sdk.CodeOf(err) != sdk.CodeInvalidInput {
		t.Fatalf("unknown argument: %v", err)
	}

	// A prompt the caller may not get is unknown, for rendering and
	// completion alike, exactly as a prompt that does not exist.
	nobody := sdk.Principal{Role: "nobody", Scope: sdk.ScopeRead, UserID: "carol"}
	for _, tc := range []struct {
		who  sdk.Principal
		name string
	}{{nobody, "notes.discuss"}, {alice, "notes.admin_digest"}, {alice, "notes.nothing"}} {
		if _, err := c.GetPrompt(ctx, tc.name, tc.who, nil); !errors.Is(err, sdktest.ErrUnknownPrompt) {
			t.Errorf("%s for %s: got %v", tc.name, tc.who.Role, err)
		}
		if _, err := c.Complete(ctx, tc.name, "note", "", nil, tc.who); !errors.Is(err, sdktest.ErrUnknownPrompt) {
			t.Errorf("complete %s for %s: got %v", tc.name, tc.who.Role, err)
		}
	}
	admin := sdk.Principal{Role: "admin", Scope: sdk.ScopeAdmin, UserID: "root"}
	if msgs, err := c.GetPrompt(ctx, "notes.admin_digest", admin, nil); err != nil || msgs[0].Text != "digest" {
		t.Fatalf("admin digest %+v, %v", msgs, err)
	}
}

func TestPromptPackOff(t *testing.T) {
	ctx := context.Background()
	h := sdktest.NewHost(t)
	h.DisabledPacks = []string{"notes"}
	c, err := h.Add(notesPlugin(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	alice := sdk.Principal{Role: "any", Scope: sdk.ScopeAdmin, UserID: "alice"}
	if _, err := c.GetPrompt(ctx, "notes.discuss", alice, map[string]string{"note": "a"}); !errors.Is(err, sdktest.ErrUnknownPrompt) {
		t.Fatalf("pack off: %v", err)
	}
}

func TestAddPromptPanics(t *testing.T) {
	render := func(context.Context, sdk.Call, noteArgs) ([]sdk.PromptMessage, error) { return nil, nil }
	type intArgs struct {
		N int `json:"n"`
	}
	cases := map[string]func(p *sdk.Plugin){
		"Render is nil": func(p *sdk.Plugin) { sdk.AddPrompt(p, sdk.Prompt[noteArgs]{Name: "x.y"}) },
		"declared twice": func(p *sdk.Plugin) {
			sdk.AddPrompt(p, sdk.Prompt[noteArgs]{Name: "x.y", Render: render})
			sdk.AddPrompt(p, sdk.Prompt[noteArgs]{Name: "x.y", Render: render})
		},
		"prompt arguments are strings": func(p *sdk.Plugin) {
			sdk.AddPrompt(p, sdk.Prompt[intArgs]{Name: "x.y", Render: func(context.Context, sdk.Call, intArgs) ([]sdk.PromptMessage, error) { return nil, nil }})
		},
		"which is not an argument": func(p *sdk.Plugin) {
			sdk.AddPrompt(p, sdk.Prompt[noteArgs]{Name: "x.y", Render: render, Complete: map[string]sdk.Completer{"zzz": nil}})
		},
	}
	for want, f := range cases {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), want) {
					t.Errorf("%s: panic %v", want, r)
				}
			}()
			f(sdk.New("x", "1"))
		}()
	}
}

type planArgs struct {
	Trip string `json:"trip" jsonschema:"where to" capgate:"maxLength=40"`
}

// planPlugin's prompt asks in turn while it renders: its user for the
// travellers (a form), then, with what it kept, the client's model for a
// packing list; trips.quick goes on without the model when the client
// has none.
func planPlugin(renders *atomic.Int32) *sdk.Plugin {
	p := sdk.New("trips", "1")
	sdk.AddPrompt(p, sdk.Prompt[planArgs]{
		Name: "trips.plan", Description: "plan a trip, asking who goes", Permission: "trips.read",
		Render: func(ctx context.Context, call sdk.Call, in planArgs) ([]sdk.PromptMessage, error) {
			renders.Add(1)
			who, err := call.Elicit(ctx, "travellers", sdk.FormFor[struct {
				Who string `json:"who"`
			}]("Who is going to "+in.Trip+"?"))
			if err != nil {
				return nil, err
			}
			if !who.Accepted() {
				return []sdk.PromptMessage{sdk.UserSays(sdk.Text("Plan a trip to " + in.Trip + " for me"))}, nil
			}
			kept := string(call.RoundState())
			call.SetRoundState([]byte("asked the model"))
			list, err := call.Sample(ctx, "packing", sdk.SamplingRequest{MaxTokens: 50,
				Messages: []sdk.SamplingMessage{{Role: "user", Text: "What to pack for " + in.Trip + "?"}}})
			if err != nil {
				return nil, err
			}
			return []sdk.PromptMessage{
				sdk.UserSays(sdk.Text("Plan a trip to " + in.Trip + " for " + string(who.Content))),
				sdk.AssistantSays(sdk.Text("Pack: " + list.Text + " (" + kept + ")")),
			}, nil
		},
	})
	sdk.AddPrompt(p, sdk.Prompt[struct{}]{
		Name: "trips.quick", Description: "a quick plan, the model's idea when there is one", Permission: "trips.read",
		Render: func(ctx context.Context, call sdk.Call, _ struct{}) ([]sdk.PromptMessage, error) {
			idea := "anywhere"
			s, err := call.Sample(ctx, "idea", sdk.SamplingRequest{MaxTokens: 10, Messages: []sdk.SamplingMessage{{Role: "user", Text: "Where to?"}}})
			var cannot *sdk.CannotAskError
			switch {
			case errors.As(err, &cannot):
			case err != nil:
				return nil, err
			default:
				idea = s.Text
			}
			return []sdk.PromptMessage{sdk.UserSays(sdk.Text("Go " + idea))}, nil
		},
	})
	return p
}

// TestPromptAsks: a prompt's Render asks its caller's client as a
// handler does: the form, then (its answer kept) the model, each round a
// prompts/get through the whole gate with the state sealed the round
// before, Render running once a round; a declined form reaches it; a
// client that cannot be asked makes it fail naming what it lacks, or go
// on without; a caller who may not get the prompt is never asked.
func TestPromptAsks(t *testing.T) {
	ctx := context.Background()
	h := sdktest.NewHost(t)
	h.Roles = map[string][]string{"traveller": {"trips.read"}, "nobody": nil}
	var renders atomic.Int32
	c, err := h.Add(planPlugin(&renders), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, false); err != nil {
		t.Fatal(err)
	}
	alice := sdk.Principal{Role: "traveller", Scope: sdk.ScopeRead, UserID: "alice"}
	var asked []string
	client := sdktest.Asking{CanAsk: []string{sdktest.Elicit, sdktest.Sample}, Answer: func(key, method string, params json.RawMessage) (any, error) {
		asked = append(asked, key+"="+method+":"+string(params))
		if method == sdktest.Elicit {
			return map[string]any{"action": "accept", "content": map[string]any{"who": "Ada"}}, nil
		}
		return map[string]any{"role": "assistant", "model": "m", "content": map[string]any{"type": "text", "text": "boots"}}, nil
	}}
	msgs, rounds, err := c.GetPromptAsking(ctx, "trips.plan", alice, map[string]string{"trip": "Oslo"}, client)
	if err != nil || rounds != 3 || renders.Load() != 3 {
		t.Fatalf("%+v %v after %d rounds, %d renders; want 3 of each", msgs, err, rounds, renders.Load())
	}
	if len(msgs) != 2 || msgs[0].Text != `Plan a trip to Oslo for {"who":"Ada"}` || msgs[1].Role != sdk.Assistant || msgs[1].Text != "Pack: boots (asked the model)" {
		t.Fatalf("messages %+v", msgs)
	}
	if len(asked) != 2 || !strings.HasPrefix(asked[0], "travellers=elicitation/create:") || !strings.Contains(asked[0], `"Who is going to Oslo?"`) ||
		!strings.Contains(asked[0], `"requestedSchema"`) || !strings.HasPrefix(asked[1], "packing=sampling/createMessage:") || !strings.Contains(asked[1], "Oslo") {
		t.Fatalf("asked %q; want the form, then the model", asked)
	}

	// A declined form is the prompt's to render without.
	declined := sdktest.Asking{CanAsk: client.CanAsk, Answer: func(string, string, json.RawMessage) (any, error) {
		return map[string]any{"action": "decline"}, nil
	}}
	if msgs, rounds, err := c.GetPromptAsking(ctx, "trips.plan", alice, map[string]string{"trip": "Oslo"}, declined); err != nil || rounds != 2 || msgs[0].Text != "Plan a trip to Oslo for me" {
		t.Fatalf("declined: %+v %v after %d rounds", msgs, err, rounds)
	}

	// A client that cannot answer what is asked: the prompt fails naming
	// it, or goes on without.
	var missing *sdktest.MissingCapabilityError
	if _, err := c.GetPrompt(ctx, "trips.plan", alice, map[string]string{"trip": "Oslo"}); !errors.As(err, &missing) || strings.Join(missing.Needs, ",") != "elicitation" {
		t.Fatalf("a client that can be asked nothing: %v; want elicitation missing", err)
	}
	formOnly := sdktest.Asking{CanAsk: []string{sdktest.Elicit}, Answer: client.Answer}
	if _, _, err := c.GetPromptAsking(ctx, "trips.plan", alice, map[string]string{"trip": "Oslo"}, formOnly); !errors.As(err, &missing) || strings.Join(missing.Needs, ",") != "sampling" {
		t.Fatalf("a client without a model: %v; want sampling missing", err)
	}
	if msgs, err := c.GetPrompt(ctx, "trips.quick", alice, nil); err != nil || msgs[0].Text != "Go anywhere" {
		t.Fatalf("quick without a model: %+v %v", msgs, err)
	}
	if msgs, rounds, err := c.GetPromptAsking(ctx, "trips.quick", alice, nil, client); err != nil || rounds != 2 || msgs[0].Text != "Go boots" {
		t.Fatalf("quick with a model: %+v %v after %d rounds", msgs, err, rounds)
	}

	// The gate's rules for prompts hold whatever the client can answer.
	renders.Store(0)
	nobody := sdk.Principal{Role: "nobody", Scope: sdk.ScopeRead, UserID: "carol"}
	if _, _, err := c.GetPromptAsking(ctx, "trips.plan", nobody, map[string]string{"trip": "Oslo"}, client); !errors.Is(err, sdktest.ErrUnknownPrompt) || renders.Load() != 0 {
		t.Fatalf("a caller who may not get it: %v, %d renders; want unknown, never rendered", err, renders.Load())
	}
	if _, _, err := c.GetPromptAsking(ctx, "trips.plan", alice, map[string]string{}, client); sdk.CodeOf(err) != sdk.CodeInvalidInput || renders.Load() != 0 {
		t.Fatalf("without its argument: %v; want invalid input, never rendered", err)
	}
}
