package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
)

// promptsList shows exactly the prompts Dispatcher.VisiblePrompts admits,
// the ones prompts/get would render, in one page.
func (c *call) promptsList(id []byte, ps *params, out []byte) (int, []byte) {
	if out, ok := checkCursor(id, ps, out); !ok {
		return http.StatusOK, out
	}
	out = appendResultHead(out, id)
	out = append(out, `{"prompts":[`...)
	for i, p := range c.h.d.VisiblePrompts(c.p) {
		if i > 0 {
			out = append(out, ',')
		}
		out = c.appendPrompt(out, p)
	}
	out = append(out, ']')
	return http.StatusOK, c.closeResult(out, true)
}

// appendPrompt appends a prompt's definition; titles arrived with
// 2025-06-18.
func (c *call) appendPrompt(out []byte, p *registry.Prompt) []byte {
	out = append(out, `{"name":`...)
	out = appendString(out, p.Name)
	if c.ver.structured() {
		out = appendOptional(out, "title", p.Title)
	}
	out = appendOptional(out, "description", p.Description)
	out = append(out, `,"arguments":[`...)
	for i, a := range p.Arguments {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"name":`...)
		out = appendString(out, a.Name)
		if c.ver.structured() {
			out = appendOptional(out, "title", a.Title)
		}
		out = appendOptional(out, "description", a.Description)
		out = append(out, `,"required":`...)
		out = strconv.AppendBool(out, a.Required)
		out = append(out, '}')
	}
	return append(out, "]}"...)
}

// promptsGet renders a prompt through Dispatcher.GetPrompt. A prompt the
// caller may not get is answered exactly as one that does not exist. A
// prompt may ask its client while it renders, answered as a tools/call
// that asks is: at 2026-07-28 input_required, or -32021 for what the
// client did not declare; before, requests on the request's event stream
// (askOnStream), or -32602 saying what it needs and the client does not
// do.
func (c *call) promptsGet(id []byte, ps *params, out []byte) (int, []byte) {
	name, ok := decodeString(ps.name)
	if !isString(ps.name) || !ok {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: prompts/get needs params.name, the prompt to get")
	}
	var args map[string]string
	if len(ps.arguments) > 0 && string(ps.arguments) != "null" {
		if err := json.Unmarshal(ps.arguments, &args); err != nil {
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: prompts/get arguments must be an object of strings")
		}
	}
	if c.ver.modern() {
		if msg := c.askingOf(ps); msg != "" {
			return http.StatusOK, appendError(out, id, codeInvalidParams, msg)
		}
	}
	askable := c.askableBefore()
	if askable != nil {
		c.ctx = dispatch.WithInput(c.ctx, dispatch.Input{CanAsk: askable})
	}
	res, err := c.h.d.GetPrompt(c.ctx, c.p, name, args)
	if askable != nil {
		err = c.askOnStream(id, askable, err, func() (err error) {
			res, err = c.h.d.GetPrompt(c.ctx, c.p, name, args)
			return err
		})
	}
	if err != nil {
		var (
			ni *dispatch.NeedsInput
			mc *dispatch.MissingCapability
		)
		switch {
		case errors.As(err, &ni):
			return c.askForInput(id, ni, out)
		case errors.As(err, &mc) && c.ver.modern():
			return c.missingCapability(id, mc, out)
		case errors.As(err, &mc) && c.couldAsk(mc.Needs):
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: "+c.doesNotDo(mc))
		case errors.As(err, &mc):
			msg := "invalid params: " + needsClient(mc) + cannotOffer + " (" + c.ver.String() + ")"
			if askable == nil {
				// No relay: only 2026-07-28's rounds can ask.
				msg += "; a prompt asks its client only at " + Version20260728
			}
			return http.StatusOK, appendError(out, id, codeInvalidParams, msg)
		}
		return http.StatusOK, c.promptFailed(id, name, err, out)
	}
	out = appendResultHead(out, id)
	out = append(out, '{')
	if res.Description != "" {
		out = append(out, `"description":`...)
		out = appendString(out, res.Description)
		out = append(out, ',')
	}
	out = append(out, `"messages":[`...)
	for i := range res.Messages {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"role":`...)
		out = appendString(out, res.Messages[i].Role)
		out = append(out, `,"content":`...)
		out = c.appendContent(out, &res.Messages[i].Content)
		out = append(out, '}')
	}
	out = append(out, ']')
	return http.StatusOK, c.closeResult(out, false)
}

