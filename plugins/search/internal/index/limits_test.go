package index

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/collector"
	bindex "github.com/blevesearch/bleve_index_api"
)

func TestSearchRefusesOverLimitQueries(t *testing.T) {
	x := openFixture(t)
	words := func(n int) string { // n distinct words, none a stop word
		w := make([]string, n)
		for i := range w {
			w[i] = fmt.Sprintf("w%d", i)
		}
		return strings.Join(w, " ")
	}
	cases := []struct {
		name     string
		text     string
		want     error // nil: accepted
		got, max int
	}{
		{"longest accepted", strings.Repeat("x", MaxQueryLen), nil, 0, 0},
		{"surrounding space not counted", "  " + strings.Repeat("x", MaxQueryLen) + "\n", nil, 0, 0},
		{"one character too long", strings.Repeat("x", MaxQueryLen+1), ErrQueryTooLong, MaxQueryLen + 1, MaxQueryLen},
		{"characters, not bytes", strings.Repeat("é", MaxQueryLen), nil, 0, 0},
		{"multi-byte too long", strings.Repeat("é", MaxQueryLen+1), ErrQueryTooLong, MaxQueryLen + 1, MaxQueryLen},
		{"300 KB of words", strings.Repeat("aurora ", 300_000/7), ErrQueryTooLong, 300_000/7*7 - 1, MaxQueryLen},
		{"most terms accepted", words(MaxTerms), nil, 0, 0},
		{"one term too many", words(MaxTerms + 1), ErrTooManyTerms, MaxTerms + 1, MaxTerms},
		{"stop words not counted", words(MaxTerms) + strings.Repeat(" the of and", 10), nil, 0, 0},
		{"phrase words counted", `"` + words(20) + `" ` + words(13), ErrTooManyTerms, 33, MaxTerms},
		{"many phrases", strings.Repeat(`"aurora room" `, 17), ErrTooManyTerms, 34, MaxTerms},
		{"ideographs are one term each", strings.Repeat("会议室", 20), ErrTooManyTerms, 60, MaxTerms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c, err := x.buildQuery(context.Background(), Query{Text: tc.text})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("buildQuery: %v", err)
				}
				if _, err := x.Search(context.Background(), Query{Text: tc.text}); err != nil {
					t.Fatalf("Search: %v", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want a LimitError wrapping %v", err, tc.want)
			}
			if le.Got != tc.got || le.Max != tc.max {
				t.Errorf("LimitError got %d max %d, want %d and %d", le.Got, le.Max, tc.got, tc.max)
			}
			// Refused before any index work.
			if c.termQueries != 0 || c.scanned != 0 {
				t.Errorf("refused query cost %+v, want nothing built or scanned", c)
			}
			if _, err := x.Search(context.Background(), Query{Text: tc.text}); !errors.Is(err, tc.want) {
				t.Errorf("Search error %v, want %v", err, tc.want)
			}
			if len(err.Error()) > 100 || strings.Contains(err.Error(), tc.text[:20]) {
				t.Errorf("error %q carries the query", err)
			}
		})
	}
}

