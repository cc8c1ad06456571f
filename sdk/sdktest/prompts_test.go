package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
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
