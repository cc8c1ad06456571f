package index

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/registry"
	"github.com/blevesearch/bleve/v2/search"
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

// Limits on one query. Each word of a query costs dictionary scans and term
// queries, and typo and prefix matching multiply that cost, so without them
// one long query can hold a core and gigabytes for many seconds. They are
// checked before any index work, whoever the caller is, so that the worst
// query's cost is bounded and known.
const (
	// MaxQueryLen is the longest query text, in characters (Unicode code
	// points), surrounding space not counted. Two long sentences fit.
	MaxQueryLen = 500
	// MaxTerms is the most terms a query may have after analysis: its
	// words and the words of its phrases, stop words not counted.
	MaxTerms = 32
	// MaxExpandedTerms bounds the typo and prefix expansions of a whole
	// query: the terms added to its words, summed over words and fields.
	MaxExpandedTerms = 512
	// MaxScannedEntries bounds the term dictionary entries a whole query
	// reads to find those expansions.
	MaxScannedEntries = 32768
	// MaxTermQueries is the most leaf term queries one search runs: every
	// term exactly in each text field, the expansions, and the entity
	// filter. bleve enforces it too, as a backstop.
	MaxTermQueries = MaxTerms*numTextFields + MaxExpandedTerms + 1
)

// maxFuzzyLen is the longest word, in characters, also matched with one
// typo. Longer words match exactly (and, when last, as a prefix): no real
// word is that long, and the typo automaton grows with the word.
const maxFuzzyLen = 32

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

// Errors a [LimitError] wraps.
var (
	ErrQueryTooLong = errors.New("search query too long")
	ErrTooManyTerms = errors.New("search query has too many terms")
)

// LimitError is returned by [Index.Search] for a query over [MaxQueryLen]
// or [MaxTerms], before any index work. It unwraps to ErrQueryTooLong or
// ErrTooManyTerms.
type LimitError struct {
	Err error
	// Got is the query's length in characters, or its number of terms;
	// Max the limit it exceeds.
	Got, Max int
}

func (e *LimitError) Error() string {
	if errors.Is(e.Err, ErrQueryTooLong) {
		return fmt.Sprintf("%v: %d characters, at most %d", e.Err, e.Got, e.Max)
	}
	return fmt.Sprintf("%v: %d, at most %d", e.Err, e.Got, e.Max)
}

