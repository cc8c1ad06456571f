package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/pluginwire"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// RegisterPrompts adds every plugin's prompts to reg, after their
// capabilities (Register): a prompt may not take a capability's name. It
// reports every invalid declaration at once, each naming the plugin and
// the prompt.
func (h *Host) RegisterPrompts(reg *registry.Registry) error {
	var errs []error
	for _, p := range h.plugins {
		errs = append(errs, registerPrompts(reg, p.spec, p.describe))
	}
	return errors.Join(errs...)
}

// RegisterPrompts adds the prompts the plugin described to reg, as
// Host.RegisterPrompts does for a running plugin.
func (c Checked) RegisterPrompts(reg *registry.Registry) error {
	if c.Description == nil {
		return nil
	}
	return registerPrompts(reg, c.Spec, c.Description)
}

func registerPrompts(reg *registry.Registry, s Spec, d *capgatev1.DescribeResponse) error {
	var errs []error
	for _, p := range d.GetPrompts() {
		if err := reg.AddPrompt(pluginwire.Prompt(p, s.Name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: plugin %q declares an invalid prompt: %w", s.where(), s.Name, err))
		}
	}
	return errors.Join(errs...)
}

var _ dispatch.PromptProvider = (*Plugin)(nil)

// GetPrompt renders an admitted prompt in the plugin. While it renders,
// the plugin may call back through the gate as the caller, and may ask
// its caller's client (r.Input): its *dispatch.InputRequired goes back to
// the gate as is.
func (p *Plugin) GetPrompt(ctx context.Context, r dispatch.PromptRequest) (dispatch.PromptResult, error) {
	inst, id, done, err := p.beginSide(ctx, r.Principal, r.Origin, r.CallID)
	if err != nil {
		return dispatch.PromptResult{}, err
	}
	defer done()
	res, err := pluginwire.GetPrompt(ctx, inst.rpc, id, r, nil)
	if err != nil {
		return dispatch.PromptResult{}, p.sideError(ctx, inst, "get prompt", r.Prompt, err)
	}
	return res, nil
}

// Complete asks the plugin for suggestions for an admitted completion.
func (p *Plugin) Complete(ctx context.Context, r dispatch.CompleteRequest) (dispatch.Completion, error) {
	inst, id, done, err := p.beginSide(ctx, r.Principal, r.Origin, r.CallID)
	if err != nil {
		return dispatch.Completion{}, err
	}
	defer done()
	what := r.Prompt
	if what == "" {
		what = r.ResourceTemplate
	}
	res, err := pluginwire.Complete(ctx, inst.rpc, id, r, nil)
	if err != nil {
		return dispatch.Completion{}, p.sideError(ctx, inst, "complete", what, err)
	}
	return res, nil
}

// beginSide takes an in-flight slot for a call that is not a capability
// (a prompt, a completion) and records its caller for the nested calls
// the plugin makes meanwhile; done gives both back.
func (p *Plugin) beginSide(ctx context.Context, pr dispatch.Principal, origin dispatch.Origin, callID string) (*instance, string, func(), error) {
	inst, err := p.acquire()
	if err != nil {
		return nil, "", nil, err
	}
	id := strconv.FormatUint(callSeq.Add(1), 36)
	origin.ParentID = callID
	p.inflight.add(id, inflightCall{principal: pr, depth: nestedDepth(ctx), origin: origin})
	return inst, id, func() {
		p.inflight.remove(id)
		p.active.Add(-1)
	}, nil
}

// sideError is rpcError for a prompt or completion: a tool error is the
// caller's and a request for input the gate's to judge; anything else is
// the link's or the plugin's.
func (p *Plugin) sideError(ctx context.Context, inst *instance, what, name string, err error) error {
	var (
		te *dispatch.ToolError
		ir *dispatch.InputRequired
	)
	if errors.As(err, &te) || errors.As(err, &ir) {
		return err
	}
	return p.rpcError(ctx, inst, what, name, err)
}
