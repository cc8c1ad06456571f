package mcp

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/capgate/capgate/internal/dispatch"
)

// Asking the client mid-call on the wire (2026-07-28): a plugin's requests
// (dispatch.NeedsInput) are an input_required result whose inputRequests
// hold each request under the plugin's key, with the gate's sealed state
// as requestState; the client answers them and sends the tools/call (or
// prompts/get) again with inputResponses and the state echoed (read by
// confirmationOf).

// askingOf hands the gate what a 2026-07-28 prompts/get brings about
// asking its client (takeRound). Prompts have no risk step, so the state
// goes as a round's alone. A non-empty result is the invalid-params
// message to answer instead.
func (c *call) askingOf(ps *params) string {
	var rm requestMeta
	if !parseMeta(ps.meta, &rm) {
		return "invalid params: _meta must be an object"
	}
	return c.takeRound(ps, &rm, false)
}

// takeRound hands the gate what a 2026-07-28 request brings about asking
// its client (confirmationOf): what the client declared in _meta, its
// answers, and the state of the question or round before; with confirm,
// also whether the gate may put its own question to the client's user,
// and the user's answer. A non-empty result is the invalid-params message
// to answer instead.
func (c *call) takeRound(ps *params, rm *requestMeta, confirm bool) string {
	cf, in, msg := confirmationOf(ps, rm)
	if msg != "" {
		return msg
	}
	if !confirm {
		cf = dispatch.Confirmation{State: cf.State}
	}
	if cf.CanAsk || cf.State != "" {
		c.ctx = dispatch.WithConfirmation(c.ctx, cf)
	}
	if len(in.CanAsk) > 0 || len(in.Responses) > 0 || cf.State != "" {
		c.ctx = dispatch.WithInput(c.ctx, in)
	}
	return ""
}

// askForInput answers a call that asks its client as an input_required
// result: a tools/call's or a prompts/get's, the same shape.
func (c *call) askForInput(id []byte, ni *dispatch.NeedsInput, out []byte) (int, []byte) {
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: asked the caller's client for input",
		slog.String("capability", ni.Capability), slog.String("round", ni.ID), slog.Int("requests", len(ni.Requests)),
		slog.String("role", c.p.Role), slog.String("user", c.p.UserID))
	out = appendResultHead(out, id)
	out = append(out, `{"resultType":"input_required","inputRequests":{`...)
	for i, r := range ni.Requests {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, r.Key)
		out = append(out, `:{"method":`...)
		out = appendString(out, r.Method)
		out = append(out, `,"params":`...)
		out = appendRaw(out, r.Params)
		out = append(out, '}')
	}
	out = append(out, `},"requestState":`...)
	out = appendString(out, ni.State)
	out = append(out, c.h.modernTail[len(`,"resultType":"complete"`):]...)
	return http.StatusOK, append(out, "}}"...)
}

// missingCapability answers a call that cannot go on without a client
// capability the client did not declare: at 2026-07-28 the revision's
// error, naming what to declare (HTTP 400, as the revision asks); before,
// a tool error saying the same, as those revisions have no such error.
func (c *call) missingCapability(id []byte, mc *dispatch.MissingCapability, out []byte) (int, []byte) {
	msg := needsClient(mc)
	if !c.ver.modern() {
		if c.couldAsk(mc.Needs) {
			return http.StatusOK, c.errorResult(id, c.doesNotDo(mc), out)
		}
		return http.StatusOK, c.errorResult(id, msg+cannotOffer, out)
	}
	return c.missingCapabilityError(id, mc, msg, out)
}

// cannotOffer ends what a call that needs its client to answer says
// before 2026-07-28.
const cannotOffer = ", which this client cannot offer over this protocol revision"

// needsClient says what a call cannot go on without.
func needsClient(mc *dispatch.MissingCapability) string {
	msg := mc.Capability + " needs the client to support "
	for i, n := range mc.Needs {
		if i > 0 {
			msg += " and "
		}
		msg += n
	}
	return msg
}

// missingCapabilityError is 2026-07-28's -32021 naming what to declare,
// msg saying why.
func (c *call) missingCapabilityError(id []byte, mc *dispatch.MissingCapability, msg string, out []byte) (int, []byte) {
	out = appendErrorHead(out, id, codeMissingCapability, "missing required client capability: "+msg)
	out = append(out, `,"data":{"requiredCapabilities":{`...)
	for i, n := range mc.Needs {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, n)
		out = append(out, ":{}"...)
	}
	return http.StatusBadRequest, append(out, "}}}}"...)
}

// doesNotDo says what a request before 2026-07-28 cannot go on without,
// which its client was asked on the stream, or would have been, and said
// it does not do, and how.
func (c *call) doesNotDo(mc *dispatch.MissingCapability) string {
	msg := needsClient(mc) + ", which this client does not do"
	if len(c.refusals) > 0 {
		msg += " (it answered " + strings.Join(c.refusals, "; ") + ")"
	}
	return msg
}

// couldAsk reports whether a call at a revision before 2026-07-28 could ask
// its client, on its stream, for everything needs names.
func (c *call) couldAsk(needs []string) bool {
	askable := c.askableBefore()
	for _, n := range needs {
		m := dispatch.AskElicit
		switch n {
		case "sampling":
			m = dispatch.AskSample
		case "roots":
			m = dispatch.AskRoots
		}
		if !slices.Contains(askable, m) {
			return false
		}
	}
	return askable != nil
}