// worstQueries are the costliest queries within the limits over x: the
// words with the most one-typo neighbours in the index, the last a short
// prefix of the most terms; the longest words; many phrases; unicode.
func worstQueries(t testing.TB, x *Index) map[string]string {
	t.Helper()
	adv, err := x.bi.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	r, err := adv.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Every indexed term of 4 or more characters, by how many terms of the
	// title field lie one typo away.
	type cand struct {
		term  string
		fuzzy int
	}
	var cands []cand
	d, err := r.FieldDict(fieldTitle)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for e, err := d.Next(); e != nil && err == nil; e, err = d.Next() {
		all = append(all, e.Term)
	}
	d.Close()
	fr := r.(bindex.IndexReaderFuzzy)
	for _, term := range all {
		if n := utf8.RuneCountInString(term); n < MinFuzzyLen || n > maxFuzzyLen {
			continue
		}
		fd, err := fr.FieldDictFuzzy(fieldTitle, term, 1, "")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for e, err := fd.Next(); e != nil && err == nil; e, err = fd.Next() {
			n++
		}
		fd.Close()
		cands = append(cands, cand{term, n})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].fuzzy > cands[j].fuzzy })
	// The two-letter prefix of the most terms.
	prefixes := map[string]int{}
	for _, term := range all {
		if len(term) >= 2 {
			prefixes[term[:2]]++
		}
	}
	best := ""
	for p, n := range prefixes {
		if n > prefixes[best] || (n == prefixes[best] && p < best) {
			best = p
		}
	}
	var fuzzy []string
	for _, c := range cands[:min(MaxTerms-1, len(cands))] {
		fuzzy = append(fuzzy, c.term)
	}
	if len(fuzzy) < MaxTerms-1 {
		t.Fatalf("only %d fuzzy candidates", len(fuzzy))
	}
	// Distinct words as long as the length allows for MaxTerms of them
	// (the typo automaton grows with the word).
	long := make([]string, MaxTerms)
	for i := range long {
		long[i] = fmt.Sprintf("%c%cwhiteboardss", 'a'+i%26, 'a'+i/26)
	}
	var phrases []string
	for i := 0; i < MaxTerms/2; i++ {
		phrases = append(phrases, fmt.Sprintf(`"%s %s"`, cands[2*i].term, cands[2*i+1].term))
	}
	// Accents, other scripts, ideographs and emoji, as many terms as fit.
	an := x.bi.Mapping().AnalyzerNamed("standard")
	var uni []string
	for i := 0; ; i++ {
		w := []string{"café", "çafé", "naïve", "piñata", "über", "straße", "façade", "smörgåsbord", "ærøskøbing", "ελλάδα", "москва", "会议室", "🙂room", "r🙂om", "crème", "brûlée"}[i%16]
		next := append(slices.Clone(uni), fmt.Sprintf("%s%d", w, i))
		if len(terms(an, strings.Join(next, " "))) > MaxTerms || utf8.RuneCountInString(strings.Join(next, " ")) > MaxQueryLen {
			break
		}
		uni = next
	}
	// As many words of the longest fuzzy-matched length as fit, in a
	// script of two-byte letters.
	var longest []string
	for i := 0; (i+1)*(maxFuzzyLen+1) <= MaxQueryLen; i++ {
		longest = append(longest, strings.Repeat(string(rune('α'+i)), maxFuzzyLen-1)+"ω")
	}
	q := map[string]string{
		"longest fuzzy-matched words":                 strings.Join(longest, " "),
		"most fuzzy neighbours, broadest prefix last": strings.Join(append(fuzzy, best), " "),
		"longest words":                               strings.Join(long, " "),
		"one word of the most characters":             strings.Repeat("w", MaxQueryLen),
		"many phrases":                                strings.Join(phrases, " "),
		"phrases and words":                           strings.Join(phrases[:8], " ") + " " + strings.Join(fuzzy[:15], " ") + " " + best,
		"unicode":                                     strings.Join(uni, " "),
	}
	for name, text := range q {
		if n := utf8.RuneCountInString(text); n > MaxQueryLen {
			t.Fatalf("%s: %d characters, over the limit", name, n)
		}
	}
	return q
}

