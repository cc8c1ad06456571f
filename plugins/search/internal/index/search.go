package index

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/format/plain"
	simplefrag "github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// DefaultLimit is the number of hits returned when [Query.Limit] is zero or
// negative.
const DefaultLimit = 20

// MinFuzzyLen is the shortest word, in letters, that is also matched with
// one typo. Shorter words match only exactly (and, when last, as a prefix):
// one edit away from a three-letter word is too many unrelated words.
const MinFuzzyLen = 4

// minPrefixLen is the shortest last word that is also matched as a prefix.
const minPrefixLen = 2

// snippetLen is the length, in runes, of a snippet taken from the start of
// the body when nothing in it was highlighted.
const snippetLen = 160

// Boosts: a title match outweighs an extra-field match, which outweighs a
// body match; an exact word outweighs a prefix, which outweighs a typo.
const (
	boostTitle  = 3.0
	boostExtra  = 1.5
	boostBody   = 1.0
	boostExact  = 1.0
	boostPrefix = 0.6
	boostFuzzy  = 0.4
)

// ErrEmptyQuery is returned by [Index.Search] for a query with no text.
var ErrEmptyQuery = errors.New("empty search query")

// Query is one search.
type Query struct {
	// Text is the user's words. Text in double quotes is a phrase.
	Text string
	// Entity, when set, restricts hits to that entity type.
	Entity string
	// Limit is the maximum number of hits; ≤ 0 means DefaultLimit. It is not
	// capped here: the caller enforces its own maximum.
	Limit int
}

// Hit is one search result.
type Hit struct {
	Entity  string
	ID      string
	Title   string
	Snippet string // plain text, no markup
	Score   float64
}

// plainHighlighter is a bleve highlighter whose fragments carry no markup.
const plainHighlighter = "capgate-plain"

func init() {
	err := registry.RegisterHighlighter(plainHighlighter,
		func(_ map[string]interface{}, cache *registry.Cache) (highlight.Highlighter, error) {
			frag, err := cache.FragmenterNamed(simplefrag.Name)
			if err != nil {
				return nil, fmt.Errorf("build fragmenter: %w", err)
			}
			return simplehl.NewHighlighter(frag, plain.NewFragmentFormatter("", ""), simplehl.DefaultSeparator), nil
		})
	if err != nil {
		panic(fmt.Sprintf("register highlighter %s: %v", plainHighlighter, err))
	}
}

var phraseRE = regexp.MustCompile(`"([^"]*)"`)

// Search runs q and returns hits ranked by score, best first (ties among the
// returned hits by entity, then id). A query whose words are all stop words finds nothing.
func (x *Index) Search(ctx context.Context, q Query) ([]Hit, error) {
	bq, err := x.buildQuery(q)
	if err != nil {
		return nil, err
	}
	if bq == nil {
		return []Hit{}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	req := bleve.NewSearchRequestOptions(bq, limit, 0, false)
	req.Fields = []string{fieldEntity, fieldID, fieldTitle, fieldBody}
	res, err := x.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q.Text, err)
	}
	hits := make([]Hit, 0, len(res.Hits))
	docIDs := make([]string, 0, len(res.Hits))
	bodies := make(map[string]string, len(res.Hits))
	for _, h := range res.Hits {
		entity, id, _ := strings.Cut(h.ID, "/")
		hits = append(hits, Hit{
			Entity: stringField(h.Fields, fieldEntity, entity),
			ID:     stringField(h.Fields, fieldID, id),
			Title:  stringField(h.Fields, fieldTitle, ""),
			Score:  h.Score,
		})
		docIDs = append(docIDs, h.ID)
		bodies[h.ID] = stringField(h.Fields, fieldBody, "")
	}
	snippets, err := x.snippets(ctx, bq, docIDs)
	if err != nil {
		return nil, fmt.Errorf("search %q: %w", q.Text, err)
	}
	for i := range hits {
		id := docIDs[i]
		if s, ok := snippets[id]; ok {
			hits[i].Snippet = s
		} else {
			hits[i].Snippet = leading(bodies[id], snippetLen)
		}
	}
	// Equal scores come back in index order; order them by id so that the
	// result does not depend on segment layout.
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		if hits[i].Entity != hits[j].Entity {
			return hits[i].Entity < hits[j].Entity
		}
		return hits[i].ID < hits[j].ID
	})
	return hits, nil
}

