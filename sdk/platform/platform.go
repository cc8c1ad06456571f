// Package platform is the contract of the platform.* capabilities, the
// catalogue's search, record and listing capabilities: their names, the Go
// types of their inputs and outputs, and the bounds the input schemas
// declare. It is their one definition. The plugin that provides them
// declares them with these types (sdk.Add infers the schemas agents read
// from them, tags included), and whoever calls them — another plugin
// through sdk.Call.Invoke, the host's MCP adapter serving catalogue
// records as resources — encodes and decodes these types, so no side
// restates another's shapes.
//
// A plugin calls them as its caller, through the host's gate, with Search,
// Get and List:
//
//	res, err := platform.Search(ctx, call, platform.SearchIn{Query: "quiet room"})
//	if sdk.IsRefused(err) { ... } // the caller may not search
//
// The package imports only the standard library, so the SDK, plugins and
// the host can all use it.
package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// The capabilities' names.
const (
	// SearchName is platform.search: SearchIn → SearchOut.
	SearchName = "platform.search"
	// GetName is platform.get: GetIn → GetOut.
	GetName = "platform.get"
	// ListName is platform.list: ListIn → ListOut.
	ListName = "platform.list"
)

// The bounds the input schemas declare. A struct tag cannot name a
// constant, so the capgate tags below spell them out, and this package's
// tests hold the two equal.
const (
	// MaxQueryLen bounds SearchIn.Query, in characters: two long sentences
	// fit.
	MaxQueryLen = 500
	// MaxQueryTerms is the most search terms a query may have after
	// analysis: the words of quoted phrases count, stop words ("the",
	// "of") do not. A query over it is refused, not shortened.
	MaxQueryTerms = 32
	// MaxEntityLen bounds an entity type name, in characters: it fits any
	// dotted name with room to spare.
	MaxEntityLen = 128
	// MaxIDLen bounds a record id, in characters: it fits slugs, UUIDs
	// and composite keys with room to spare.
	MaxIDLen = 256
	// MaxLimit bounds a limit: the ceiling of the host's max_results, to
	// which a larger limit is capped anyway.
	MaxLimit = 1000
	// MaxCursorLen bounds ListIn.Cursor: the unpadded base64url of the
	// longest entity type, "/" and the longest id, a character of an id
	// taking up to 4 bytes.
	MaxCursorLen = ((MaxEntityLen+1+4*MaxIDLen)*8 + 5) / 6
)

// SearchIn is platform.search's input.
type SearchIn struct {
	Query string `json:"query" capgate:"maxLength=500" jsonschema:"the words to look for, e.g. quiet room with projector; typos and a partly typed last word still match; put words in double quotes to match them as a phrase. At most 500 characters and 32 words (stop words such as the, of, with not counted)"`
	// Entity restricts the hits to one entity type.
	Entity string `json:"entity,omitempty" capgate:"maxLength=128" jsonschema:"only hits of this catalogue entity type, e.g. booking.resource; all types when omitted"`
	Limit  int    `json:"limit,omitempty" capgate:"minimum=0,maximum=1000" jsonschema:"at most this many hits; the server's max_results when omitted, and a larger value is capped to max_results (20 unless the operator changed it)"`
}

// Hit is one search result.
type Hit struct {
	Entity  string  `json:"entity" jsonschema:"the catalogue entity type, e.g. booking.resource"`
	ID      string  `json:"id" jsonschema:"the record's id; pass entity and id to platform.get for the full record"`
	Title   string  `json:"title" jsonschema:"the record's name"`
	Snippet string  `json:"snippet" jsonschema:"plain text from the record where the words matched, or the start of its description"`
	Score   float64 `json:"score" jsonschema:"relevance; higher is better, comparable only within one result"`
}

// SearchOut is platform.search's output.
type SearchOut struct {
	Hits []Hit `json:"hits" jsonschema:"the matching records, best first; empty when nothing matched"`
}

// GetIn is platform.get's input.
type GetIn struct {
	Entity string `json:"entity" capgate:"maxLength=128" jsonschema:"the catalogue entity type, as platform.search or platform.list returned it"`
	ID     string `json:"id" capgate:"maxLength=256" jsonschema:"the record's id, as platform.search or platform.list returned it"`
}

// GetOut is platform.get's output.
type GetOut struct {
	Entity string `json:"entity"`
	ID     string `json:"id"`
	Record Record `json:"record" jsonschema:"the full current record, as its provider shows it"`
}

// Record is a catalogue record as its provider shows it: a JSON object.
// It decodes numbers as json.Number, so a record encodes again with its
// numbers exactly as the provider wrote them.
type Record map[string]any

// UnmarshalJSON decodes a JSON object (null leaves r nil), numbers as
// json.Number.
func (r *Record) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*r = m
	return nil
}

// ListIn is platform.list's input.
type ListIn struct {
	Entity string `json:"entity,omitempty" capgate:"maxLength=128" jsonschema:"only records of this catalogue entity type; all types when omitted"`
	Cursor string `json:"cursor,omitempty" capgate:"maxLength=1538" jsonschema:"next_cursor of the previous page, unchanged, to get the next one; the first page when omitted"`
	Limit  int    `json:"limit,omitempty" capgate:"minimum=0,maximum=1000" jsonschema:"at most this many records per page; the server's max_results when omitted, and a larger value is capped to max_results (20 unless the operator changed it)"`
}

// Item is one listed record.
type Item struct {
	Entity string `json:"entity" jsonschema:"the catalogue entity type"`
	ID     string `json:"id" jsonschema:"the record's id; pass entity and id to platform.get for the full record"`
	Title  string `json:"title" jsonschema:"the record's name"`
}

// ListOut is platform.list's output.
type ListOut struct {
	Items      []Item `json:"items" jsonschema:"records ordered by entity type, then id"`
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as cursor to get the next page; absent on the last page"`
}

// Invoker calls a capability as the caller of the call in progress,
// through the host's gate: sdk.Call is one.
type Invoker interface {
	Invoke(ctx context.Context, capability string, args any) (json.RawMessage, error)
}

// Search calls platform.search through c. Its errors are c's, unchanged
// (a refusal, the callee's error, an unknown capability), so the SDK's
// checks (sdk.IsRefused, sdk.IsNotFound, ...) apply to them.
func Search(ctx context.Context, c Invoker, in SearchIn) (SearchOut, error) {
	return invoke[SearchOut](ctx, c, SearchName, in)
}

// Get calls platform.get through c, as Search does platform.search.
func Get(ctx context.Context, c Invoker, in GetIn) (GetOut, error) {
	return invoke[GetOut](ctx, c, GetName, in)
}

// List calls platform.list through c, as Search does platform.search.
func List(ctx context.Context, c Invoker, in ListIn) (ListOut, error) {
	return invoke[ListOut](ctx, c, ListName, in)
}

func invoke[Out any](ctx context.Context, c Invoker, capability string, in any) (Out, error) {
	var out Out
	raw, err := c.Invoke(ctx, capability, in)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("%s: decode result: %w", capability, err)
	}
	return out, nil
}
