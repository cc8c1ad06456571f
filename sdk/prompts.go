package sdk

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Role says who speaks a prompt message.
type Role string

const (
	// User is the person at the client (or the client speaking for them).
	User Role = "user"
	// Assistant is the model.
	Assistant Role = "assistant"
)

// PromptMessage is one message of a rendered prompt: who says it and one
// content block (Text, Image, Audio, EmbeddedText, EmbeddedBlob or a
// ResourceLink).
type PromptMessage struct {
	Role    Role
	Content Content
}

// UserSays is a message from the user.
func UserSays(c Content) PromptMessage { return PromptMessage{Role: User, Content: c} }

// AssistantSays is a message from the assistant.
func AssistantSays(c Content) PromptMessage { return PromptMessage{Role: Assistant, Content: c} }

// Completer suggests values for one argument: partial is what the user has
// typed so far, context the prompt's other arguments already chosen. It
// runs for the caller in call, through the same gate as the prompt, and
// must suggest only what that caller may read (an id of a record they
// could not get is a leak). Return the best first; at most 100 are sent.
type Completer func(ctx context.Context, call Call, partial string, context map[string]string) ([]string, error)

// Prompt declares a prompt template: a message sequence a client offers
// its user, rendered by the plugin with the caller's arguments.
//
// Args is a struct of string fields, the prompt's arguments: the `json`
// tag names each, a field with omitempty is optional, a `jsonschema:"..."`
// tag describes it and a `capgate:"maxLength=N"` tag bounds it
// (DefaultMaxLength otherwise). Use struct{} for a prompt without
// arguments. The host checks every argument before Render runs.
//
//	type VisitArgs struct {
//		Resource string `json:"resource" jsonschema:"the room or desk to visit"`
//		Day      string `json:"day,omitempty" jsonschema:"YYYY-MM-DD, today when absent"`
//	}
//	sdk.AddPrompt(p, sdk.Prompt[VisitArgs]{
//		Name: "booking.plan_visit", Description: "plan a visit to a bookable resource",
//		Permission: "booking.read",
//		Render: func(ctx context.Context, call sdk.Call, in VisitArgs) ([]sdk.PromptMessage, error) {
//			return []sdk.PromptMessage{sdk.UserSays(sdk.Text("Plan my visit to " + in.Resource))}, nil
//		},
//		Complete: map[string]sdk.Completer{"resource": svc.completeResource},
//	})
type Prompt[Args any] struct {
	// Name is lower-case segments joined by dots ("booking.plan_visit"),
	// unique across the host among prompts and capabilities.
	Name string
	// Title is for people; Description says what the prompt is for.
	Title       string
	Description string
	// Pack is the operator toggle the prompt belongs to; empty means the
	// plugin's pack.
	Pack string
	// Permission is what the caller's role must hold; empty means any
	// caller. The host shows the prompt only to callers it admits.
	Permission string
	// Render builds the messages. Errors made with NotFound or
	// InvalidInput reach the caller with their message.
	Render func(ctx context.Context, call Call, in Args) ([]PromptMessage, error)
	// Complete maps an argument's name (its json name) to the function
	// that suggests its values.
	Complete map[string]Completer
}

// prompt is a declared prompt as the server runs it.
type prompt struct {
	desc     *capgatev1.Prompt
	render   func(ctx context.Context, call Call, args map[string]string) ([]PromptMessage, error)
	complete map[string]Completer
}

