package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/platform"
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
	// Get is the capability that reads one record, on platform.get's
	// contract (sdk/platform: GetIn → GetOut). The host passes
	// platform.GetName.
	Get string
	// List is the capability that lists records, on platform.list's
	// contract (sdk/platform: ListIn → ListOut). The host passes
	// platform.ListName.
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
	n := 0
	for _, t := range c.h.d.VisibleResourceTemplates(c.p) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = c.appendResourceTemplate(out, t)
	}
	if g := c.h.records.get; g != nil && c.h.d.Allowed(c.p, &g.Capability) {
		for _, t := range c.h.records.templates {
			if n > 0 {
				out = append(out, ',')
			}
			n++
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
		if out, ok := checkCursor(id, ps, out); !ok {
			return http.StatusOK, out
		}
		out = append(appendResultHead(out, id), `{"resources":[`...)
		out, _ = c.appendPluginResources(out)
		out = append(out, ']')
		return http.StatusOK, c.closeResult(out, true)
	}
	var in platform.ListIn
	if ps.cursor != nil && string(ps.cursor) != "null" {
		cursor, ok := decodeString(ps.cursor)
		if !ok {
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: cursor must be a string")
		}
		in.Cursor = cursor // "" is the first page, as no cursor is
	}
	res, err := c.invoke(l.Name, encodeArgs(in))
	if err != nil {
		return http.StatusOK, c.listFailed(id, l.Name, err, out)
	}
	var page platform.ListOut
	if json.Unmarshal(res, &page) != nil || !wellFormed(page) {
		return http.StatusOK, appendError(out, id, codeInternalError,
			c.internalFailure(l.Name, errors.New("capability "+l.Name+" returned a malformed page")))
	}
	out = appendResultHead(out, id)
	out = append(out, `{"resources":[`...)
	// The plugins' resources at fixed URIs open the first page; the
	// catalogue's records follow, page by page.
	listed := false
	if in.Cursor == "" {
		out, listed = c.appendPluginResources(out)
	}
	if listed && hasRecordItems(c.h.records.entities, page.Items) {
		out = append(out, ',')
	}
	out = c.appendResources(out, page.Items)
	out = append(out, ']')
	if page.NextCursor != "" {
		out = append(out, `,"nextCursor":`...)
		out = appendString(out, page.NextCursor)
	}
	return http.StatusOK, c.closeResult(out, true)
}

// listFailed answers a failed List call: a refusal (or no List after all)
// is an empty list, the caller's mistake (a bad cursor) invalid params,
// anything else an internal error.
func (c *call) listFailed(id []byte, name string, err error, out []byte) []byte {
	var refusal *dispatch.Refusal
	var toolErr *dispatch.ToolError
	switch {
	case errors.As(err, &refusal), errors.Is(err, dispatch.ErrUnknownCapability):
		// The catalogue is closed to this caller; the plugins' resources
		// it may read are still listed.
		out = append(appendResultHead(out, id), `{"resources":[`...)
		out, _ = c.appendPluginResources(out)
		out = append(out, ']')
		return c.closeResult(out, true)
	case errors.As(err, &toolErr):
		return appendError(out, id, codeInvalidParams, "invalid params: "+toolErr.Message)
	}
	return appendError(out, id, codeInternalError, c.internalFailure(name, err))
}

// wellFormed reports whether page has its items, each naming its entity
// type and id.
func wellFormed(page platform.ListOut) bool {
	if page.Items == nil {
		return false
	}
	for _, it := range page.Items {
		if it.Entity == "" || it.ID == "" {
			return false
		}
	}
	return true
}

// appendResources appends items as resources, comma-separated. Items of an
// entity type not in Records.Entities are left out, as resources/read would
// not find them.
func (c *call) appendResources(out []byte, items []platform.Item) []byte {
	first := true
	for _, it := range items {
		if !c.h.records.entities[it.Entity] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = c.appendResource(out, it)
	}
	return out
}

