package mcp

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Records makes the platform's catalogue records MCP resources: one
// resource template per entity type, resources/list backed by the List
// capability and resources/read by the Get capability, both called through
// the gate exactly as tools/call would call them. The zero value serves
// none.
type Records struct {
	// Entities are the provided catalogue entity types (e.g.
	// "booking.resource"); one resource template each.
	Entities []EntityType
	// Get is the capability that reads one record: input
	// {"entity","id"} → output {"entity","id","record":{...}}. The host
	// passes "platform.get".
	Get string
	// List is the capability that lists records: input {"entity"?,
	// "cursor"?, "limit"?} → output {"items":[{"entity","id","title"}],
	// "next_cursor"?}. The host passes "platform.list".
	List string
}

// EntityType is one kind of catalogue record.
type EntityType struct {
	Name        string
	Description string
}

// RecordScheme is the URI scheme of catalogue records:
// capgate://<entity>/<id>, both parts percent-encoded.
const RecordScheme = "capgate"

const (
	recordPrefix   = RecordScheme + "://"
	recordMimeType = "application/json"
)

// recordSet is Records resolved against the registry at start-up. get and
// list are nil when no plugin provides them (the pack that would is not
// loaded): then nothing is a resource.
type recordSet struct {
	get, list *registry.Entry
	entities  map[string]bool
	// templates holds each entity's ResourceTemplate, rendered once, in
	// name order.
	templates [][]byte
}

func newRecordSet(reg *registry.Registry, r Records) recordSet {
	var s recordSet
	if r.Get != "" {
		s.get, _ = reg.Lookup(r.Get)
	}
	if r.List != "" {
		s.list, _ = reg.Lookup(r.List)
	}
	ents := slices.Clone(r.Entities)
	slices.SortFunc(ents, func(a, b EntityType) int { return strings.Compare(a.Name, b.Name) })
	s.entities = make(map[string]bool, len(ents))
	for _, e := range ents {
		if e.Name == "" || s.entities[e.Name] {
			continue
		}
		s.entities[e.Name] = true
		b := []byte(`{"uriTemplate":`)
		b = appendString(b, recordPrefix+escapeSegment(e.Name)+"/{id}")
		b = append(b, `,"name":`...)
		b = appendString(b, e.Name)
		if e.Description != "" {
			b = append(b, `,"description":`...)
			b = appendString(b, e.Description)
		}
		b = append(b, `,"mimeType":"`+recordMimeType+`"}`...)
		s.templates = append(s.templates, b)
	}
	return s
}

// resourceTemplatesList shows one template per entity type to a principal
// the gate would let call Get, the same rule tools/list applies to that
// capability; everyone else gets an empty list.
func (c *call) resourceTemplatesList(id []byte, ps *params, out []byte) (int, []byte) {
	if out, ok := checkCursor(id, ps, out); !ok {
		return http.StatusOK, out
	}
	out = appendResultHead(out, id)
	out = append(out, `{"resourceTemplates":[`...)
	if g := c.h.records.get; g != nil && c.h.d.Allowed(c.p, &g.Capability) {
		for i, t := range c.h.records.templates {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, t...)
		}
	}
	out = append(out, ']')
	return http.StatusOK, c.closeResult(out, true)
}

// resourcesList is one page of List, called through the gate. A principal
// the gate refuses sees an empty list, as tools/list shows only what may
// be called; a cursor List rejects is invalid params.
func (c *call) resourcesList(id []byte, ps *params, out []byte) (int, []byte) {
	l := c.h.records.list
	if l == nil {
		return c.emptyList(id, ps, `{"resources":[]`, out)
	}
	args := []byte("{}")
	switch {
	case ps.cursor == nil || string(ps.cursor) == "null" || string(ps.cursor) == `""`:
	case !isString(ps.cursor):
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: cursor must be a string")
	default:
		args = appendRaw([]byte(`{"cursor":`), ps.cursor)
		args = append(args, '}')
	}
	res, err := c.invoke(l.Name, args)
	if err != nil {
		var refusal *dispatch.Refusal
		var toolErr *dispatch.ToolError
		switch {
		case errors.As(err, &refusal), errors.Is(err, dispatch.ErrUnknownCapability):
			out = append(appendResultHead(out, id), `{"resources":[]`...)
			return http.StatusOK, c.closeResult(out, true)
		case errors.As(err, &toolErr):
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: "+toolErr.Message)
		}
		return http.StatusOK, appendError(out, id, codeInternalError, c.internalFailure(l.Name, err))
	}
	start := len(out)
	out = appendResultHead(out, id)
	out = append(out, `{"resources":[`...)
	out, ok := c.appendResourcePage(out, res)
	if !ok {
		return http.StatusOK, appendError(out[:start], id, codeInternalError,
			c.internalFailure(l.Name, errors.New("capability "+l.Name+" returned a malformed page")))
	}
	return http.StatusOK, c.closeResult(out, true)
}