// openHostile is the fixture and 2000 generated documents (titles numbered
// to 2000, so that numbers have many one-typo neighbours), reopened so that
// no background persisting runs while it is measured.
func openHostile(t testing.TB, generated int) *Index {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := append(fixture(), generate(generated, 7)...)
	for i := len(fixture()); i < len(docs); i++ {
		docs[i].ID = "g-" + docs[i].ID
	}
	if err := x.Upsert(context.Background(), docs...); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// maxWorstAlloc bounds what one worst query may allocate, all phases
// together, over openHostile(2000). The costliest measured at 17 MB (the
// unicode words: a typo automaton per word and field); before the limits,
// a 300 KB query allocated 9 GB over the fixture alone.
const maxWorstAlloc = 64 << 20

func TestWorstQueriesStayWithinBudget(t *testing.T) {
	x := openHostile(t, 2000)
	ctx := context.Background()
	for name, text := range worstQueries(t, x) {
		t.Run(name, func(t *testing.T) {
			bq, c, err := x.buildQuery(ctx, Query{Text: text, Entity: entResource})
			if err != nil {
				t.Fatal(err)
			}
			if c.terms > MaxTerms || c.expanded > MaxExpandedTerms || c.scanned > MaxScannedEntries || c.termQueries > MaxTermQueries {
				t.Errorf("cost %+v over the limits (terms %d, expanded %d, scanned %d, term queries %d)",
					c, MaxTerms, MaxExpandedTerms, MaxScannedEntries, MaxTermQueries)
			}
			// bleve's own count of the term searchers it builds agrees:
			// the search runs with exactly that many allowed, not one fewer.
			run := func(limit int) error {
				lctx := context.WithValue(ctx, search.MaxTermSearchersKey, limit)
				_, err := x.bi.SearchInContext(lctx, bleve.NewSearchRequestOptions(bq, 20, 0, false))
				return err
			}
			if err := run(c.termQueries); err != nil {
				t.Errorf("with %d term searchers allowed: %v", c.termQueries, err)
			}
			if err := run(c.termQueries - 1); err == nil || !strings.Contains(err.Error(), "TooManyTermSearchers") {
				t.Errorf("with %d term searchers allowed: %v, want TooManyTermSearchers", c.termQueries-1, err)
			}

			// What the whole search allocates, the highlighting included,
			// at the largest limit the plugin allows.
			q := Query{Text: text, Limit: 1000}
			if _, err := x.Search(ctx, q); err != nil { // warm caches
				t.Fatal(err)
			}
			const runs = 3
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range runs {
				if _, err := x.Search(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			perQuery := (after.TotalAlloc - before.TotalAlloc) / runs
			t.Logf("%s: cost %+v, %.1f MB allocated per query", name, c, float64(perQuery)/(1<<20))
			if perQuery > maxWorstAlloc {
				t.Errorf("%d bytes allocated per query, over the bound of %d", perQuery, maxWorstAlloc)
			}
		})
	}
}

func TestLongQueryStillForgivesTypos(t *testing.T) {
	x := openFixture(t)
	// The expansion budget is shared among 32 words, and the one typo'd
	// word that names a document still finds it.
	var w []string
	for i := range MaxTerms - 1 {
		w = append(w, fmt.Sprintf("zq%dzq", i))
	}
	for _, text := range []string{"auroa " + strings.Join(w, " "), strings.Join(w, " ") + " auroa"} {
		hits, err := x.Search(context.Background(), Query{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].ID != docAurora.ID {
			t.Errorf("Search(%.40q…) = %v, want %s first", text, ids(hits), docAurora.DocID())
		}
	}
}

func TestSearchStopsWhenContextDone(t *testing.T) {
	t.Run("deadline passed before the search", func(t *testing.T) {
		x := openFixture(t)
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		text := "auroa " + strings.Repeat("kettlebell ", 20)
		_, c, err := x.buildQuery(ctx, Query{Text: text})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("buildQuery error %v, want DeadlineExceeded", err)
		}
		if c.termQueries != 0 || c.scanned != 0 {
			t.Errorf("cost %+v, want nothing built", c)
		}
		_, err = x.Search(ctx, Query{Text: text})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Search error %v, want DeadlineExceeded", err)
		}
		// The error quotes only the start of the query.
		if msg := err.Error(); len(msg) > 150 || !strings.Contains(msg, `"auroa kettlebell`) || !strings.Contains(msg, "…") {
			t.Errorf("error %q", msg)
		}
	})
	t.Run("bleve stops collecting", func(t *testing.T) {
		// Enough matches that bleve checks the context while collecting
		// (every 1024 matches), and a document handler that cancels it
		// at the first: the search must end long before the last match.
		const n = 5000
		x := openTemp(t)
		docs := make([]Document, n)
		for i := range docs {
			docs[i] = Document{Entity: entResource, ID: fmt.Sprintf("l%d", i), Title: fmt.Sprintf("Lantern %d", i), Body: "a lantern lit hall"}
		}
		if err := x.Upsert(context.Background(), docs...); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var seen atomic.Int64
		ctx = context.WithValue(ctx, search.MakeDocumentMatchHandlerKey, search.MakeDocumentMatchHandler(
			func(sc *search.SearchContext) (search.DocumentMatchHandler, bool, error) {
				h, loadID, err := collector.MakeTopNDocumentMatchHandler(sc)
				if err != nil {
					return nil, false, err
				}
				return func(d *search.DocumentMatch) error {
					if d != nil && seen.Add(1) == 1 {
						cancel()
					}
					return h(d)
				}, loadID, nil
			}))
		_, err := x.Search(ctx, Query{Text: "lantern"})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Search error %v, want Canceled", err)
		}
		if got := seen.Load(); got > int64(collector.CheckDoneEvery)+1 || got >= n {
			t.Errorf("%d of %d matches collected after the cancel at the first; bleve should stop within %d", got, n, collector.CheckDoneEvery)
		}
	})
}

func TestShortQuote(t *testing.T) {
	for _, s := range []string{strings.Repeat("ab", 200), strings.Repeat("é", 300)} {
		if q := shortQuote(s); utf8.RuneCountInString(q) > 70 || !strings.HasSuffix(q, `…"`) {
			t.Errorf("shortQuote(%d characters) = %s", utf8.RuneCountInString(s), q)
		}
	}
	if q := shortQuote("room"); q != `"room"` {
		t.Errorf("shortQuote(room) = %s", q)
	}
}
