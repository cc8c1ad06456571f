package search

// The capabilities' inputs and outputs. Their JSON Schemas, inferred by the
// SDK, are what agents see: the jsonschema tags are written for them.

// SearchIn is platform.search's input.
type SearchIn struct {
	Query string `json:"query" jsonschema:"the words to look for, e.g. quiet room with projector; typos and a partly typed last word still match; put words in double quotes to match them as a phrase"`
	// Entity restricts the hits to one entity type.
	Entity string `json:"entity,omitempty" jsonschema:"only hits of this catalogue entity type, e.g. booking.resource; all types when omitted"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many hits; the server's max_results when omitted, and a larger value is capped to max_results (20 unless the operator changed it)"`
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
	Entity string `json:"entity" jsonschema:"the catalogue entity type, as platform.search or platform.list returned it"`
	ID     string `json:"id" jsonschema:"the record's id, as platform.search or platform.list returned it"`
}

// GetOut is platform.get's output.
type GetOut struct {
	Entity string         `json:"entity"`
	ID     string         `json:"id"`
	Record map[string]any `json:"record" jsonschema:"the full current record, as its provider shows it"`
}

// ListIn is platform.list's input.
type ListIn struct {
	Entity string `json:"entity,omitempty" jsonschema:"only records of this catalogue entity type; all types when omitted"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page, to get the next one; the first page when omitted"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many records per page; the server's max_results when omitted, and a larger value is capped to max_results (20 unless the operator changed it)"`
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
