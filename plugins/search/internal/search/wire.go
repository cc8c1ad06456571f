package search

// The capabilities' inputs and outputs. Their JSON Schemas, inferred by the
// SDK, are what agents see: the jsonschema tags are written for them, and
// the capgate tags bound every input (the host refuses what exceeds them
// before the plugin runs). A tag cannot name a constant, so the bounds are
// spelt out here and TestDeclaredBounds holds them equal to the ones the
// plugin enforces itself (the max… constants in capabilities.go).

// SearchIn is platform.search's input. The query's bound is the index's own
// (index.MaxQueryLen): two long sentences fit.
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
	Entity string         `json:"entity"`
	ID     string         `json:"id"`
	Record map[string]any `json:"record" jsonschema:"the full current record, as its provider shows it"`
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