// promptFailed maps a failed prompts/get or completion/complete onto the
// wire. Unknown and invisible are one answer; a rate limit is the refusal
// tools/call gives; arguments the caller got wrong (or a record the
// plugin does not find) are invalid params; anything else is an internal
// error whose reference is logged, never its cause.
func (c *call) promptFailed(id []byte, name string, err error, out []byte) []byte {
	var (
		refusal *dispatch.Refusal
		te      *dispatch.ToolError
	)
	switch {
	case errors.Is(err, dispatch.ErrUnknownPrompt):
		return appendError(out, id, codeInvalidParams, "invalid params: unknown prompt "+strconv.Quote(clip(name)))
	case errors.Is(err, dispatch.ErrUnknownResourceTemplate):
		return appendError(out, id, codeInvalidParams, "invalid params: unknown resource template "+strconv.Quote(clip(name)))
	case errors.As(err, &refusal):
		return c.refused(id, refusal, out)
	case errors.As(err, &te) && (te.Code == dispatch.InvalidInput || te.Code == dispatch.NotFound):
		return appendError(out, id, codeInvalidParams, "invalid params: "+te.Message)
	case errors.As(err, &te):
		return appendError(out, id, codeInternalError, te.Message)
	}
	return appendError(out, id, codeInternalError, c.internalFailure(clip(name), err))
}

// clip bounds a name the caller chose before it is quoted back.
func clip(s string) string {
	if len(s) <= registry.MaxPromptNameLength {
		return s
	}
	return strings.ToValidUTF8(s[:registry.MaxPromptNameLength], "") + "…"
}

// completeParams are completion/complete's params.
type completeParams struct {
	Ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	Argument struct {
		Name  *string `json:"name"`
		Value *string `json:"value"`
	}
	Context struct {
		Arguments map[string]string `json:"arguments"`
	}
}

// complete answers completion/complete: a prompt's argument through
// Dispatcher.CompletePrompt, a plugin's resource template variable
// through Dispatcher.CompleteResourceTemplate, and the id of a catalogue
// record template from one page of the List capability, called through the
// gate as the caller, so only ids the caller may list are suggested.
func (c *call) complete(id []byte, ps *params, out []byte) (int, []byte) {
	var cp completeParams
	ok := len(ps.ref) > 0 && json.Unmarshal(ps.ref, &cp.Ref) == nil &&
		len(ps.argument) > 0 && json.Unmarshal(ps.argument, &cp.Argument) == nil &&
		cp.Argument.Name != nil && cp.Argument.Value != nil
	if ok && len(ps.context) > 0 && string(ps.context) != "null" {
		ok = json.Unmarshal(ps.context, &cp.Context) == nil
	}
	if !ok {
		return http.StatusOK, appendError(out, id, codeInvalidParams,
			`invalid params: completion/complete needs ref ({"type":"ref/prompt","name"} or {"type":"ref/resource","uri"}), argument {"name","value"} as strings, and context {"arguments"} of strings when sent`)
	}
	arg, value, given := *cp.Argument.Name, *cp.Argument.Value, cp.Context.Arguments
	var (
		res  dispatch.Completion
		err  error
		name string
	)
	switch cp.Ref.Type {
	case "ref/prompt":
		name = cp.Ref.Name
		res, err = c.h.d.CompletePrompt(c.ctx, c.p, name, arg, value, given)
	case "ref/resource":
		name = cp.Ref.URI
		if entity, ok := c.recordTemplate(name); ok {
			return http.StatusOK, c.completeRecordID(id, name, entity, arg, value, out)
		}
		res, err = c.h.d.CompleteResourceTemplate(c.ctx, c.p, name, arg, value, given)
	default:
		return http.StatusOK, appendError(out, id, codeInvalidParams, `invalid params: ref.type must be "ref/prompt" or "ref/resource"`)
	}
	if err != nil {
		return http.StatusOK, c.promptFailed(id, name, err, out)
	}
	return http.StatusOK, c.appendCompletion(id, res, out)
}

