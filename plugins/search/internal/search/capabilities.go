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

func (s *service) search(ctx context.Context, in SearchIn) (SearchOut, error) {
	text := strings.TrimSpace(in.Query)
	if text == "" {
		return SearchOut{}, sdk.InvalidInput("query is empty: give the words to search for, e.g. \"meeting room\"")
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
	hits, err := idx.Search(ctx, index.Query{Text: text, Entity: in.Entity, Limit: limit})
	if errors.Is(err, index.ErrEmptyQuery) {
		return SearchOut{}, sdk.InvalidInput("query %s has no words to search for: give words, or a phrase in double quotes", shortQuote(in.Query))
	}
	if err != nil {
		return SearchOut{}, err
	}
	out := SearchOut{Hits: make([]Hit, 0, len(hits))}
	for _, h := range hits {
		out.Hits = append(out.Hits, Hit{Entity: h.Entity, ID: h.ID, Title: h.Title, Snippet: h.Snippet, Score: h.Score})
	}
	return out, nil
}

func (s *service) get(ctx context.Context, in GetIn) (GetOut, error) {
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
		return GetOut{}, fmt.Errorf("get %s %q: %w", in.Entity, in.ID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep the provider's numbers exactly as written
	var rec map[string]any
	if err := dec.Decode(&rec); err != nil || rec == nil {
		return GetOut{}, fmt.Errorf("get %s %q: the provider's record is not a JSON object: %v", in.Entity, in.ID, err)
	}
	return GetOut{Entity: in.Entity, ID: in.ID, Record: rec}, nil
}

func (s *service) list(ctx context.Context, in ListIn) (ListOut, error) {
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
