package sdk

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// maxCompletionValues is the most suggestions one answer carries, as MCP
// bounds them.
const maxCompletionValues = 100

// call is the Call a prompt's functions serve: id names it to the host,
// so that Call.Invoke acts as this caller.
func (s *server) call(id string, pr *capgatev1.Principal) Call {
	c := Call{ID: id, Principal: Principal{Role: pr.GetRole(), Scope: Scope(pr.GetScope()), UserID: pr.GetUserId()}}
	if s.host != nil {
		c.host = s.host
	}
	return c
}

// GetPrompt renders a prompt for the caller the host admitted, on
// arguments the host checked against the declaration. Render may ask its
// caller's client (Call.Elicit, Sample, ListRoots), in rounds as a
// tool's handler does: the asks left unanswered are the response's
// input_required.
func (s *server) GetPrompt(ctx context.Context, req *capgatev1.GetPromptRequest) (resp *capgatev1.GetPromptResponse, err error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	pr, ok := s.p.prompts[req.Name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "plugin %s has no prompt %q", s.p.name, req.Name)
	}
	defer s.recoverInto(req.Name, &err)
	call := s.call(req.CallId, req.Principal)
	call.asks = askingFor(req.GetRequestState(), req.GetInputResponses())
	msgs, err := pr.render(ctx, call, req.Arguments)
	if err != nil {
		if ir, aerr := call.asks.inputRequired(err); ir != nil || aerr != nil {
			if aerr != nil {
				return nil, s.internal(req.Name, "", aerr)
			}
			return &capgatev1.GetPromptResponse{InputRequired: ir}, nil
		}
		if te, ok := asWireError(err); ok {
			return &capgatev1.GetPromptResponse{Error: te}, nil
		}
		return nil, s.internal(req.Name, "", err)
	}
	out := make([]*capgatev1.PromptMessage, len(msgs))
	for i, m := range msgs {
		if m.Role != User && m.Role != Assistant {
			return nil, s.internal(req.Name, "", fmt.Errorf("message %d: role %q is neither sdk.User nor sdk.Assistant", i, m.Role))
		}
		blocks, err := wireContents([]Content{m.Content})
		if err != nil {
			return nil, s.internal(req.Name, "", fmt.Errorf("message %d: %w", i, err))
		}
		out[i] = &capgatev1.PromptMessage{Role: string(m.Role), Content: blocks[0]}
	}
	return &capgatev1.GetPromptResponse{Messages: out}, nil
}

// Complete suggests values for an argument of a prompt or a variable of a
// resource template, for the caller the host admitted to it. An argument
// without a completer has no suggestions.
func (s *server) Complete(ctx context.Context, req *capgatev1.CompleteRequest) (resp *capgatev1.CompleteResponse, err error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	var (
		f    Completer
		what string
	)
	switch ref := req.Ref.(type) {
	case *capgatev1.CompleteRequest_Prompt:
		pr, ok := s.p.prompts[ref.Prompt]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "plugin %s has no prompt %q", s.p.name, ref.Prompt)
		}
		f, what = pr.complete[req.Argument], ref.Prompt
	case *capgatev1.CompleteRequest_ResourceTemplate:
		f, what = s.p.completers[ref.ResourceTemplate][req.Argument], ref.ResourceTemplate
	default:
		return nil, status.Error(codes.InvalidArgument, "complete: no prompt or resource template named")
	}
	if f == nil {
		return &capgatev1.CompleteResponse{}, nil
	}
	defer s.recoverInto(what, &err)
	ctxArgs := req.Context
	if ctxArgs == nil {
		ctxArgs = map[string]string{}
	}
	vals, err := f(ctx, s.call(req.CallId, req.Principal), req.Value, ctxArgs)
	if err != nil {
		if te, ok := asWireError(err); ok {
			return &capgatev1.CompleteResponse{Error: te}, nil
		}
		return nil, s.internal(what, "", err)
	}
	resp = &capgatev1.CompleteResponse{Total: uint32(min(len(vals), 1<<31))}
	if len(vals) > maxCompletionValues {
		vals, resp.HasMore = vals[:maxCompletionValues], true
	}
	resp.Values = vals
	return resp, nil
}