func (c *call) appendCompletion(id []byte, res dispatch.Completion, out []byte) []byte {
	out = appendResultHead(out, id)
	out = append(out, `{"completion":{"values":[`...)
	for i, v := range res.Values {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, v)
	}
	out = append(out, ']')
	if res.Total > 0 {
		out = append(out, `,"total":`...)
		out = strconv.AppendInt(out, int64(res.Total), 10)
	}
	out = append(out, `,"hasMore":`...)
	out = strconv.AppendBool(out, res.HasMore)
	out = append(out, '}')
	return c.closeResult(out, false)
}

// recordTemplate reports whether uri is the template of a catalogue entity
// type this caller is shown (resources/templates/list shows them to whoever
// may call Get), and which type.
func (c *call) recordTemplate(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, recordPrefix)
	if !ok {
		return "", false
	}
	raw, ok := strings.CutSuffix(rest, "/{id}")
	if !ok {
		return "", false
	}
	entity, ok := unescapeSegment(raw)
	g := c.h.records.get
	if !ok || !c.h.records.entities[entity] || g == nil || !c.h.d.Allowed(c.p, &g.Capability) {
		return "", false
	}
	return entity, true
}

// maxCompletionPages bounds the List pages one completion of a record id
// reads: each is a call through the gate, counted by its rate limits.
const maxCompletionPages = 10

// completeRecordID suggests ids of records of entity that start with
// value, from List for that entity, called through the gate as the caller:
// a caller List refuses gets no suggestions, as resources/list shows such
// a caller nothing. List pages in id order, so the pages stop at the first
// id past the prefix, or after maxCompletionPages.
func (c *call) completeRecordID(id []byte, uri, entity, arg, value string, out []byte) []byte {
	if arg != "id" {
		return appendError(out, id, codeInvalidParams, "invalid params: resource template "+strconv.Quote(uri)+" has no variable "+strconv.Quote(clip(arg)))
	}
	l := c.h.records.list
	if l == nil || !c.h.d.Allowed(c.p, &l.Capability) {
		return c.appendCompletion(id, dispatch.Completion{Values: []string{}}, out)
	}
	vals := []string{}
	in := platform.ListIn{Entity: entity}
	more := false
	for range maxCompletionPages {
		res, err := c.invoke(l.Name, encodeArgs(in))
		if err != nil {
			var refusal *dispatch.Refusal
			if errors.As(err, &refusal) {
				return c.refused(id, refusal, out)
			}
			return appendError(out, id, codeInternalError, c.internalFailure(l.Name, err))
		}
		var page platform.ListOut
		if json.Unmarshal(res, &page) != nil {
			return appendError(out, id, codeInternalError, c.internalFailure(l.Name, errors.New("capability "+l.Name+" returned a malformed page")))
		}
		past := false
		for _, it := range page.Items {
			switch {
			case it.Entity != entity:
			case strings.HasPrefix(it.ID, value):
				if len(vals) == dispatch.MaxCompletionValues {
					more, past = true, true
				} else {
					vals = append(vals, it.ID)
				}
			case it.ID > value:
				past = true
			}
			if past {
				break
			}
		}
		more = more || (!past && page.NextCursor != "")
		if past || page.NextCursor == "" {
			break
		}
		in.Cursor = page.NextCursor
	}
	return c.appendCompletion(id, dispatch.Completion{Values: vals, HasMore: more}, out)
}