func (e *LimitError) Unwrap() error { return e.Err }

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
// returned hits by entity, then id). A query whose words are all stop words
// finds nothing. A query over [MaxQueryLen] or [MaxTerms] is a [LimitError].
// The search stops when ctx is done, with an error wrapping ctx's: between
// the dictionary scans that expand its words, and while bleve collects
// matches (it checks before the first and then every 1024 matches).
func (x *Index) Search(ctx context.Context, q Query) ([]Hit, error) {
	bq, _, err := x.buildQuery(ctx, q)
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
	// bleve counts the term searchers it builds against this bound: were
	// the budget above ever miscounted, the search fails instead of
	// running away.
	ctx = context.WithValue(ctx, search.MaxTermSearchersKey, MaxTermQueries)
	req := bleve.NewSearchRequestOptions(bq, limit, 0, false)
	req.Fields = []string{fieldEntity, fieldID, fieldTitle, fieldBody}
	res, err := x.bi.SearchInContext(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", shortQuote(q.Text), err)
	}
	// bleve builds every searcher before it first looks at ctx: do not
	// build the highlighting search's once the time is up.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("search %s: %w", shortQuote(q.Text), err)
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
		return nil, fmt.Errorf("search %s: %w", shortQuote(q.Text), err)
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

// shortQuote quotes s for an error message, cut to a readable length: a
// query's text reaches logs through errors, and must not reach them whole.
func shortQuote(s string) string {
	const max = 64
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return strconv.Quote(s)
}

// cost is what building one query took, for tests and benchmarks.
type cost struct {
	terms       int // analyzed terms: words and the words of phrases
	termQueries int // leaf term queries in the built query
	expanded    int // of which typo and prefix expansions
	scanned     int // term dictionary entries read to find them
}

// buildQuery turns q into a bleve query, or nil when its words are all stop
// words. It refuses a query over the limits before analyzing it further
// than counting its terms.
func (x *Index) buildQuery(ctx context.Context, q Query) (query.Query, cost, error) {
	var c cost
	text := strings.TrimSpace(q.Text)
	if len(text) > MaxQueryLen { // bytes ≥ characters: count only when it may matter
		if n := utf8.RuneCountInString(text); n > MaxQueryLen {
			return nil, c, &LimitError{Err: ErrQueryTooLong, Got: n, Max: MaxQueryLen}
		}
	}
	var phrases []string
	for _, m := range phraseRE.FindAllStringSubmatch(text, -1) {
		if p := strings.TrimSpace(m[1]); p != "" {
			phrases = append(phrases, p)
		}
	}
	rest := strings.ReplaceAll(phraseRE.ReplaceAllString(text, " "), `"`, " ")
	if len(phrases) == 0 && strings.TrimSpace(rest) == "" {
		return nil, c, ErrEmptyQuery
	}
	an := x.bi.Mapping().AnalyzerNamed(standard.Name)
	if an == nil {
		return nil, c, fmt.Errorf("search: analyzer %q missing", standard.Name)
	}

	// Count every term before building anything: the limit is on the
	// whole query.
	phraseTerms := make([]int, len(phrases))
	for i, p := range phrases {
		phraseTerms[i] = len(terms(an, p))
		c.terms += phraseTerms[i]
	}
	words := terms(an, rest)
	c.terms += len(words)
	if c.terms > MaxTerms {
		return nil, c, &LimitError{Err: ErrTooManyTerms, Got: c.terms, Max: MaxTerms}
	}
	if err := ctx.Err(); err != nil {
		return nil, c, fmt.Errorf("search %s: %w", shortQuote(text), err)
	}

	var must []query.Query
	for i, p := range phrases {
		if phraseTerms[i] == 0 {
			continue // only stop words: matches nothing, constrains nothing
		}
		must = append(must, phraseQuery(p))
		c.termQueries += phraseTerms[i] * numTextFields
	}
	if len(words) > 0 {
		wq, err := x.wordsQuery(ctx, words, &c)
		if err != nil {
			return nil, c, fmt.Errorf("search %s: %w", shortQuote(text), err)
		}
		must = append(must, wq)
	}
	if len(must) == 0 {
		return nil, c, nil
	}
	bq := bleve.NewBooleanQuery()
	bq.AddMust(must...)
	if q.Entity != "" {
		f := bleve.NewTermQuery(q.Entity)
		f.SetField(fieldEntity)
		bq.AddFilter(f)
		c.termQueries++
	}
	return bq, c, nil
}

// wordsQuery matches any of the analyzed words, the last also as a prefix.
// The typo and prefix expansions share the query's budgets
// (MaxExpandedTerms, MaxScannedEntries) evenly among the dictionaries they
// read, so the whole query stays within them however many words it has,
// and a short query expands as far as a single word may.
func (x *Index) wordsQuery(ctx context.Context, words []string, c *cost) (_ query.Query, err error) {
	dicts := 0
	for i, w := range words {
		fuzzy, prefix := expansions(w, i == len(words)-1)
		if fuzzy {
			dicts += numTextFields
		}
		if prefix {
			dicts += numTextFields
		}
	}
	b := budget{keep: perDictExpansions, scan: perDictScan}
	if dicts > 0 {
		b.keep = min(b.keep, MaxExpandedTerms/dicts)
		b.scan = min(b.scan, MaxScannedEntries/dicts)
	}

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
		wq, err := wordQuery(ctx, r, w, i == len(words)-1, b, c)
		if err != nil {
			return nil, err
		}
		should = append(should, wq)
	}
	return bleve.NewDisjunctionQuery(should...), nil
}

// expansions says whether word w is also matched with one typo, and as a
// prefix.
func expansions(w string, last bool) (fuzzy, prefix bool) {
	n := utf8.RuneCountInString(w)
	return n >= MinFuzzyLen && n <= maxFuzzyLen, last && n >= minPrefixLen
}

