package sdktest

import (
	"context"
	"errors"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/sdk"
)

// ErrUnknownPrompt is what getting or completing a prompt returns when no
// plugin provides it or the caller may not see it: the gate does not tell
// the two apart.
var ErrUnknownPrompt = errors.New("unknown prompt")

// PromptMessage is one message of a rendered prompt, flattened for tests:
// Type is "text", "image", "audio", "resource_link" or "resource"; Text is
// a text block's text or an embedded resource's text; Data an image's,
// audio's or embedded blob's bytes; URI a link's or resource's URI.
type PromptMessage struct {
	Role     sdk.Role
	Type     string
	Text     string
	Data     []byte
	MIMEType string
	URI      string
}

// Completion is the suggestions for an argument.
type Completion struct {
	Values  []string
	Total   int
	HasMore bool
}

// GetPrompt renders prompt name for pr with args through the host's gate,
// as prompts/get does. A prompt pr may not get is ErrUnknownPrompt, bad
// arguments an *sdk.Error (CodeInvalidInput). The client can be asked
// nothing, as at a revision that cannot ask: a prompt that must ask
// fails with a *MissingCapabilityError (GetPromptAsking answers it).
func (c *Client) GetPrompt(ctx context.Context, name string, pr sdk.Principal, args map[string]string) ([]PromptMessage, error) {
	gate, err := c.host.gateFor(pr.Role)
	if err != nil {
		return nil, err
	}
	res, err := gate.GetPrompt(ctx, principal(pr), name, args)
	if err != nil {
		return nil, promptError(name, err)
	}
	return promptMessages(res), nil
}

// GetPromptAsking is GetPrompt from a client that can be asked, as
// InvokeAsking is Invoke: each round the prompt asks, a is asked every
// request and the prompt is got again, through the whole gate, with the
// answers and the state sealed the round before. It returns the messages
// and how many rounds it took (1 when nothing was asked).
func (c *Client) GetPromptAsking(ctx context.Context, name string, pr sdk.Principal, args map[string]string, a Asking) ([]PromptMessage, int, error) {
	gate, err := c.host.gateFor(pr.Role)
	if err != nil {
		return nil, 0, err
	}
	var res dispatch.PromptResult
	n, err := a.run(ctx, name, func(ctx context.Context) (err error) {
		res, err = gate.GetPrompt(ctx, principal(pr), name, args)
		return err
	})
	if err != nil {
		return nil, n, promptError(name, err)
	}
	return promptMessages(res), n, nil
}

// promptMessages flattens a rendered prompt for tests.
func promptMessages(res dispatch.PromptResult) []PromptMessage {
	out := make([]PromptMessage, len(res.Messages))
	for i, m := range res.Messages {
		b := m.Content
		pm := PromptMessage{Role: sdk.Role(m.Role), Text: b.Text, Data: b.Data, MIMEType: b.MIMEType}
		switch b.Type {
		case dispatch.ContentText:
			pm.Type = "text"
		case dispatch.ContentImage:
			pm.Type = "image"
		case dispatch.ContentAudio:
			pm.Type = "audio"
		case dispatch.ContentResourceLink:
			pm.Type, pm.URI, pm.MIMEType = "resource_link", b.Link.URI, b.Link.MIMEType
		case dispatch.ContentResource:
			pm.Type, pm.URI, pm.MIMEType, pm.Text, pm.Data = "resource", b.Resource.URI, b.Resource.MIMEType, b.Resource.Text, b.Resource.Blob
		}
		out[i] = pm
	}
	return out
}

// Complete asks for suggestions for argument of prompt name, as
// completion/complete does: partial is what the user typed, context the
// other arguments chosen.
func (c *Client) Complete(ctx context.Context, name, argument, partial string, context map[string]string, pr sdk.Principal) (Completion, error) {
	gate, err := c.host.gateFor(pr.Role)
	if err != nil {
		return Completion{}, err
	}
	res, err := gate.CompletePrompt(ctx, principal(pr), name, argument, partial, context)
	if err != nil {
		return Completion{}, promptError(name, err)
	}
	return Completion{Values: res.Values, Total: res.Total, HasMore: res.HasMore}, nil
}

func principal(pr sdk.Principal) dispatch.Principal {
	return dispatch.Principal{Role: pr.Role, Scope: dispatch.Scope(pr.Scope), UserID: pr.UserID}
}

func promptError(name string, err error) error {
	if errors.Is(err, dispatch.ErrUnknownPrompt) {
		return fmt.Errorf("%q: %w", name, ErrUnknownPrompt)
	}
	return fromGate(name, err)
}

var _ dispatch.PromptProvider = gateProvider{}

// GetPrompt renders an admitted prompt in the plugin, as the host's
// plugin provider does.
func (g gateProvider) GetPrompt(ctx context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	id := g.c.host.beginCall(r.Principal, 0)
	defer g.c.host.endCall(id)
	res, err := pluginwire.GetPrompt(ctx, g.c.rpc, id, r, nil)
	if err != nil && !isGateOutcome(err) {
		return res, fmt.Errorf("plugin %s: prompt %s: %s", g.c.name, r.Prompt, pluginwire.StatusMessage(err))
	}
	return res, err
}

// Complete asks the plugin for suggestions, as the host's plugin provider
// does.
func (g gateProvider) Complete(ctx context.Context, r dispatch.CompleteRequest) (dispatch.Completion, error) {
	id := g.c.host.beginCall(r.Principal, 0)
	defer g.c.host.endCall(id)
	res, err := pluginwire.Complete(ctx, g.c.rpc, id, r, nil)
	if err != nil && !isGateOutcome(err) {
		return res, fmt.Errorf("plugin %s: complete %s: %s", g.c.name, r.Prompt+r.ResourceTemplate, pluginwire.StatusMessage(err))
	}
	return res, err
}
