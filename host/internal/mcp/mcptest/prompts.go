package mcptest

import (
	"context"
	"fmt"
	"strings"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Prompts WithPrompts registers, in pack "docs" (on): PromptGreet takes a
// required "who" (completed from Names) and an optional "mood" (not
// completed), and renders a text, an embedded resource and an image;
// every customer may get it. PromptSecret needs docs.secret (admins hold
// it); PromptOff is in the switched-off pack "docsoff". Greeting "nobody"
// is the plugin's NotFound, greeting "crash" its internal failure.
const (
	PromptGreet  = "docs.greet"
	PromptSecret = "docs.secret_prompt"
	PromptOff    = "docs.off_prompt"
)

// Names are what PromptGreet's "who" completes from.
var Names = []string{"alice", "alina", "bob"}

// WithPrompts registers the prompts above, served by the platform.
func WithPrompts() Option { return func(s *setup) { s.prompts = true } }

func addPrompts(reg *registry.Registry) {
	for _, p := range []registry.Prompt{
		{Name: PromptGreet, Title: "Greet", Description: "Greet someone.", Pack: "docs", Plugin: "core",
			Arguments: []registry.PromptArgument{
				{Name: "who", Title: "Who", Description: "whom to greet", Required: true, Completes: true, MaxLength: 20},
				{Name: "mood", Description: "how"},
			}},
		{Name: PromptSecret, Description: "A secret.", Pack: "docs", Permission: "docs.secret", Plugin: "core"},
		{Name: PromptOff, Description: "Off.", Pack: "docsoff", Plugin: "core"},
	} {
		if err := reg.AddPrompt(p); err != nil {
			panic(fmt.Sprintf("mcptest: %v", err))
		}
	}
}

var _ dispatch.PromptProvider = (*Platform)(nil)

// GetPrompt implements dispatch.PromptProvider.
func (p *Platform) GetPrompt(_ context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	switch who := r.Args["who"]; {
	case r.Prompt != PromptGreet:
		return dispatch.PromptResult{Messages: []dispatch.PromptMessage{{Role: "user", Content: dispatch.Content{Type: dispatch.ContentText, Text: r.Prompt}}}}, nil
	case who == "nobody":
		return dispatch.PromptResult{}, &dispatch.ToolError{Code: dispatch.NotFound, Message: "no one called nobody"}
	case who == "crash":
		return dispatch.PromptResult{}, fmt.Errorf("render: %w", errBroken)
	}
	return dispatch.PromptResult{Description: "A greeting for " + r.Args["who"], Messages: []dispatch.PromptMessage{
		{Role: "user", Content: dispatch.Content{Type: dispatch.ContentText, Text: "Greet " + r.Args["who"] + " (" + r.Args["mood"] + ")"}},
		{Role: "user", Content: dispatch.Content{Type: dispatch.ContentResource, Resource: dispatch.ResourceContents{URI: "test://card", MIMEType: "text/plain", Text: "card"}}},
		{Role: "assistant", Content: dispatch.Content{Type: dispatch.ContentImage, Data: PNG, MIMEType: "image/png"}},
	}}, nil
}

// Complete implements dispatch.PromptProvider: names for PromptGreet's
// "who", ids for DocsTemplate's "id".
func (p *Platform) Complete(_ context.Context, r dispatch.CompleteRequest) (dispatch.Completion, error) {
	from := Names
	if r.ResourceTemplate == DocsTemplate {
		from = []string{"a-1", "a-2", "b-1"}
	}
	var out []string
	for _, n := range from {
		if strings.HasPrefix(n, r.Value) {
			out = append(out, n)
		}
	}
	return dispatch.Completion{Values: out, Total: len(out)}, nil
}
