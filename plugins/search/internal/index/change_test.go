package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOpenInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// bolt's flock is per open file, so a second open in this process
	// conflicts just as another process would.
	start := time.Now()
	y, err := Open(dir)
	if err == nil {
		y.Close()
		t.Fatal("second Open of a held index succeeded")
	}
	if !errors.Is(err, ErrInUse) {
		x.Close()
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	want := fmt.Sprintf("search index %s is in use by another process: is another capgate serving this data_dir?", dir)
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("second Open took %v", d) // a hang, not a timing assertion
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	z, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	z.Close()
}

func TestApplyAndMeta(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := x.Meta("cursor"); err != nil || v != "" {
		t.Fatalf("Meta of a fresh index = %q, %v", v, err)
	}
	a := Document{Entity: "e", ID: "a", Title: "Alpha"}
	b := Document{Entity: "e", ID: "b", Title: "Beta"}
	if err := x.Apply(ctx, Change{Upsert: []Document{a, b}, Meta: map[string]string{"cursor": "1", "bus": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := x.Apply(ctx, Change{Delete: []Ref{{"e", "a"}, {"e", "missing"}}, Meta: map[string]string{"cursor": "2", "bus": ""}}); err != nil {
		t.Fatal(err)
	}
	if err := x.Apply(ctx, Change{Upsert: []Document{{Entity: "e"}}}); err == nil {
		t.Error("Apply of a document without id succeeded")
	}
	if err := x.Apply(ctx, Change{Delete: []Ref{{"", "a"}}}); err == nil {
		t.Error("Apply of a delete without entity succeeded")
	}
	// Survives a reopen.
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for k, want := range map[string]string{"cursor": "2", "bus": ""} {
		if v, err := x.Meta(k); err != nil || v != want {
			t.Errorf("Meta(%q) = %q, %v; want %q", k, v, err, want)
		}
	}
	items, _, err := x.List(ctx, "", Ref{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0] != (Item{"e", "b", "Beta"}) {
		t.Errorf("items = %v, want only e/b", items)
	}
	if err := x.SetMeta("k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, _ := x.Meta("k"); v != "v" {
		t.Errorf("Meta(k) = %q after SetMeta", v)
	}
}

func TestListPages(t *testing.T) {
	ctx := context.Background()
	x := openTemp(t)
	// Entity names whose "entity/" doc id prefixes do not sort as the
	// names do ("a.b/" < "a/" but "a" < "a.b").
	var want []Item
	for _, e := range []string{"a", "a.b", "b_c", "b0"} {
		for i := range 7 {
			id := fmt.Sprintf("id-%02d", i)
			if i == 3 {
				id = "x/y z" // ids may hold slashes and spaces
			}
			want = append(want, Item{e, id, strings.ToUpper(e + " " + id)})
		}
	}
	slices.SortFunc(want, func(p, q Item) int {
		if c := strings.Compare(p.Entity, q.Entity); c != 0 {
			return c
		}
		return strings.Compare(p.ID, q.ID)
	})
	docs := make([]Document, len(want))
	for i, it := range want {
		docs[i] = Document{Entity: it.Entity, ID: it.ID, Title: it.Title}
	}
	if err := x.Upsert(ctx, docs...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entity string
		limit  int
	}{{"", 5}, {"", 1}, {"", 100}, {"a.b", 3}, {"b0", 7}, {"none", 3}} {
		t.Run(fmt.Sprintf("%s/%d", tc.entity, tc.limit), func(t *testing.T) {
			var exp []Item
			for _, it := range want {
				if tc.entity == "" || it.Entity == tc.entity {
					exp = append(exp, it)
				}
			}
			var got []Item
			after := Ref{}
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				items, more, err := x.List(ctx, tc.entity, after, tc.limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(items) > tc.limit {
					t.Fatalf("page of %d items, limit %d", len(items), tc.limit)
				}
				got = append(got, items...)
				if !more {
					break
				}
				last := items[len(items)-1]
				after = Ref{last.Entity, last.ID}
			}
			if !slices.Equal(got, exp) {
				t.Errorf("listed\n%v\nwant\n%v", got, exp)
			}
		})
	}
}

func TestEntities(t *testing.T) {
	ctx := context.Background()
	x := openTemp(t)
	if es, err := x.Entities(ctx); err != nil || len(es) != 0 {
		t.Fatalf("Entities of an empty index = %v, %v", es, err)
	}
	if err := x.Upsert(ctx, Document{Entity: "b.x", ID: "1"}, Document{Entity: "a", ID: "1"}, Document{Entity: "a", ID: "2"}); err != nil {
		t.Fatal(err)
	}
	es, err := x.Entities(ctx)
	if err != nil || !slices.Equal(es, []string{"a", "b.x"}) {
		t.Fatalf("Entities = %v, %v", es, err)
	}
	if err := x.DeleteEntity(ctx, "b.x"); err != nil {
		t.Fatal(err)
	}
	if es, _ := x.Entities(ctx); !slices.Equal(es, []string{"a"}) {
		t.Errorf("Entities after DeleteEntity = %v", es)
	}
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Upsert(ctx, Document{Entity: "a", ID: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := x.SetVersion("a", "1"); err != nil {
		t.Fatal(err)
	}
	x.Close()
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir); err != nil {
		t.Fatalf("Remove of a removed index: %v", err)
	}
	x, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if n, _ := x.Count(); n != 0 {
		t.Errorf("Count after Remove = %d", n)
	}
	if v, _ := x.Version("a"); v != "" {
		t.Errorf("Version after Remove = %q", v)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "precious.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Remove(other); err == nil {
		t.Error("Remove of a directory that holds no index succeeded")
	}
	if _, err := os.Stat(filepath.Join(other, "precious.txt")); err != nil {
		t.Errorf("Remove touched a foreign directory: %v", err)
	}
}