// appendResourcePage renders List's output {"items":[...],"next_cursor"?}
// as the resources array (already opened) and nextCursor. Items of an
// entity type not in Records.Entities are left out, as resources/read would
// not find them. It reports false when the output has not that shape.
func (c *call) appendResourcePage(out, res []byte) ([]byte, bool) {
	res = trimJSON(res)
	if res == nil || res[0] != '{' {
		return out, false
	}
	var items, next []byte
	it := iterObject(res, 1)
	var mb member
	for it.next(&mb) {
		switch {
		case mb.is("items"):
			items = mb.val
		case mb.is("next_cursor"):
			next = mb.val
		}
	}
	if it.bad || len(items) == 0 || items[0] != '[' {
		return out, false
	}
	first := true
	for i := skipSpace(items, 1); items[i] != ']'; {
		end := skipValue(items, i, 2)
		var entity, rid, title []byte
		fields := iterObject(items[i:end], 2)
		for fields.next(&mb) {
			switch {
			case mb.is("entity"):
				entity = mb.val
			case mb.is("id"):
				rid = mb.val
			case mb.is("title"):
				title = mb.val
			}
		}
		ent, ok1 := decodeString(entity)
		idText, ok2 := decodeString(rid)
		if fields.bad || !ok1 || !ok2 || idText == "" || (title != nil && !isString(title)) {
			return out, false
		}
		if c.h.records.entities[ent] {
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, `{"uri":"`+recordPrefix...)
			out = appendEscaped(out, ent)
			out = append(out, '/')
			out = appendEscaped(out, idText)
			out = append(out, `","name":`...)
			out = appendRaw(out, rid)
			if len(title) > 2 {
				// title arrived with 2025-06-18; older clients read it
				// as the description.
				if c.ver.structured() {
					out = append(out, `,"title":`...)
				} else {
					out = append(out, `,"description":`...)
				}
				out = appendRaw(out, title)
			}
			out = append(out, `,"mimeType":"`+recordMimeType+`"}`...)
		}
		i = skipSpace(items, end)
		if items[i] == ',' {
			i = skipSpace(items, i+1)
		}
	}
	out = append(out, ']')
	switch {
	case next == nil || string(next) == "null" || string(next) == `""`:
	case isString(next):
		out = append(out, `,"nextCursor":`...)
		out = appendRaw(out, next)
	default:
		return out, false
	}
	return out, true
}

