package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Ref names one document: its entity type and id.
type Ref struct {
	Entity, ID string
}

// Change is a set of writes applied together by [Index.Apply]: either all
// of them are visible, and survive a crash, or none is.
type Change struct {
	// Upsert adds or replaces documents.
	Upsert []Document
	// Delete removes documents; absent ones are ignored.
	Delete []Ref
	// Meta sets metadata values (see [Index.Meta]); an empty value deletes
	// the key.
	Meta map[string]string
}

const metaKeyPrefix = "capgate/meta/"

// Apply writes c in one bleve batch, so a document change and the metadata
// that records it (a subscriber's cursor) commit atomically. Keep it small:
// it is one batch whatever its size.
func (x *Index) Apply(ctx context.Context, c Change) error {
	for i, d := range c.Upsert {
		if err := d.validate(); err != nil {
			return fmt.Errorf("apply: upsert document %d: %w", i, err)
		}
	}
	for i, r := range c.Delete {
		if err := (Document{Entity: r.Entity, ID: r.ID}).validate(); err != nil {
			return fmt.Errorf("apply: delete %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	b := x.bi.NewBatch()
	for _, d := range c.Upsert {
		if err := b.Index(d.DocID(), d.stored()); err != nil {
			return fmt.Errorf("apply: upsert %s: %w", d.DocID(), err)
		}
	}
	for _, r := range c.Delete {
		b.Delete(docID(r.Entity, r.ID))
	}
	keys := make([]string, 0, len(c.Meta))
	for k := range c.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := c.Meta[k]; v == "" {
			b.DeleteInternal([]byte(metaKeyPrefix + k))
		} else {
			b.SetInternal([]byte(metaKeyPrefix+k), []byte(v))
		}
	}
	if err := x.bi.Batch(b); err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	return nil
}

// Meta returns the metadata value stored under key, or "" when none is.
// Metadata lives in the index itself, so it is as durable as the documents
// and is discarded with them.
func (x *Index) Meta(key string) (string, error) {
	v, err := x.bi.GetInternal([]byte(metaKeyPrefix + key))
	if err != nil {
		return "", fmt.Errorf("get %s: %w", key, err)
	}
	return string(v), nil
}

// SetMeta stores value under key; an empty value deletes it.
func (x *Index) SetMeta(key, value string) error {
	return x.Apply(context.Background(), Change{Meta: map[string]string{key: value}})
}

// maxEntities bounds how many entity types [Index.Entities] reports.
const maxEntities = 10000

// Entities lists the entity types that have at least one document, sorted.
func (x *Index) Entities(ctx context.Context) ([]string, error) {
	req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), 0, 0, false)
	req.AddFacet(fieldEntity, bleve.NewFacetRequest(fieldEntity, maxEntities))
	res, err := x.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("list entity types: %w", err)
	}
	var out []string
	if f := res.Facets[fieldEntity]; f != nil && f.Terms != nil {
		for _, t := range f.Terms.Terms() {
			if t.Count > 0 {
				out = append(out, t.Term)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// Item is one listed document.
type Item struct {
	Entity, ID, Title string
}

// List returns up to limit documents (of entity only, when not empty) in
// (entity, id) order, starting after the document after (the zero Ref
// starts at the first), and whether more follow. Paging with the last
// item of each page as the next after visits every document once, also
// while documents are added or removed elsewhere in the order.
func (x *Index) List(ctx context.Context, entity string, after Ref, limit int) ([]Item, bool, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	var q query.Query = bleve.NewMatchAllQuery()
	if entity != "" {
		tq := bleve.NewTermQuery(entity)
		tq.SetField(fieldEntity)
		q = tq
	}
	// One more than asked tells whether a next page exists.
	req := bleve.NewSearchRequestOptions(q, limit+1, 0, false)
	// Within one entity the doc ids share the "entity/" prefix, so ordering
	// by entity and then doc id is ordering by (entity, id), whatever
	// characters the entity names hold.
	req.SortBy([]string{fieldEntity, "_id"})
	if after != (Ref{}) {
		req.SetSearchAfter([]string{after.Entity, docID(after.Entity, after.ID)})
	}
	req.Fields = []string{fieldEntity, fieldID, fieldTitle}
	res, err := x.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, false, fmt.Errorf("list documents: %w", err)
	}
	hits := res.Hits
	more := len(hits) > limit
	if more {
		hits = hits[:limit]
	}
	items := make([]Item, len(hits))
	for i, h := range hits {
		ent, id, _ := strings.Cut(h.ID, "/")
		items[i] = Item{
			Entity: stringField(h.Fields, fieldEntity, ent),
			ID:     stringField(h.Fields, fieldID, id),
			Title:  stringField(h.Fields, fieldTitle, ""),
		}
	}
	return items, more, nil
}

// Remove deletes the index stored in dir, so that [Open] creates an empty
// one there. A dir that does not exist is fine; one that holds something
// other than an index is left alone and is an error.
func Remove(dir string) error {
	if dir == "" {
		return errors.New("remove search index: empty directory path")
	}
	if _, err := holdsIndex(dir); err != nil {
		return fmt.Errorf("remove search index %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove search index %s: %w", dir, err)
	}
	return nil
}