// AddPrompt declares a prompt. It panics on a declaration that can never
// work (no Render, a duplicate name, Args not a struct of strings, a
// completer for an argument Args lacks): programming errors found the
// first time the plugin starts.
func AddPrompt[Args any](p *Plugin, pr Prompt[Args]) {
	if pr.Render == nil {
		panic(fmt.Sprintf("sdk.AddPrompt %q: Render is nil", pr.Name))
	}
	if p.prompts == nil {
		p.prompts = map[string]*prompt{}
	}
	if _, dup := p.prompts[pr.Name]; dup {
		panic(fmt.Sprintf("sdk.AddPrompt %q: prompt declared twice", pr.Name))
	}
	if pr.Pack == "" {
		pr.Pack = p.pack
	}
	fields, args, err := promptArgs(reflect.TypeFor[Args]())
	if err != nil {
		panic(fmt.Sprintf("sdk.AddPrompt %q: %v", pr.Name, err))
	}
	for name, f := range pr.Complete {
		a := findArg(args, name)
		if a == nil {
			panic(fmt.Sprintf("sdk.AddPrompt %q: Complete names %q, which is not an argument", pr.Name, name))
		}
		if f == nil {
			panic(fmt.Sprintf("sdk.AddPrompt %q: Complete[%q] is nil", pr.Name, name))
		}
		a.Completes = true
	}
	render := pr.Render
	p.prompts[pr.Name] = &prompt{
		desc: &capgatev1.Prompt{
			Name: pr.Name, Title: pr.Title, Description: pr.Description, Arguments: args,
			Pack: pr.Pack, Permission: pr.Permission,
		},
		render: func(ctx context.Context, call Call, in map[string]string) ([]PromptMessage, error) {
			var v Args
			rv := reflect.ValueOf(&v).Elem()
			for rv.Kind() == reflect.Pointer {
				rv.Set(reflect.New(rv.Type().Elem()))
				rv = rv.Elem()
			}
			for i, f := range fields {
				if s, ok := in[args[i].Name]; ok {
					rv.FieldByIndex(f).SetString(s)
				}
			}
			return render(ctx, call, v)
		},
		complete: pr.Complete,
	}
	p.promptOrder = append(p.promptOrder, pr.Name)
}

func findArg(args []*capgatev1.PromptArgument, name string) *capgatev1.PromptArgument {
	for _, a := range args {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// promptArgs reads the arguments of a prompt from its Args type: each
// exported string field, named by its json tag.
func promptArgs(t reflect.Type) ([][]int, []*capgatev1.PromptArgument, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("Args must be a struct of string fields, not %s", t)
	}
	var (
		index [][]int
		args  []*capgatev1.PromptArgument
	)
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Type.Kind() != reflect.String {
			return nil, nil, fmt.Errorf("argument %s is a %s: prompt arguments are strings", name, f.Type)
		}
		a := &capgatev1.PromptArgument{
			Name: name, Description: f.Tag.Get("jsonschema"),
			Required: !strings.Contains(","+opts+",", ",omitempty,"), MaxLength: DefaultMaxLength,
		}
		if tag, ok := f.Tag.Lookup(BoundsTag); ok {
			for kv := range strings.SplitSeq(tag, ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
				if k != "maxLength" {
					return nil, nil, fmt.Errorf("argument %s: %s tag takes maxLength only, not %q", name, BoundsTag, k)
				}
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, nil, fmt.Errorf("argument %s: maxLength %q is not a positive number", name, v)
				}
				a.MaxLength = uint32(n)
			}
		}
		if findArg(args, name) != nil {
			return nil, nil, fmt.Errorf("argument %s is declared twice", name)
		}
		index = append(index, f.Index)
		args = append(args, a)
	}
	return index, args, nil
}

// CompleteTemplate sets the function that suggests values for variable of
// the plugin's resource template uriTemplate (as declared, e.g.
// "shop://product/{id}"). Like a prompt's completers it runs for the
// caller the gate admitted to the template, and must suggest only what
// that caller may read.
func (p *Plugin) CompleteTemplate(uriTemplate, variable string, f Completer) {
	if f == nil {
		panic(fmt.Sprintf("sdk.CompleteTemplate %q %q: function is nil", uriTemplate, variable))
	}
	if p.completers == nil {
		p.completers = map[string]map[string]Completer{}
	}
	if p.completers[uriTemplate] == nil {
		p.completers[uriTemplate] = map[string]Completer{}
	}
	p.completers[uriTemplate][variable] = f
}

func (p *Plugin) promptDescs() []*capgatev1.Prompt {
	out := make([]*capgatev1.Prompt, len(p.promptOrder))
	for i, name := range p.promptOrder {
		out[i] = p.prompts[name].desc
	}
	return out
}
