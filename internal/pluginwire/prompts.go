package pluginwire

import (
	"context"
	"fmt"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Prompt is a plugin's prompt declaration in the registry's terms; the
// registry judges it (AddPrompt).
func Prompt(p *capgatev1.Prompt, plugin string) registry.Prompt {
	out := registry.Prompt{
		Name: p.GetName(), Title: p.GetTitle(), Description: p.GetDescription(),
		Pack: p.GetPack(), Permission: p.GetPermission(), Plugin: plugin,
	}
	for _, a := range p.GetArguments() {
		out.Arguments = append(out.Arguments, registry.PromptArgument{
			Name: a.GetName(), Title: a.GetTitle(), Description: a.GetDescription(),
			Required: a.GetRequired(), Completes: a.GetCompletes(), MaxLength: int(min(a.GetMaxLength(), 1<<30)),
		})
	}
	return out
}

func principal(p dispatch.Principal) *capgatev1.Principal {
	return &capgatev1.Principal{Role: p.Role, Scope: string(p.Scope), UserId: p.UserID}
}

// GetPrompt asks the plugin behind rpc to render an admitted prompt under
// callID, and translates its answer: the messages, checked as content
// blocks the host can render, a *dispatch.ToolError, or the plugin's
// *dispatch.InputRequired (whether it may ask, and what, is the gate's to
// judge). Any other error is the link's.
func GetPrompt(ctx context.Context, rpc capgatev1.PluginServiceClient, callID string, r dispatch.PromptRequest, traceContext map[string]string) (dispatch.PromptResult, error) {
	req := &capgatev1.GetPromptRequest{
		Principal: principal(r.Principal), Name: r.Prompt, Arguments: r.Args, CallId: callID, TraceContext: traceContext,
	}
	req.RequestState, req.InputResponses = inputContext(r.Input)
	resp, err := rpc.GetPrompt(ctx, req)
	if err != nil {
		return dispatch.PromptResult{}, err
	}
	if e := resp.GetError(); e != nil {
		return dispatch.PromptResult{}, ToolError(e)
	}
	if ir := resp.GetInputRequired(); ir != nil {
		return dispatch.PromptResult{}, InputRequired(ir)
	}
	res := dispatch.PromptResult{Description: resp.GetDescription(), Messages: make([]dispatch.PromptMessage, len(resp.GetMessages()))}
	for i, m := range resp.GetMessages() {
		blocks, _, err := Contents([]*capgatev1.Content{m.GetContent()})
		if err != nil || len(blocks) != 1 {
			return dispatch.PromptResult{}, fmt.Errorf("message %d: %v", i, err)
		}
		res.Messages[i] = dispatch.PromptMessage{Role: m.GetRole(), Content: blocks[0]}
	}
	return res, nil
}

// Complete asks the plugin behind rpc for suggestions for an admitted
// completion under callID.
func Complete(ctx context.Context, rpc capgatev1.PluginServiceClient, callID string, r dispatch.CompleteRequest, traceContext map[string]string) (dispatch.Completion, error) {
	req := &capgatev1.CompleteRequest{
		Principal: principal(r.Principal), Argument: r.Argument, Value: r.Value, Context: r.Context,
		CallId: callID, TraceContext: traceContext,
	}
	if r.Prompt != "" {
		req.Ref = &capgatev1.CompleteRequest_Prompt{Prompt: r.Prompt}
	} else {
		req.Ref = &capgatev1.CompleteRequest_ResourceTemplate{ResourceTemplate: r.ResourceTemplate}
	}
	resp, err := rpc.Complete(ctx, req)
	if err != nil {
		return dispatch.Completion{}, err
	}
	if e := resp.GetError(); e != nil {
		return dispatch.Completion{}, ToolError(e)
	}
	return dispatch.Completion{Values: resp.GetValues(), Total: int(resp.GetTotal()), HasMore: resp.GetHasMore()}, nil
}
