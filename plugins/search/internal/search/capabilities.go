package search

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capgate/capgate/plugins/search/internal/index"
	"github.com/capgate/capgate/sdk"
)

// The bounds the input schemas declare (wire.go), enforced here too for
// callers that reach the plugin without the host's validation: the plugin
// holds on its own.
const (
	// maxQueryLen is the index's own bound (two long sentences fit).
	maxQueryLen = index.MaxQueryLen
	// maxEntityLen fits any dotted entity type name with room to spare:
	// the longest provided today, subscription.plan, has 17 characters.
	maxEntityLen = 128
	// maxIDLen fits record ids of every shape seen (slugs of at most 63
	// characters, UUIDs, composite keys) with room to spare.
	maxIDLen = 256
	// maxLimit is the ceiling of the host's max_results, to which a larger
	// limit is capped anyway.
	maxLimit = 1000
)

// maxCursorLen fits the cursor of the longest entity type and id: the
// base64 of entity + "/" + id, an id's character taking up to 4 bytes.
var maxCursorLen = base64.RawURLEncoding.EncodedLen(maxEntityLen + 1 + utf8.UTFMax*maxIDLen)

// checkLen refuses a value over its declared bound, before it is looked at
// further.
func checkLen(field, v string, max int) error {
	if len(v) <= max { // bytes ≥ characters: count only when it may matter
		return nil
	}
	if n := utf8.RuneCountInString(v); n > max {
		return sdk.InvalidInput("%s is %d characters long; at most %d are accepted", field, n, max)
	}
	return nil
}

// limit turns a requested limit into one between 1 and max: 0 means max,
// more than max is capped to it, less than 0 is refused.
func (s *service) limit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, sdk.InvalidInput("limit must be 1 or more (at most %d), or left out for %d; got %d", s.env.MaxResults, s.env.MaxResults, n)
	case n == 0 || n > s.env.MaxResults:
		return s.env.MaxResults, nil
	}
	return n, nil
}

// checkEntity refuses an entity type the catalogue does not hold.
func checkEntity(cat *catalogue, entity string) error {
	if _, ok := cat.byName[entity]; ok {
		return nil
	}
	known := "none is provided"
	if len(cat.names) > 0 {
		quoted := make([]string, len(cat.names))
		for i, n := range cat.names {
			quoted[i] = strconv.Quote(n)
		}
		known = "the known types are " + strings.Join(quoted, ", ")
	}
	return sdk.InvalidInput("unknown entity type %s: %s", shortQuote(entity), known)
}

// errQueryTimeout is the cause of a search's context when query_timeout
// ran out, told apart from the caller's own cancellation.
var errQueryTimeout = errors.New("query_timeout exceeded")

func (s *service) search(ctx context.Context, in SearchIn) (SearchOut, error) {
	text := strings.TrimSpace(in.Query)
	if text == "" {
		return SearchOut{}, sdk.InvalidInput("query is empty: give the words to search for, e.g. \"meeting room\"")
	}
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return SearchOut{}, err
	}
	limit, err := s.limit(in.Limit)
	if err != nil {
		return SearchOut{}, err
	}
	cat, idx, release, err := s.acquire()
	if err != nil {
		return SearchOut{}, err
	}
	defer release()
	if in.Entity != "" {
		if err := checkEntity(cat, in.Entity); err != nil {
			return SearchOut{}, err
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.queryTimeout, errQueryTimeout)
	defer cancel()
	// The index refuses a query over its limits before any work.
	hits, err := idx.Search(ctx, index.Query{Text: text, Entity: in.Entity, Limit: limit})
	if err != nil {
		return SearchOut{}, s.searchError(ctx, in, err)
	}
	out := SearchOut{Hits: make([]Hit, 0, len(hits))}
	for _, h := range hits {
		out.Hits = append(out.Hits, Hit{Entity: h.Entity, ID: h.ID, Title: h.Title, Snippet: h.Snippet, Score: h.Score})
	}
	return out, nil
}

// searchError is what the agent is told of a failed search: what to change
// when the query was at fault, the index's error otherwise (which quotes
// only the start of the query).
func (s *service) searchError(ctx context.Context, in SearchIn, err error) error {
	var le *index.LimitError
	switch {
	case errors.Is(err, index.ErrEmptyQuery):
		return sdk.InvalidInput("query %s has no words to search for: give words, or a phrase in double quotes", shortQuote(in.Query))
	case errors.As(err, &le) && errors.Is(le, index.ErrQueryTooLong):
		return sdk.InvalidInput("query is %d characters long; at most %d are accepted: keep the words that matter", le.Got, le.Max)
	case errors.As(err, &le):
		return sdk.InvalidInput("query has %d search terms; at most %d are accepted (the words of quoted phrases count, "+
			"stop words such as \"the\" and \"of\" do not): keep the words that matter", le.Got, le.Max)
	case errors.Is(context.Cause(ctx), errQueryTimeout):
		return sdk.InvalidInput("the search took longer than %s and was stopped: narrow the query "+
			"(fewer or more specific words, or an entity filter)", s.queryTimeout)
	}
	return err
}

