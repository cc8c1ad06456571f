package search

import (
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
	"github.com/capgate/capgate/sdk/platform"
)

// The bounds the input schemas declare (package platform states them),
// enforced here too for callers that reach the plugin without the host's
// validation: the plugin holds on its own.
const (
	// maxQueryLen is the index's own bound; TestDeclaredBounds holds it
	// equal to the declared one.
	maxQueryLen  = index.MaxQueryLen
	maxEntityLen = platform.MaxEntityLen
	maxIDLen     = platform.MaxIDLen
	maxLimit     = platform.MaxLimit
	maxCursorLen = platform.MaxCursorLen
)

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

func (s *service) search(ctx context.Context, _ sdk.Call, in platform.SearchIn) (platform.SearchOut, error) {
	text := strings.TrimSpace(in.Query)
	if text == "" {
		return platform.SearchOut{}, sdk.InvalidInput("query is empty: give the words to search for, e.g. \"meeting room\"")
	}
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return platform.SearchOut{}, err
	}
	limit, err := s.limit(in.Limit)
	if err != nil {
		return platform.SearchOut{}, err
	}
	cat, idx, release, err := s.acquire()
	if err != nil {
		return platform.SearchOut{}, err
	}
	defer release()
	if in.Entity != "" {
		if err := checkEntity(cat, in.Entity); err != nil {
			return platform.SearchOut{}, err
		}
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.queryTimeout, errQueryTimeout)
	defer cancel()
	// The index refuses a query over its limits before any work.
	hits, err := idx.Search(ctx, index.Query{Text: text, Entity: in.Entity, Limit: limit})
	if err != nil {
		return platform.SearchOut{}, s.searchError(ctx, in, err)
	}
	out := platform.SearchOut{Hits: make([]platform.Hit, 0, len(hits))}
	for _, h := range hits {
		out.Hits = append(out.Hits, platform.Hit{Entity: h.Entity, ID: h.ID, Title: h.Title, Snippet: h.Snippet, Score: h.Score})
	}
	return out, nil
}

// searchError is what the agent is told of a failed search: what to change
// when the query was at fault, the index's error otherwise (which quotes
// only the start of the query).
func (s *service) searchError(ctx context.Context, in platform.SearchIn, err error) error {
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

func (s *service) get(ctx context.Context, _ sdk.Call, in platform.GetIn) (platform.GetOut, error) {
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return platform.GetOut{}, err
	}
	if err := checkLen("id", in.ID, maxIDLen); err != nil {
		return platform.GetOut{}, err
	}
	cat, err := s.catalogue()
	if err != nil {
		return platform.GetOut{}, err
	}
	if in.Entity == "" {
		return platform.GetOut{}, sdk.InvalidInput("entity is empty: give the entity type of the record, e.g. %q", firstOr(cat.names, "booking.resource"))
	}
	if err := checkEntity(cat, in.Entity); err != nil {
		return platform.GetOut{}, err
	}
	if strings.TrimSpace(in.ID) == "" {
		return platform.GetOut{}, sdk.InvalidInput("id is empty: give the record's id, as platform.search or platform.list returned it")
	}
	// The provider's current record, never the index's copy: the index
	// may lag, and holds only the searchable text.
	raw, err := s.env.Record(ctx, in.Entity, in.ID)
	if err != nil {
		if sdk.IsNotFound(err) {
			return platform.GetOut{}, err
		}
		return platform.GetOut{}, fmt.Errorf("get %s %s: %w", in.Entity, shortQuote(in.ID), err)
	}
	var rec platform.Record // keeps the provider's numbers exactly as written
	if err := json.Unmarshal(raw, &rec); err != nil || rec == nil {
		return platform.GetOut{}, fmt.Errorf("get %s %s: the provider's record is not a JSON object: %v", in.Entity, shortQuote(in.ID), err)
	}
	return platform.GetOut{Entity: in.Entity, ID: in.ID, Record: rec}, nil
}

func (s *service) list(ctx context.Context, _ sdk.Call, in platform.ListIn) (platform.ListOut, error) {
	if err := checkLen("entity", in.Entity, maxEntityLen); err != nil {
		return platform.ListOut{}, err
	}
	if err := checkLen("cursor", in.Cursor, maxCursorLen); err != nil {
		return platform.ListOut{}, err
	}
	limit, err := s.limit(in.Limit)
	if err != nil {
		return platform.ListOut{}, err
	}
	cat, idx, release, err := s.acquire()
	if err != nil {
		return platform.ListOut{}, err
	}
	defer release()
	if in.Entity != "" {
		if err := checkEntity(cat, in.Entity); err != nil {
			return platform.ListOut{}, err
		}
	}
	var after index.Ref
	if in.Cursor != "" {
		if after, err = decodeCursor(in.Cursor); err != nil {
			return platform.ListOut{}, err
		}
		if in.Entity != "" && after.Entity != in.Entity {
			return platform.ListOut{}, sdk.InvalidInput("cursor %s belongs to a listing of another entity type: pass the same entity as for the page that returned it", shortQuote(in.Cursor))
		}
	}
	items, more, err := idx.List(ctx, in.Entity, after, limit)
	if err != nil {
		return platform.ListOut{}, err
	}
	out := platform.ListOut{Items: make([]platform.Item, len(items))}
	for i, it := range items {
		out.Items[i] = platform.Item{Entity: it.Entity, ID: it.ID, Title: it.Title}
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