// snippets highlights the documents docIDs for bq and returns, per document
// id, the best fragment of the body or else of the extra fields, where the
// query matched. Highlighting needs term locations, which are costly to
// gather for every match of a broad query, so it runs as a second search
// restricted to the hits already chosen.
func (x *Index) snippets(ctx context.Context, bq query.Query, docIDs []string) (map[string]string, error) {
	out := make(map[string]string, len(docIDs))
	if len(docIDs) == 0 {
		return out, nil
	}
	hq := bleve.NewConjunctionQuery(bleve.NewDocIDQuery(docIDs), bq)
	req := bleve.NewSearchRequestOptions(hq, len(docIDs), 0, false)
	req.Highlight = bleve.NewHighlightWithStyle(plainHighlighter)
	req.Highlight.AddField(fieldBody)
	req.Highlight.AddField(fieldExtra)
	res, err := x.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("highlight: %w", err)
	}
	for _, h := range res.Hits {
		// The highlighter returns a fragment even for a field without a
		// match; only a field with match locations gives a real snippet.
		for _, f := range []string{fieldBody, fieldExtra} {
			if len(h.Locations[f]) > 0 && len(h.Fragments[f]) > 0 {
				out[h.ID] = h.Fragments[f][0]
				break
			}
		}
	}
	return out, nil
}

func stringField(fields map[string]interface{}, name, fallback string) string {
	if s, ok := fields[name].(string); ok {
		return s
	}
	return fallback
}

// leading is the start of s, at most n runes, cut at a word boundary with an
// ellipsis when shortened.
func leading(s string, n int) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n]
	cut := string(r)
	if i := strings.LastIndexAny(cut, " \t\n"); i > n/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}

// buildQuery turns q into a bleve query, or nil when its words are all stop
// words.
func (x *Index) buildQuery(q Query) (query.Query, error) {
	text := strings.TrimSpace(q.Text)
	var phrases []string
	for _, m := range phraseRE.FindAllStringSubmatch(text, -1) {
		if p := strings.TrimSpace(m[1]); p != "" {
			phrases = append(phrases, p)
		}
	}
	rest := strings.ReplaceAll(phraseRE.ReplaceAllString(text, " "), `"`, " ")
	if len(phrases) == 0 && strings.TrimSpace(rest) == "" {
		return nil, ErrEmptyQuery
	}
	an := x.bi.Mapping().AnalyzerNamed(standard.Name)
	if an == nil {
		return nil, fmt.Errorf("search: analyzer %q missing", standard.Name)
	}

	var must []query.Query
	for _, p := range phrases {
		if len(terms(an, p)) == 0 {
			continue // only stop words: matches nothing, constrains nothing
		}
		must = append(must, phraseQuery(p))
	}
	words := terms(an, rest)
	if len(words) > 0 {
		wq, err := x.wordsQuery(words)
		if err != nil {
			return nil, err
		}
		must = append(must, wq)
	}
	if len(must) == 0 {
		return nil, nil
	}
	bq := bleve.NewBooleanQuery()
	bq.AddMust(must...)
	if q.Entity != "" {
		f := bleve.NewTermQuery(q.Entity)
		f.SetField(fieldEntity)
		bq.AddFilter(f)
	}
	return bq, nil
}

// wordsQuery matches any of the analyzed words, the last also as a prefix.
func (x *Index) wordsQuery(words []string) (_ query.Query, err error) {
	adv, err := x.bi.Advanced()
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, fmt.Errorf("search: open reader: %w", err)
	}
	defer func() {
		if cerr := r.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("search: close reader: %w", cerr)
		}
	}()
	should := make([]query.Query, 0, len(words))
	for i, w := range words {
		wq, err := wordQuery(r, w, i == len(words)-1)
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		should = append(should, wq)
	}
	return bleve.NewDisjunctionQuery(should...), nil
}