func (s *service) get(ctx context.Context, in GetIn) (GetOut, error) {
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return GetOut{}, err
	}
	if err := checkLen("id", in.ID, maxIDLen); err != nil {
		return GetOut{}, err
	}
	cat, err := s.catalogue()
	if err != nil {
		return GetOut{}, err
	}
	if in.Entity == "" {
		return GetOut{}, sdk.InvalidInput("entity is empty: give the entity type of the record, e.g. %q", firstOr(cat.names, "booking.resource"))
	}
	if err := checkEntity(cat, in.Entity); err != nil {
		return GetOut{}, err
	}
	if strings.TrimSpace(in.ID) == "" {
		return GetOut{}, sdk.InvalidInput("id is empty: give the record's id, as platform.search or platform.list returned it")
	}
	// The provider's current record, never the index's copy: the index
	// may lag, and holds only the searchable text.
	raw, err := s.env.Record(ctx, in.Entity, in.ID)
	if err != nil {
		if sdk.IsNotFound(err) {
			return GetOut{}, err
		}
		return GetOut{}, fmt.Errorf("get %s %s: %w", in.Entity, shortQuote(in.ID), err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep the provider's numbers exactly as written
	var rec map[string]any
	if err := dec.Decode(&rec); err != nil || rec == nil {
		return GetOut{}, fmt.Errorf("get %s %s: the provider's record is not a JSON object: %v", in.Entity, shortQuote(in.ID), err)
	}
	return GetOut{Entity: in.Entity, ID: in.ID, Record: rec}, nil
}

func (s *service) list(ctx context.Context, in ListIn) (ListOut, error) {
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return ListOut{}, err
	}
	if err := checkLen("cursor", in.Cursor, maxCursorLen); err != nil {
		return ListOut{}, err
	}
	limit, err := s.limit(in.Limit)
	if err != nil {
		return ListOut{}, err
	}
	cat, idx, release, err := s.acquire()
	if err != nil {
		return ListOut{}, err
	}
	defer release()
	if in.Entity != "" {
		if err := checkEntity(cat, in.Entity); err != nil {
			return ListOut{}, err
		}
	}
	var after index.Ref
	if in.Cursor != "" {
		if after, err = decodeCursor(in.Cursor); err != nil {
			return ListOut{}, err
		}
		if in.Entity != "" && after.Entity != in.Entity {
			return ListOut{}, sdk.InvalidInput("cursor %s belongs to a listing of another entity type: pass the same entity as for the page that returned it", shortQuote(in.Cursor))
		}
	}
	items, more, err := idx.List(ctx, in.Entity, after, limit)
	if err != nil {
		return ListOut{}, err
	}
	out := ListOut{Items: make([]Item, len(items))}
	for i, it := range items {
		out.Items[i] = Item{Entity: it.Entity, ID: it.ID, Title: it.Title}
	}
	if more && len(items) > 0 {
		last := items[len(items)-1]
		out.NextCursor = encodeCursor(index.Ref{Entity: last.Entity, ID: last.ID})
	}
	return out, nil
}

// A cursor is the last listed record, entity + "/" + id, base64url-encoded:
// opaque to agents, and a position rather than an offset, so records added
// or removed between pages shift nothing.
func encodeCursor(r index.Ref) string {
	return base64.RawURLEncoding.EncodeToString([]byte(r.Entity + "/" + r.ID))
}

func decodeCursor(c string) (index.Ref, error) {
	bad := sdk.InvalidInput("cursor %s is not one platform.list returned: pass next_cursor unchanged, or leave cursor out for the first page", shortQuote(c))
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !utf8.Valid(b) {
		return index.Ref{}, bad
	}
	entity, id, ok := strings.Cut(string(b), "/")
	if !ok || entity == "" || id == "" {
		return index.Ref{}, bad
	}
	return index.Ref{Entity: entity, ID: id}, nil
}

// shortQuote quotes s for an error message, cut to a readable length.
func shortQuote(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return strconv.Quote(s)
}

func firstOr(names []string, fallback string) string {
	if len(names) > 0 {
		return names[0]
	}
	return fallback
}
