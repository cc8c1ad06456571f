package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func openTemp(t *testing.T) *Index {
	t.Helper()
	x, err := Open(filepath.Join(t.TempDir(), "idx"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x
}

func openFixture(t *testing.T) *Index {
	t.Helper()
	x := openTemp(t)
	if err := x.Upsert(context.Background(), fixture()...); err != nil {
		t.Fatalf("Upsert fixture: %v", err)
	}
	return x
}

func ids(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Entity + "/" + h.ID
	}
	return out
}

func TestSearchRelevance(t *testing.T) {
	x := openFixture(t)
	aurora, decoy := docAurora.DocID(), docDecoy.DocID()
	cases := []struct {
		name    string
		q       Query
		wantTop string   // expected first hit; "" = expect no hits
		wantIn  []string // must also be among the hits
		absent  []string // must not be among the hits
	}{
		{name: "exact word", q: Query{Text: "aurora"}, wantTop: aurora},
		{name: "exact word upper case", q: Query{Text: "AURORA"}, wantTop: aurora},
		{name: "typo transposition", q: Query{Text: "aurroa"}, wantTop: aurora},
		{name: "typo deletion", q: Query{Text: "arora"}, wantTop: aurora},
		{name: "typo substitution", q: Query{Text: "zephir"}, wantTop: docZephyr.DocID()},
		{name: "typo in first letter", q: Query{Text: "xurora"}, wantTop: aurora},
		{name: "typo insertion", q: Query{Text: "kettlebelll"}, wantTop: docKettlebell.DocID()},
		{name: "prefix", q: Query{Text: "auro"}, wantTop: aurora},
		{name: "prefix of last word", q: Query{Text: "swing kettl"}, wantTop: docKettlebell.DocID()},
		{name: "prefix conf", q: Query{Text: "conf"}, wantTop: aurora, wantIn: []string{decoy}},
		{name: "phrase", q: Query{Text: `"conference room with a projector"`}, wantTop: aurora, absent: []string{decoy}},
		{name: "phrase and word", q: Query{Text: `"conference room" twelve`}, wantTop: aurora, absent: []string{decoy}},
		{name: "phrase in wrong order finds nothing", q: Query{Text: `"projector room conference"`}},
		{name: "title boosted over body", q: Query{Text: "marigold"}, wantTop: docMarigoldTitle.DocID(), wantIn: []string{docMarigoldBody.DocID()}},
		{name: "extra field", q: Query{Text: "harbourside"}, wantTop: docHarbour.DocID()},
		{name: "two words", q: Query{Text: "tennis harbourside"}, wantTop: docHarbour.DocID()},
		{name: "entity filter keeps matching entity", q: Query{Text: "aurora", Entity: entResource}, wantTop: aurora},
		{name: "entity filter excludes", q: Query{Text: "aurora", Entity: entPlan}, absent: []string{aurora}},
		{name: "entity filter typo", q: Query{Text: "kettlebel", Entity: entClass}, wantTop: docKettlebell.DocID()},
		{name: "unknown entity finds nothing", q: Query{Text: "room", Entity: "nope.thing"}},
		{name: "stop words only", q: Query{Text: "the and of"}},
		{name: "short word not fuzzy", q: Query{Text: "oat"}, absent: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := x.Search(context.Background(), tc.q)
			if err != nil {
				t.Fatalf("Search(%+v): %v", tc.q, err)
			}
			got := ids(hits)
			if tc.wantTop == "" && tc.absent == nil {
				if len(hits) != 0 {
					t.Fatalf("Search(%q) = %v, want no hits", tc.q.Text, got)
				}
				return
			}
			if tc.wantTop != "" && (len(got) == 0 || got[0] != tc.wantTop) {
				t.Fatalf("Search(%q) top = %v, want %s first", tc.q.Text, got, tc.wantTop)
			}
			for _, w := range tc.wantIn {
				if !slices.Contains(got, w) {
					t.Errorf("Search(%q) = %v, want %s among hits", tc.q.Text, got, w)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(got, a) {
					t.Errorf("Search(%q) = %v, must not contain %s", tc.q.Text, got, a)
				}
			}
			for i, h := range hits {
				if tc.q.Entity != "" && h.Entity != tc.q.Entity {
					t.Errorf("hit %s has entity %s, filter was %s", got[i], h.Entity, tc.q.Entity)
				}
				if i > 0 && h.Score > hits[i-1].Score {
					t.Errorf("hits not ranked: %s (%g) after %s (%g)", got[i], h.Score, got[i-1], hits[i-1].Score)
				}
			}
		})
	}
}

func TestSearchHitFields(t *testing.T) {
	x := openFixture(t)
	cases := []struct {
		name        string
		text        string
		wantID      string
		wantTitle   string
		wantSnippet string // snippet must contain this
	}{
		{"highlighted body", "aurora projector", "aurora", docAurora.Title, "projector"},
		{"highlighted extra field", "harbourside", "court-h", docHarbour.Title, "Harbourside sports hall"},
		{"title-only match falls back to body start", "marigold studio", "marigold-studio", docMarigoldTitle.Title, "Bright recording studio"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := x.Search(context.Background(), Query{Text: tc.text, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 1 {
				t.Fatalf("got %d hits, want 1", len(hits))
			}
			h := hits[0]
			if h.ID != tc.wantID || h.Title != tc.wantTitle || h.Score <= 0 {
				t.Errorf("hit = %+v, want id %s title %q and a positive score", h, tc.wantID, tc.wantTitle)
			}
			if !strings.Contains(h.Snippet, tc.wantSnippet) {
				t.Errorf("snippet %q does not contain %q", h.Snippet, tc.wantSnippet)
			}
			if strings.ContainsAny(h.Snippet, "<>") {
				t.Errorf("snippet %q contains markup", h.Snippet)
			}
		})
	}
}

func TestSearchLimit(t *testing.T) {
	x := openFixture(t)
	cases := []struct {
		limit, want int
	}{
		{1, 1}, {5, 5}, {0, DefaultLimit}, {-3, DefaultLimit}, {35, 35},
	}
	for _, tc := range cases {
		hits, err := x.Search(context.Background(), Query{Text: "room", Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != tc.want {
			t.Errorf("limit %d: got %d hits, want %d", tc.limit, len(hits), tc.want)
		}
	}
}

func TestSearchBroadPrefix(t *testing.T) {
	x := openFixture(t)
	// "st" expands to many terms: capped, still answered, limit kept.
	for _, text := range []string{"st", "quiet st"} {
		hits, err := x.Search(context.Background(), Query{Text: text, Limit: 7})
		if err != nil {
			t.Fatalf("Search(%q): %v", text, err)
		}
		if len(hits) != 7 {
			t.Errorf("Search(%q) = %d hits, want 7", text, len(hits))
		}
	}
}

func TestSearchEmptyQuery(t *testing.T) {
	x := openTemp(t)
	for _, text := range []string{"", "   ", "\t\n", `""`, `" "`} {
		if _, err := x.Search(context.Background(), Query{Text: text}); !errors.Is(err, ErrEmptyQuery) {
			t.Errorf("Search(%q) error = %v, want ErrEmptyQuery", text, err)
		}
	}
}

func TestUpsertReplaces(t *testing.T) {
	x := openFixture(t)
	ctx := context.Background()
	before, _ := x.Count()
	renamed := docZephyr
	renamed.Title = "Borealis annual plan"
	if err := x.Upsert(ctx, renamed); err != nil {
		t.Fatal(err)
	}
	if after, _ := x.Count(); after != before {
		t.Errorf("count after replace = %d, want %d", after, before)
	}
	hits, err := x.Search(ctx, Query{Text: "borealis"})
	if err != nil || len(hits) == 0 || hits[0].ID != "zephyr" || hits[0].Title != renamed.Title {
		t.Fatalf("search new title: %v, %v", hits, err)
	}
	hits, err = x.Search(ctx, Query{Text: "zephyr"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("old title still found: %v", ids(hits))
	}
}

func TestDelete(t *testing.T) {
	x := openFixture(t)
	ctx := context.Background()
	before, _ := x.Count()
	if err := x.Delete(ctx, entResource, "aurora"); err != nil {
		t.Fatal(err)
	}
	if err := x.Delete(ctx, entResource, "never-indexed"); err != nil {
		t.Errorf("delete of unknown id: %v", err)
	}
	if after, _ := x.Count(); after != before-1 {
		t.Errorf("count = %d, want %d", after, before-1)
	}
	hits, err := x.Search(ctx, Query{Text: "aurora"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids(hits), docAurora.DocID()) {
		t.Errorf("deleted document still found: %v", ids(hits))
	}
}

func TestDeleteEntity(t *testing.T) {
	x := openFixture(t)
	ctx := context.Background()
	perEntity := map[string]uint64{}
	for _, d := range fixture() {
		perEntity[d.Entity]++
	}
	before, _ := x.Count()
	if err := x.SetVersion(entPlan, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := x.DeleteEntity(ctx, entPlan); err != nil {
		t.Fatal(err)
	}
	if after, _ := x.Count(); after != before-perEntity[entPlan] {
		t.Errorf("count = %d, want %d", after, before-perEntity[entPlan])
	}
	hits, err := x.Search(ctx, Query{Text: "plan", Entity: entPlan})
	if err != nil || len(hits) != 0 {
		t.Errorf("plans still found: %v, %v", ids(hits), err)
	}
	hits, err = x.Search(ctx, Query{Text: "aurora"})
	if err != nil || len(hits) == 0 || hits[0].ID != "aurora" {
		t.Errorf("other entity lost: %v, %v", ids(hits), err)
	}
	if v, _ := x.Version(entPlan); v != "v1" {
		t.Errorf("version after DeleteEntity = %q, want v1 kept", v)
	}
}

func TestUpsertInvalid(t *testing.T) {
	x := openTemp(t)
	cases := []struct {
		name string
		doc  Document
	}{
		{"no entity", Document{ID: "1", Title: "x"}},
		{"slash in entity", Document{Entity: "a/b", ID: "1"}},
		{"no id", Document{Entity: entPlan, ID: " "}},
	}
	for _, tc := range cases {
		ok := Document{Entity: entPlan, ID: "ok", Title: "fine"}
		if err := x.Upsert(context.Background(), ok, tc.doc); err == nil {
			t.Errorf("%s: Upsert accepted %+v", tc.name, tc.doc)
		}
	}
	if n, _ := x.Count(); n != 0 {
		t.Errorf("invalid batch wrote %d documents", n)
	}
}

func TestUpsertCancelled(t *testing.T) {
	x := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Upsert(ctx, generate(10, 1)...); !errors.Is(err, context.Canceled) {
		t.Errorf("Upsert with cancelled ctx = %v, want context.Canceled", err)
	}
}

func TestVersion(t *testing.T) {
	x := openTemp(t)
	steps := []struct {
		set, want string
	}{
		{"", ""}, {"v1", "v1"}, {"2026-11-30T09:00:00Z#17", "2026-11-30T09:00:00Z#17"}, {"", ""},
	}
	for _, s := range steps {
		if err := x.SetVersion(entResource, s.set); err != nil {
			t.Fatal(err)
		}
		if got, err := x.Version(entResource); err != nil || got != s.want {
			t.Errorf("after SetVersion(%q): Version = %q, %v; want %q", s.set, got, err, s.want)
		}
	}
	if got, _ := x.Version(entPlan); got != "" {
		t.Errorf("unset entity version = %q", got)
	}
}

func TestPersistence(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	ctx := context.Background()
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	docs := fixture()
	if err := x.Upsert(ctx, docs...); err != nil {
		t.Fatal(err)
	}
	if err := x.SetVersion(entResource, "r42"); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}

	y, err := Open(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer y.Close()
	if n, err := y.Count(); err != nil || n != uint64(len(docs)) {
		t.Errorf("Count after reopen = %d, %v; want %d", n, err, len(docs))
	}
	if v, _ := y.Version(entResource); v != "r42" {
		t.Errorf("Version after reopen = %q, want r42", v)
	}
	hits, err := y.Search(ctx, Query{Text: "aurroa"})
	if err != nil || len(hits) == 0 || hits[0].ID != "aurora" {
		t.Errorf("search after reopen: %v, %v", ids(hits), err)
	}
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) string
	}{
		{"empty path", func(t *testing.T) string { return "" }},
		{"foreign files", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{"corrupt metadata", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "index_meta.json"), []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}},
		{"path is a file", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return f
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t)
			x, err := Open(dir)
			if err == nil {
				x.Close()
				t.Fatalf("Open(%q) succeeded", dir)
			}
			if dir != "" && !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the directory", err)
			}
		})
	}
}

func TestOpenEmptyDir(t *testing.T) {
	dir := t.TempDir() // exists, empty
	x, err := Open(dir)
	if err != nil {
		t.Fatalf("Open empty dir: %v", err)
	}
	defer x.Close()
	if n, err := x.Count(); err != nil || n != 0 {
		t.Errorf("Count = %d, %v", n, err)
	}
}

func TestConcurrentSearchDuringUpsert(t *testing.T) {
	x := openFixture(t)
	ctx := context.Background()
	more := generate(2000, 7)
	for i := range more {
		more[i].ID = "extra-" + more[i].ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < len(more); i += 100 {
			if err := x.Upsert(ctx, more[i:i+100]...); err != nil {
				errs <- err
				return
			}
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				hits, err := x.Search(ctx, Query{Text: "aurroa"})
				if err != nil {
					errs <- err
					return
				}
				if len(hits) == 0 || hits[0].ID != "aurora" {
					errs <- errors.New("aurora lost during upsert: " + strings.Join(ids(hits), ","))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n, _ := x.Count(); n != uint64(len(fixture())+len(more)) {
		t.Errorf("Count = %d, want %d", n, len(fixture())+len(more))
	}
}
