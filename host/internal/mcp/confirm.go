package mcp

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/capgate/capgate/internal/dispatch"
)

// In-band confirmation on the wire (2026-07-28): the gate's question
// (dispatch.NeedsConfirmation) is an input_required result holding one
// form elicitation under confirmInput and the gate's sealed state as
// requestState; the client asks its user, then sends the tools/call again
// with the user's answer in inputResponses and the state echoed. The
// adapter only carries these; the gate decides what they are worth.

// confirmInput is the key of the gate's question in inputRequests, and of
// its answer in inputResponses.
const confirmInput = "capgate_confirm"

// maxRequestStateBytes bounds the requestState a call may carry: the
// longest the gate seals (a round's, with its plugin's state) and a
// margin.
const maxRequestStateBytes = 32 << 10

// confirmationOf reads what a 2026-07-28 tools/call brings about asking
// its client: what the client declared it answers, the state of an
// earlier question or round, the user's answer to the gate's question and
// the other answers, for the plugin. A non-empty msg is the
// invalid-params error to answer instead.
func confirmationOf(ps *params, rm *requestMeta) (cf dispatch.Confirmation, in dispatch.Input, msg string) {
	in.CanAsk = canAsk(rm.capabilities)
	cf.CanAsk = slices.Contains(in.CanAsk, dispatch.AskElicit)
	if ps.requestState != nil {
		s, ok := decodeString(ps.requestState)
		if !ok || !isString(ps.requestState) {
			return cf, in, "invalid params: requestState must be a string"
		}
		if len(s) > maxRequestStateBytes {
			return cf, in, "invalid params: requestState is longer than any this server sends"
		}
		cf.State = s
	}
	if ps.inputResponses == nil || string(ps.inputResponses) == "null" {
		return cf, in, ""
	}
	if ps.inputResponses[0] != '{' {
		return cf, in, "invalid params: inputResponses must be an object"
	}
	answers, own, msg := readAnswers(ps.inputResponses, confirmInput)
	if msg != "" {
		return cf, in, msg
	}
	if own != nil {
		a, ok := elicitAction(own)
		if !ok {
			return cf, in, "invalid params: inputResponses." + confirmInput + " must be an elicitation result with action accept, decline or cancel"
		}
		cf.Answer = a
	}
	if len(answers) > 0 {
		in.Responses = answers
	}
	return cf, in, ""
}

// readAnswers reads inputResponses as every request that brings them
// reads them (a tools/call or prompts/get retry, a tasks/update): at most
// dispatch.MaxInputResponses answers, each under a key this server could
// have asked (any other is skipped unread) and an object. own, when set,
// names a key read apart and unchecked, whose value comes back as ownVal:
// the gate's own question's. A non-empty msg is the invalid-params error.
func readAnswers(raw []byte, own string) (answers map[string]json.RawMessage, ownVal []byte, msg string) {
	it := iterObject(raw, 2)
	var mb member
	answers = map[string]json.RawMessage{}
	n := 0
	for it.next(&mb) {
		if n++; n > dispatch.MaxInputResponses {
			return nil, nil, fmt.Sprintf("invalid params: inputResponses has more than %d answers; this server asks fewer", dispatch.MaxInputResponses)
		}
		if own != "" && mb.is(own) {
			ownVal = mb.val
			continue
		}
		key, ok := decodeString(mb.key)
		if !ok || !dispatch.ValidInputKey(key) {
			continue // no key this server asks under: not ours to read
		}
		if len(mb.val) == 0 || mb.val[0] != '{' {
			return nil, nil, "invalid params: inputResponses." + key + " must be an object, the result of the request asked under that key"
		}
		answers[key] = json.RawMessage(slices.Clone(mb.val))
	}
	if it.bad {
		return nil, nil, "invalid params: inputResponses must be an object"
	}
	return answers, ownVal, ""
}

// canAsk lists what client capabilities declare the client answers: form
// elicitation, sampling and roots.
func canAsk(caps []byte) []string {
	var out []string
	if canElicitForm(caps) {
		out = append(out, dispatch.AskElicit)
	}
	if len(caps) == 0 || caps[0] != '{' {
		return out
	}
	it := iterObject(caps, 3)
	var mb member
	for it.next(&mb) {
		if len(mb.val) == 0 || mb.val[0] != '{' {
			continue
		}
		switch {
		case mb.is("sampling"):
			out = append(out, dispatch.AskSample)
		case mb.is("roots"):
			out = append(out, dispatch.AskRoots)
		}
	}
	if it.bad {
		return nil
	}
	return out
}

// canElicitForm reports whether client capabilities declare form
// elicitation: "elicitation" with a "form" member, or with neither form
// nor url, which means form.
func canElicitForm(caps []byte) bool {
	if len(caps) == 0 || caps[0] != '{' {
		return false
	}
	it := iterObject(caps, 3)
	var mb member
	for it.next(&mb) {
		if !mb.is("elicitation") || len(mb.val) == 0 || mb.val[0] != '{' {
			continue
		}
		form, url := false, false
		inner := iterObject(mb.val, 4)
		var m member
		for inner.next(&m) {
			switch {
			case m.is("form"):
				form = true
			case m.is("url"):
				url = true
			}
		}
		return !inner.bad && (form || !url)
	}
	return false
}

// elicitAction reads the action of an elicitation result.
func elicitAction(v []byte) (dispatch.Answer, bool) {
	if len(v) == 0 || v[0] != '{' {
		return dispatch.NoAnswer, false
	}
	it := iterObject(v, 3)
	var mb member
	answer := dispatch.NoAnswer
	for it.next(&mb) {
		if !mb.is("action") {
			continue
		}
		switch {
		case stringIs(mb.val, "accept"):
			answer = dispatch.Accepted
		case stringIs(mb.val, "decline"), stringIs(mb.val, "cancel"):
			answer = dispatch.Declined
		}
	}
	return answer, !it.bad && answer != dispatch.NoAnswer
}

// askToConfirm answers the gate's question as an input_required result.
func (c *call) askToConfirm(id []byte, nc *dispatch.NeedsConfirmation, out []byte) (int, []byte) {
	c.h.log.LogAttrs(c.ctx, slog.LevelInfo, "mcp: asked the caller's user to confirm",
		slog.String("capability", nc.Capability), slog.String("question", nc.ID), slog.String("role", c.p.Role), slog.String("user", c.p.UserID))
	out = appendResultHead(out, id)
	out = append(out, `{"resultType":"input_required","inputRequests":{"`+confirmInput+`":{"method":"elicitation/create","params":{"mode":"form","message":`...)
	out = appendString(out, nc.Message)
	// No field to fill in: accepting the form is the yes.
	out = append(out, `,"requestedSchema":{"type":"object","properties":{}}}}},"requestState":`...)
	out = appendString(out, nc.State)
	// The rest of every 2026-07-28 result, without its resultType.
	out = append(out, c.h.modernTail[len(`,"resultType":"complete"`):]...)
	return http.StatusOK, append(out, "}}"...)
}