// terms analyzes s as the index does: lower-cased words, stop words removed.
func terms(an analysis.Analyzer, s string) []string {
	var out []string
	for _, tok := range an.Analyze([]byte(s)) {
		out = append(out, string(tok.Term))
	}
	return out
}

var fieldBoosts = []struct {
	field string
	boost float64
}{
	{fieldTitle, boostTitle},
	{fieldExtra, boostExtra},
	{fieldBody, boostBody},
}

func phraseQuery(p string) query.Query {
	var qs []query.Query
	for _, f := range fieldBoosts {
		pq := bleve.NewMatchPhraseQuery(p)
		pq.SetField(f.field)
		pq.Analyzer = standard.Name
		pq.SetBoost(f.boost)
		qs = append(qs, pq)
	}
	return bleve.NewDisjunctionQuery(qs...)
}

// maxExpansions bounds how many indexed terms one fuzzy or prefix word
// expands to per field (the most frequent are kept), and maxScan how many
// dictionary entries are read to find them.
const (
	maxExpansions = 32
	maxScan       = 4096
)

// wordQuery matches one analyzed word in every text field: exactly, with one
// typo when long enough, and as a prefix when it is the last word. Fuzzy and
// prefix words are expanded against the term dictionary here rather than by
// bleve's fuzzy and prefix queries, so that the exact word (which both would
// include, and which for a common word has the longest postings list) is
// scanned once, not three times.
func wordQuery(r bindex.IndexReader, w string, last bool) (query.Query, error) {
	n := utf8.RuneCountInString(w)
	var qs []query.Query
	add := func(field, term string, boost float64) {
		tq := bleve.NewTermQuery(term)
		tq.SetField(field)
		tq.SetBoost(boost)
		qs = append(qs, tq)
	}
	for _, f := range fieldBoosts {
		add(f.field, w, f.boost*boostExact)
		seen := map[string]bool{w: true}
		if n >= MinFuzzyLen {
			fr, ok := r.(bindex.IndexReaderFuzzy)
			if !ok {
				return nil, errors.New("index reader cannot expand fuzzy terms")
			}
			d, err := fr.FieldDictFuzzy(f.field, w, 1, "")
			if err != nil {
				return nil, fmt.Errorf("expand %q with one typo in %s: %w", w, f.field, err)
			}
			terms, err := topTerms(d, seen)
			if err != nil {
				return nil, fmt.Errorf("expand %q with one typo in %s: %w", w, f.field, err)
			}
			for _, t := range terms {
				add(f.field, t, f.boost*boostFuzzy)
			}
		}
		if last && n >= minPrefixLen {
			d, err := r.FieldDictPrefix(f.field, []byte(w))
			if err != nil {
				return nil, fmt.Errorf("expand prefix %q in %s: %w", w, f.field, err)
			}
			terms, err := topTerms(d, seen)
			if err != nil {
				return nil, fmt.Errorf("expand prefix %q in %s: %w", w, f.field, err)
			}
			for _, t := range terms {
				add(f.field, t, f.boost*boostPrefix)
			}
		}
	}
	return bleve.NewDisjunctionQuery(qs...), nil
}

// topTerms reads up to maxScan entries of d, closes it, and returns the
// maxExpansions most frequent terms not in seen, marking them seen.
func topTerms(d bindex.FieldDict, seen map[string]bool) ([]string, error) {
	var entries []bindex.DictEntry
	var err error
	for i := 0; i < maxScan; i++ {
		var e *bindex.DictEntry
		e, err = d.Next()
		if err != nil || e == nil {
			break
		}
		if !seen[e.Term] {
			entries = append(entries, *e)
		}
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Count > entries[j].Count })
	if len(entries) > maxExpansions {
		entries = entries[:maxExpansions]
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Term
		seen[e.Term] = true
	}
	return out, nil
}