// appendResource appends one listed record as a resource.
func (c *call) appendResource(out []byte, it platform.Item) []byte {
	out = append(out, `{"uri":"`+recordPrefix...)
	out = appendEscaped(out, it.Entity)
	out = append(out, '/')
	out = appendEscaped(out, it.ID)
	out = append(out, `","name":`...)
	out = appendString(out, it.ID)
	if it.Title != "" {
		// title arrived with 2025-06-18; older clients read it as the
		// description.
		if c.ver.structured() {
			out = append(out, `,"title":`...)
		} else {
			out = append(out, `,"description":`...)
		}
		out = appendString(out, it.Title)
	}
	return append(out, `,"mimeType":"`+recordMimeType+`"}`...)
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
	uri, ok := decodeString(ps.uri)
	if !ok {
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: params.uri is not a valid string")
	}
	entity, rid, ours, msg := parseRecordURI(uri)
	g := c.h.records.get
	switch {
	case g == nil && (ours || msg != ""):
		// Without records, no capgate URI, well-formed or not, is a
		// resource.
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	case msg != "":
		return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: uri "+strconv.Quote(uri)+" "+msg)
	case !ours:
		return c.readPluginResource(id, ps.uri, uri, out)
	}
	if !c.h.records.entities[entity] && c.h.d.Allowed(c.p, &g.Capability) {
		// An entity type not offered is no resource, whatever Get might
		// return for it. Only a caller the gate admits learns that: anyone
		// else gets the gate's refusal below, as tools/call would give, so
		// a refusal never tells which entity types exist.
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	res, err := c.invoke(g.Name, encodeArgs(platform.GetIn{Entity: entity, ID: rid}))
	if err == nil && !c.h.records.entities[entity] {
		// Not reached: the gate refuses whoever Allowed turns away.
		return http.StatusOK, c.resourceNotFound(id, ps.uri, out)
	}
	if err != nil {
		return http.StatusOK, c.readFailed(id, ps.uri, g.Name, err, out)
	}
	record, ok := recordOf(res)
	if !ok {
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

// readFailed answers a failed Get call: a refusal is the very error
// tools/call gives, a missing record (or no Get after all) the revision's
// resource-not-found, another failure the caller can act on invalid
// params, anything else an internal error.
func (c *call) readFailed(id, rawURI []byte, name string, err error, out []byte) []byte {
	var refusal *dispatch.Refusal
	var toolErr *dispatch.ToolError
	switch {
	case errors.As(err, &refusal):
		return c.refused(id, refusal, out)
	case errors.As(err, &toolErr) && toolErr.Code == dispatch.NotFound, errors.Is(err, dispatch.ErrUnknownCapability):
		return c.resourceNotFound(id, rawURI, out)
	case errors.As(err, &toolErr):
		return appendError(out, id, codeInvalidParams, "invalid params: "+toolErr.Message)
	}
	return appendError(out, id, codeInternalError, c.internalFailure(name, err))
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

// recordOf returns the record of Get's output as JSON text, its numbers as
// the provider wrote them; false when the output is not a GetOut holding a
// record object.
func recordOf(res []byte) ([]byte, bool) {
	var got platform.GetOut
	if json.Unmarshal(res, &got) != nil || got.Record == nil {
		return nil, false
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the text is never embedded in HTML
	if enc.Encode(got.Record) != nil {
		return nil, false
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

// encodeArgs encodes the arguments of a call: an input of the platform
// contract, made of strings and numbers, which always encode.
func encodeArgs(v any) []byte {
	b, _ := json.Marshal(v)
	return b
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

// appendPluginResources appends the plugins' resources at fixed URIs that
// the caller may read, comma-separated, and reports whether it appended
// any.
func (c *call) appendPluginResources(out []byte) ([]byte, bool) {
	rs := c.h.d.VisibleResources(c.p)
	for i, r := range rs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"uri":`...)
		out = appendString(out, r.URI)
		out = append(out, `,"name":`...)
		out = appendString(out, r.Name)
		out = c.appendTitle(out, r.Title, r.Description)
		out = appendOptional(out, "mimeType", r.MIMEType)
		if r.HasSize {
			out = append(out, `,"size":`...)
			out = strconv.AppendUint(out, r.Size, 10)
		}
		out = append(out, '}')
	}
	return out, len(rs) > 0
}

// appendResourceTemplate appends a plugin's resource template.
func (c *call) appendResourceTemplate(out []byte, t *registry.ResourceTemplate) []byte {
	out = append(out, `{"uriTemplate":`...)
	out = appendString(out, t.URITemplate)
	out = append(out, `,"name":`...)
	out = appendString(out, t.Name)
	out = c.appendTitle(out, t.Title, t.Description)
	out = appendOptional(out, "mimeType", t.MIMEType)
	return append(out, '}')
}

// appendTitle appends a title and a description: title arrived with
// 2025-06-18, so an older client reads the title as the description when
// there is none.
func (c *call) appendTitle(out []byte, title, description string) []byte {
	if c.ver.structured() {
		out = appendOptional(out, "title", title)
	} else if description == "" {
		description = title
	}
	return appendOptional(out, "description", description)
}

// hasRecordItems reports whether any of items is listed as a resource.
func hasRecordItems(entities map[string]bool, items []platform.Item) bool {
	for _, it := range items {
		if entities[it.Entity] {
			return true
		}
	}
	return false
}

// readPluginResource reads a plugin's resource through the gate: a URI
// the caller may not read, or that names nothing, is the revision's
// resource-not-found error either way; a rate limit is the gate's
// refusal; a failure the caller can act on is invalid params.
func (c *call) readPluginResource(id, rawURI []byte, uri string, out []byte) (int, []byte) {
	contents, err := c.readResource(uri)
	if err != nil {
		var refusal *dispatch.Refusal
		var toolErr *dispatch.ToolError
		switch {
		case errors.Is(err, dispatch.ErrResourceNotFound):
			return http.StatusOK, c.resourceNotFound(id, rawURI, out)
		case errors.As(err, &refusal):
			return http.StatusOK, c.refused(id, refusal, out)
		case errors.As(err, &toolErr):
			return http.StatusOK, appendError(out, id, codeInvalidParams, "invalid params: "+toolErr.Message)
		}
		return http.StatusOK, appendError(out, id, codeInternalError, c.internalFailure(uri, err))
	}
	out = appendResultHead(out, id)
	out = append(out, `{"contents":[`...)
	for i := range contents {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendResourceContents(out, &contents[i])
	}
	out = append(out, ']')
	return http.StatusOK, c.closeResult(out, true)
}

// readResource reads through the gate, turning a provider's panic into a
// failure as invoke does.
func (c *call) readResource(uri string) (res []dispatch.ResourceContents, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return c.h.d.ReadResource(c.ctx, c.p, uri)
}
