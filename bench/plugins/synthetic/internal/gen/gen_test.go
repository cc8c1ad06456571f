package gen

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestIDRoundTrip(t *testing.T) {
	for _, i := range []int{0, 42, 99_999, MaxDocuments - 1} {
		id := ID(i)
		if len(id) != len("item-000000") {
			t.Errorf("ID(%d) = %q", i, id)
		}
		if got, ok := Parse(id); !ok || got != i {
			t.Errorf("Parse(%q) = %d, %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "item-", "item-42", "item-0000042", "item-00004x", "x-000042", "item-+00042", "ITEM-000042"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if !(ID(9) < ID(10) && ID(99_999) < ID(100_000)) {
		t.Error("ids do not sort like their positions")
	}
}

func TestGenerateIsPure(t *testing.T) {
	a, b := Generate(1234, 42), Generate(1234, 42)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same position, different items:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(Generate(1234, 43), a) {
		t.Error("another seed gives the same item")
	}
	kinds, resources := map[string]int{}, map[string]int{}
	for i := range 400 {
		it := Generate(i, 42)
		kinds[it.Kind]++
		resources[it.Fields["kind"]]++
		if it.Title == "" || it.Description == "" || len(it.Fields) == 0 {
			t.Fatalf("item %d incomplete: %+v", i, it)
		}
		if !strings.HasSuffix(it.Title, " "+strings.TrimLeft(it.ID[len(idPrefix):], "0")) && i != 0 {
			t.Errorf("title %q does not end in the item's number", it.Title)
		}
	}
	if kinds["resource"] != 200 || kinds["plan"] != 100 || kinds["class"] != 100 {
		t.Errorf("kinds = %v", kinds)
	}
	for _, k := range []string{"room", "desk", "court", "studio"} {
		if resources[k] != 50 {
			t.Errorf("resource kinds = %v, want 50 of each", resources)
		}
	}
}

func TestAfter(t *testing.T) {
	c := Catalogue{N: 25, Seed: 1}
	for _, tc := range []struct {
		after string
		limit int
		want  []int
	}{
		{"", 3, []int{0, 1, 2}},
		{ID(2), 2, []int{3, 4}},
		{ID(23), 10, []int{24}},
		{ID(24), 10, nil},
		{"item-000002x", 1, []int{3}}, // between two ids
		{"a", 1, []int{0}},            // before every id
		{"z", 1, nil},                 // after every id
		{"", 0, nil},
	} {
		var got []int
		for _, it := range c.After(tc.after, tc.limit) {
			n, _ := Parse(it.ID)
			got = append(got, n)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("After(%q, %d) = %v, want %v", tc.after, tc.limit, got, tc.want)
		}
	}
	if _, ok := c.Get(ID(25)); ok {
		t.Error("Get past the end found an item")
	}
	if it, ok := c.Get(ID(7)); !ok || !reflect.DeepEqual(it, Generate(7, 1)) {
		t.Errorf("Get(%s) = %+v, %v", ID(7), it, ok)
	}
}

// The vocabulary gives broad words a realistic share of the catalogue.
func TestVocabularyShares(t *testing.T) {
	const n = 20_000
	count := func(word string) int {
		k := 0
		for i := range n {
			it := Generate(i, 42)
			if strings.Contains(strings.ToLower(it.Title+" "+it.Description), word) {
				k++
			}
		}
		return k
	}
	for word, want := range map[string][2]int{
		"whiteboard":    {n / 100, n / 10},
		"standing desk": {n / 100, n / 10},
		"yoga mats":     {n / 100, n / 10},
		"beginners":     {n / 20, n / 5},
		"annual":        {n / 20, n / 5},
		"12345":         {1, 1},
	} {
		if got := count(word); got < want[0] || got > want[1] {
			t.Errorf("%q in %d of %d documents, want %d–%d", word, got, n, want[0], want[1])
		}
	}
}
