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
		var should []query.Query
		for i, w := range words {
			should = append(should, wordQuery(w, i == len(words)-1))
		}
		must = append(must, bleve.NewDisjunctionQuery(should...))
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

// wordQuery matches one analyzed word in every text field: exactly, with one
// typo when long enough, and as a prefix when it is the last word.
func wordQuery(w string, last bool) query.Query {
	n := utf8.RuneCountInString(w)
	var qs []query.Query
	for _, f := range fieldBoosts {
		tq := bleve.NewTermQuery(w)
		tq.SetField(f.field)
		tq.SetBoost(f.boost * boostExact)
		qs = append(qs, tq)
		if n >= MinFuzzyLen {
			fq := bleve.NewFuzzyQuery(w)
			fq.SetField(f.field)
			fq.SetFuzziness(1)
			fq.SetBoost(f.boost * boostFuzzy)
			qs = append(qs, fq)
		}
		if last && n >= minPrefixLen {
			pq := bleve.NewPrefixQuery(w)
			pq.SetField(f.field)
			pq.SetBoost(f.boost * boostPrefix)
			qs = append(qs, pq)
		}
	}
	return bleve.NewDisjunctionQuery(qs...)
}