// resourcesRead reads capgate://<entity>/<id> by calling Get through the
// gate with {"entity","id"}, the arguments a tools/call of Get would carry:
// a refusal is the very error tools/call gives, a missing record is the
// revision's resource-not-found error, and the record is returned as JSON
// text.
func (c *call) resourcesRead(id []byte, ps *params, out []byte) (int, []byte) {
	if !isString(ps.uri) {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: resources/read needs params.uri")
	}
	g := c.h.records.get
	if g == nil {
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	uri, ok := decodeString(ps.uri)
	if !ok {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: params.uri is not a valid string")
	}
	entity, rid, ours, msg := parseRecordURI(uri)
	switch {
	case msg != "":
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: uri "+strconv.Quote(uri)+" "+msg)
	case !ours:
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	args := appendString([]byte(`{"entity":`), entity)
	args = append(args, `,"id":`...)
	args = appendString(args, rid)
	args = append(args, '}')
	if !c.h.records.entities[entity] && c.h.d.Allowed(c.p, &g.Capability) {
		// An entity type not offered is no resource, whatever Get might
		// return for it. Only a caller the gate admits learns that: anyone
		// else gets the gate's refusal below, as tools/call would give, so
		// a refusal never tells which entity types exist.
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	res, err := c.invoke(g.Name, args)
	if err == nil && !c.h.records.entities[entity] {
		// Not reached: the gate refuses whoever Allowed turns away.
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	if err != nil {
		var refusal *dispatch.Refusal
		var toolErr *dispatch.ToolError
		switch {
		case errors.As(err, &refusal):
			return http.StatusOK, c.refused(id, refusal, out)
		case errors.As(err, &toolErr) && toolErr.Code == dispatch.NotFound, errors.Is(err, dispatch.ErrUnknownCapability):
			return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
		case errors.As(err, &toolErr):
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: "+toolErr.Message)
		}
		return http.StatusOK, appendError(out, id, codeInternalError, c.internalFailure(g.Name, err))
	}
	record := recordOf(res)
	if record == nil {
		return http.StatusOK, appendError(out, id, codeInternalError,
			c.internalFailure(g.Name, errors.New("capability "+g.Name+" returned no record object")))
	}
	out = appendResultHead(out, id)
	out = append(out, `{"contents":[{"uri":`...)
	out = appendRaw(out, ps.uri)
	out = append(out, `,"mimeType":"`+recordMimeType+`","text":`...)
	out = appendString(out, record)
	out = append(out, "}]"...)
	// 2026-07-28 makes a read result cacheable like a list: ttlMs and
	// cacheScope are required.
	return http.StatusOK, c.closeResult(out, true)
}

// resourceNotFound is the error each revision prescribes for a URI the
// server has no resource at: -32002 up to 2025-11-25, -32602 in 2026-07-28.
func (c *call) resourceNotFound(id, rawURI, out []byte) []byte {
	code := codeResourceNotFound
	if c.ver.modern() {
		code = codeInvalidParams
	}
	out = appendErrorHead(out, id, code, "Resource not found")
	out = append(out, `,"data":{"uri":`...)
	out = appendRaw(out, rawURI)
	return append(out, "}}}"...)
}

// recordOf returns the "record" object of Get's output, or nil when the
// output is not an object holding one.
func recordOf(res []byte) []byte {
	res = trimJSON(res)
	if res == nil || res[0] != '{' {
		return nil
	}
	it := iterObject(res, 1)
	var mb member
	var record []byte
	for it.next(&mb) {
		if mb.is("record") {
			record = mb.val
		}
	}
	if it.bad || len(record) == 0 || record[0] != '{' {
		return nil
	}
	return record
}

// trimJSON returns the one JSON value res holds without surrounding
// space, or nil when res is not exactly one valid value.
func trimJSON(res []byte) []byte {
	start := skipSpace(res, 0)
	end := skipValue(res, start, 0)
	if end < 0 || skipSpace(res, end) != len(res) {
		return nil
	}
	return res[start:end]
}

// parseRecordURI splits capgate://<entity>/<id> into its percent-decoded
// parts. ours is false for an absolute URI of another scheme, which is no
// resource of this server's; msg explains why uri is malformed (not an
// absolute URI, or a capgate URI not of the record shape).
func parseRecordURI(uri string) (entity, id string, ours bool, msg string) {
	colon := strings.IndexByte(uri, ':')
	if colon <= 0 || !validScheme(uri[:colon]) {
		return "", "", false, "is not an absolute URI; records are " + recordPrefix + "<entity>/<id>"
	}
	if !strings.EqualFold(uri[:colon], RecordScheme) {
		return "", "", false, ""
	}
	rest, ok := strings.CutPrefix(uri[colon+1:], "//")
	if !ok {
		return "", "", true, "is not of the form " + recordPrefix + "<entity>/<id>"
	}
	if strings.ContainsAny(rest, "?#") {
		return "", "", true, "has a query or fragment; records are " + recordPrefix + "<entity>/<id> (percent-encode '?' and '#' in the id)"
	}
	rawEntity, rawID, ok := strings.Cut(rest, "/")
	if !ok || rawEntity == "" || rawID == "" {
		return "", "", true, "names no record; records are " + recordPrefix + "<entity>/<id>"
	}
	if strings.IndexByte(rawID, '/') >= 0 {
		return "", "", true, "has more than one path segment after the entity; percent-encode '/' in the id as %2F"
	}
	if entity, ok = unescapeSegment(rawEntity); !ok {
		return "", "", true, "has a malformed percent-encoding in its entity"
	}
	if id, ok = unescapeSegment(rawID); !ok {
		return "", "", true, "has a malformed percent-encoding in its id"
	}
	return entity, id, true, ""
}

// validScheme reports RFC 3986's scheme = ALPHA *( ALPHA / DIGIT / "+" /
// "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := (c|0x20) >= 'a' && (c|0x20) <= 'z'
		if !alpha && (i == 0 || !(isDigit(c) || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// unreserved reports RFC 3986's unreserved characters, the only ones a
// record URI carries unencoded (as RFC 6570 expands {id}).
func unreserved(c byte) bool {
	return (c|0x20) >= 'a' && (c|0x20) <= 'z' || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~'
}

// appendEscaped appends s percent-encoded for one URI path segment.
func appendEscaped(b []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		if c := s[i]; unreserved(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', upperHex[c>>4], upperHex[c&0xf])
		}
	}
	return b
}

func escapeSegment(s string) string { return string(appendEscaped(nil, s)) }

// unescapeSegment percent-decodes one path segment; false on a '%' not
// followed by two hex digits or on a result that is not UTF-8.
func unescapeSegment(s string) (string, bool) {
	if strings.IndexByte(s, '%') < 0 {
		return s, utf8.ValidString(s)
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
		i += 2
	}
	return string(b), utf8.Valid(b)
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