// terms analyzes s as the index does: lower-cased words, stop words removed.
func terms(an analysis.Analyzer, s string) []string {
	var out []string
	for _, tok := range an.Analyze([]byte(s)) {
		out = append(out, string(tok.Term))
	}
	return out
}

// numTextFields is the number of analyzed text fields every term is
// matched in.
const numTextFields = 3

var fieldBoosts = [numTextFields]struct {
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

// perDictExpansions bounds how many indexed terms one fuzzy or prefix word
// expands to per field (the most frequent are kept), and perDictScan how
// many dictionary entries are read to find them. A query of many words gets
// less of each (see wordsQuery).
const (
	perDictExpansions = 32
	perDictScan       = 4096
)

// budget is what one dictionary read may take: keep terms of at most scan
// entries.
type budget struct{ keep, scan int }

// wordQuery matches one analyzed word in every text field: exactly, with one
// typo when long enough, and as a prefix when it is the last word. Fuzzy and
// prefix words are expanded against the term dictionary here rather than by
// bleve's fuzzy and prefix queries, so that the exact word (which both would
// include, and which for a common word has the longest postings list) is
// scanned once, not three times, and so that the expansions stay within the
// query's budget. ctx is checked before each dictionary read.
func wordQuery(ctx context.Context, r bindex.IndexReader, w string, last bool, b budget, c *cost) (query.Query, error) {
	fuzzy, prefix := expansions(w, last)
	var qs []query.Query
	add := func(field, term string, boost float64) {
		tq := bleve.NewTermQuery(term)
		tq.SetField(field)
		tq.SetBoost(boost)
		qs = append(qs, tq)
		c.termQueries++
	}
	expand := func(field, how string, open func() (bindex.FieldDict, error), seen map[string]bool, boost float64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := open()
		if err != nil {
			return fmt.Errorf("expand %s %s in %s: %w", shortQuote(w), how, field, err)
		}
		terms, scanned, err := topTerms(d, seen, b)
		c.scanned += scanned
		if err != nil {
			return fmt.Errorf("expand %s %s in %s: %w", shortQuote(w), how, field, err)
		}
		for _, t := range terms {
			add(field, t, boost)
		}
		c.expanded += len(terms)
		return nil
	}
	for _, f := range fieldBoosts {
		add(f.field, w, f.boost*boostExact)
		seen := map[string]bool{w: true}
		if fuzzy {
			fr, ok := r.(bindex.IndexReaderFuzzy)
			if !ok {
				return nil, errors.New("index reader cannot expand fuzzy terms")
			}
			err := expand(f.field, "with one typo", func() (bindex.FieldDict, error) {
				return fr.FieldDictFuzzy(f.field, w, 1, "")
			}, seen, f.boost*boostFuzzy)
			if err != nil {
				return nil, err
			}
		}
		if prefix {
			err := expand(f.field, "as a prefix", func() (bindex.FieldDict, error) {
				return r.FieldDictPrefix(f.field, []byte(w))
			}, seen, f.boost*boostPrefix)
			if err != nil {
				return nil, err
			}
		}
	}
	return bleve.NewDisjunctionQuery(qs...), nil
}

// topTerms reads up to b.scan entries of d, closes it, and returns the
// b.keep most frequent terms not in seen, marking them seen, and the number
// of entries read.
func topTerms(d bindex.FieldDict, seen map[string]bool, b budget) ([]string, int, error) {
	var entries []bindex.DictEntry
	var err error
	scanned := 0
	for scanned < b.scan {
		var e *bindex.DictEntry
		e, err = d.Next()
		if err != nil || e == nil {
			break
		}
		scanned++
		if !seen[e.Term] {
			entries = append(entries, *e)
		}
	}
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, scanned, err
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Count > entries[j].Count })
	if len(entries) > b.keep {
		entries = entries[:b.keep]
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Term
		seen[e.Term] = true
	}
	return out, scanned, nil
}
