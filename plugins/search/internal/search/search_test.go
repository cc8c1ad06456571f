package search

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

func TestSearch(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	cases := []struct {
		name    string
		in      platform.SearchIn
		wantTop string   // first hit
		want    []string // exactly these hits, in any order, when set
		absent  []string
		wantN   int // number of hits, when set
	}{
		{name: "exact", in: platform.SearchIn{Query: "aurora"}, wantTop: entRoom + "/aurora"},
		{name: "title ranks first", in: platform.SearchIn{Query: "zephyr"}, wantTop: entRoom + "/zephyr", want: []string{entRoom + "/zephyr", entClass + "/yoga-1"}},
		{name: "typo", in: platform.SearchIn{Query: "zephir"}, wantTop: entRoom + "/zephyr"},
		{name: "typo transposed", in: platform.SearchIn{Query: "auorra"}, wantTop: entRoom + "/aurora"},
		{name: "prefix", in: platform.SearchIn{Query: "kettleb"}, wantTop: entClass + "/kettle"},
		{name: "prefix conf", in: platform.SearchIn{Query: "conf"}, wantTop: entRoom + "/aurora"},
		{name: "phrase", in: platform.SearchIn{Query: `"meeting room"`}, want: []string{entRoom + "/zephyr"}, absent: []string{entRoom + "/harbour"}},
		{name: "entity filter", in: platform.SearchIn{Query: "zephyr", Entity: entClass}, want: []string{entClass + "/yoga-1"}},
		{name: "limit", in: platform.SearchIn{Query: "room", Limit: 1}, wantN: 1},
		{name: "nothing", in: platform.SearchIn{Query: "xylophone"}, want: []string{}},
		{name: "stop words only", in: platform.SearchIn{Query: "the and"}, want: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := e.search(t, tc.in)
			got := hitIDs(out)
			if out.Hits == nil {
				t.Fatal("hits is null")
			}
			if tc.wantTop != "" && (len(got) == 0 || got[0] != tc.wantTop) {
				t.Errorf("hits %v, want %s first", got, tc.wantTop)
			}
			if tc.want != nil {
				w := slices.Sorted(slices.Values(tc.want))
				if g := slices.Sorted(slices.Values(got)); !slices.Equal(g, w) {
					t.Errorf("hits %v, want %v", got, tc.want)
				}
			}
			if tc.wantN > 0 && len(got) != tc.wantN {
				t.Errorf("%d hits, want %d", len(got), tc.wantN)
			}
			for _, a := range tc.absent {
				if slices.Contains(got, a) {
					t.Errorf("hits %v include %s", got, a)
				}
			}
			for i := 1; i < len(out.Hits); i++ {
				if out.Hits[i].Score > out.Hits[i-1].Score {
					t.Errorf("hits not ranked: %v", out.Hits)
				}
			}
		})
	}
	t.Run("hit fields", func(t *testing.T) {
		out := e.search(t, platform.SearchIn{Query: "projector"})
		if len(out.Hits) != 1 {
			t.Fatalf("hits %v", out.Hits)
		}
		h := out.Hits[0]
		if h.Entity != entRoom || h.ID != "aurora" || h.Title != "Aurora conference room" || !strings.Contains(h.Snippet, "projector") || h.Score <= 0 {
			t.Errorf("hit %+v", h)
		}
	})
	t.Run("empty result is an array", func(t *testing.T) {
		raw, err := e.client.Invoke(context.Background(), platform.SearchName, reader, platform.SearchIn{Query: "xylophone"})
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) != `{"hits":[]}` {
			t.Errorf("result %s", raw)
		}
	})
}

func TestInvalidInput(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	cases := []struct {
		name, capability string
		args             any
		wantCode         sdk.ErrorCode
		wantIn           []string // substrings of the message
	}{
		{"search empty query", platform.SearchName, platform.SearchIn{Query: ""}, sdk.CodeInvalidInput, []string{"query is empty"}},
		{"search blank query", platform.SearchName, platform.SearchIn{Query: "  \t "}, sdk.CodeInvalidInput, []string{"query is empty"}},
		{"search quotes only", platform.SearchName, platform.SearchIn{Query: `""`}, sdk.CodeInvalidInput, []string{"no words"}},
		{"search unknown entity", platform.SearchName, platform.SearchIn{Query: "room", Entity: "shop.item"}, sdk.CodeInvalidInput, []string{`"shop.item"`, `"course.class", "venue.room"`}},
		// The schema's minimum refuses it before the plugin runs (the
		// plugin's own check: TestOverLimitInputRefused).
		{"search negative limit", platform.SearchName, platform.SearchIn{Query: "room", Limit: -1}, sdk.CodeInvalidInput, []string{"invalid arguments for platform.search", "limit"}},
		{"get unknown entity", platform.GetName, platform.GetIn{Entity: "shop.item", ID: "x"}, sdk.CodeInvalidInput, []string{`"course.class", "venue.room"`}},
		{"get empty entity", platform.GetName, platform.GetIn{ID: "x"}, sdk.CodeInvalidInput, []string{"entity is empty"}},
		{"get empty id", platform.GetName, platform.GetIn{Entity: entRoom}, sdk.CodeInvalidInput, []string{"id is empty"}},
		{"get not found", platform.GetName, platform.GetIn{Entity: entRoom, ID: "nope"}, sdk.CodeNotFound, []string{`"nope"`}},
		{"list unknown entity", platform.ListName, platform.ListIn{Entity: "shop.item"}, sdk.CodeInvalidInput, []string{`"course.class", "venue.room"`}},
		{"list negative limit", platform.ListName, platform.ListIn{Limit: -5}, sdk.CodeInvalidInput, []string{"invalid arguments for platform.list", "limit"}},
		{"list cursor not base64", platform.ListName, platform.ListIn{Cursor: "!!!"}, sdk.CodeInvalidInput, []string{"cursor"}},
		{"list cursor without slash", platform.ListName, platform.ListIn{Cursor: encodeCursorRaw("venue.room")}, sdk.CodeInvalidInput, []string{"cursor"}},
		{"list cursor empty id", platform.ListName, platform.ListIn{Cursor: encodeCursorRaw("venue.room/")}, sdk.CodeInvalidInput, []string{"cursor"}},
		{"list cursor of another entity", platform.ListName, platform.ListIn{Entity: entClass, Cursor: encodeCursorRaw("venue.room/aurora")}, sdk.CodeInvalidInput, []string{"another entity"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			te := e.toolError(t, tc.capability, tc.args)
			if te.Code != tc.wantCode {
				t.Errorf("code %v, want %v (%s)", te.Code, tc.wantCode, te.Message)
			}
			for _, s := range tc.wantIn {
				if !strings.Contains(te.Message, s) {
					t.Errorf("message %q does not contain %q", te.Message, s)
				}
			}
		})
	}
}

// encodeCursorRaw encodes s as encodeCursor does a position.
func encodeCursorRaw(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestLimitCappedToMaxResults(t *testing.T) {
	d := newData()
	manyDocs(d, entRoom, 30)
	e := run(t, d, runOpts{})
	if e.svc.env.MaxResults != sdk.DefaultMaxResults {
		t.Fatalf("MaxResults %d", e.svc.env.MaxResults)
	}
	for _, tc := range []struct{ limit, want int }{{0, 20}, {5, 5}, {20, 20}, {21, 20}, {1000, 20}} {
		out := e.search(t, platform.SearchIn{Query: "lantern", Limit: tc.limit})
		if len(out.Hits) != tc.want {
			t.Errorf("limit %d: %d hits, want %d", tc.limit, len(out.Hits), tc.want)
		}
		page := sdktest.Call[platform.ListOut](t, e.client, platform.ListName, reader, platform.ListIn{Limit: tc.limit})
		if len(page.Items) != tc.want {
			t.Errorf("list limit %d: %d items, want %d", tc.limit, len(page.Items), tc.want)
		}
	}
}

func TestGet(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	out := sdktest.Call[platform.GetOut](t, e.client, platform.GetName, reader, platform.GetIn{Entity: entRoom, ID: "aurora"})
	if out.Entity != entRoom || out.ID != "aurora" || out.Record["name"] != "Aurora conference room" {
		t.Errorf("get: %+v", out)
	}
	// The record comes from the provider, numbers exactly as it wrote them.
	raw, err := e.client.Invoke(context.Background(), platform.GetName, reader, platform.GetIn{Entity: entRoom, ID: "aurora"})
	if err != nil || !strings.Contains(string(raw), `"seats":12345678901`) {
		t.Errorf("get raw %s, %v", raw, err)
	}
}

func TestListPagesEverythingOnce(t *testing.T) {
	d := newData()
	want := append(manyDocs(d, entClass, 23), manyDocs(d, entRoom, 24)...) // (entity, id) order
	e := run(t, d, runOpts{})
	for _, tc := range []struct {
		name      string
		entity    string
		limit     int
		want      []string
		wantPages int
	}{
		{"all, default page", "", 0, want, 3},
		{"all, pages of 7", "", 7, want, 7},
		{"one entity", entRoom, 10, want[23:], 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			cursor, pages := "", 0
			for {
				page := sdktest.Call[platform.ListOut](t, e.client, platform.ListName, reader, platform.ListIn{Entity: tc.entity, Cursor: cursor, Limit: tc.limit})
				pages++
				if page.Items == nil {
					t.Fatal("items is null")
				}
				for _, it := range page.Items {
					got = append(got, it.Entity+"/"+it.ID)
					if !strings.HasPrefix(it.Title, "Lantern ") {
						t.Errorf("item %+v has no title", it)
					}
				}
				if page.NextCursor == "" {
					break
				}
				if pages > 100 {
					t.Fatal("paging does not end")
				}
				cursor = page.NextCursor
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed %d items\n%v\nwant %d\n%v", len(got), got, len(tc.want), tc.want)
			}
			if pages != tc.wantPages {
				t.Errorf("%d pages, want %d", pages, tc.wantPages)
			}
		})
	}
	t.Run("last page has no next_cursor", func(t *testing.T) {
		raw, err := e.client.Invoke(context.Background(), platform.ListName, reader, platform.ListIn{Entity: entClass, Cursor: encodeCursorRaw(entClass + "/course-class-019")})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var items []platform.Item
		if err := json.Unmarshal(m["items"], &items); err != nil || len(items) != 3 {
			t.Errorf("items %s, want the last 3", m["items"])
		}
		if _, ok := m["next_cursor"]; ok {
			t.Errorf("next_cursor present: %s", raw)
		}
	})
}

func TestDescribe(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	d, err := e.client.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range d.Capabilities {
		names = append(names, c.Name)
		if c.Pack != Pack || c.Permission != PermCatalogue || c.Kind != capgatev1.Kind_KIND_READ || c.OwnerGuarded {
			t.Errorf("capability %s: %+v", c.Name, c)
		}
		var in map[string]any
		if err := json.Unmarshal(c.InputSchema, &in); err != nil {
			t.Fatal(err)
		}
		if c.Name != platform.GetName {
			limit := in["properties"].(map[string]any)["limit"].(map[string]any)
			if !strings.Contains(limit["description"].(string), "capped to max_results") {
				t.Errorf("%s limit description %q", c.Name, limit["description"])
			}
		}
	}
	if !slices.Equal(names, []string{platform.SearchName, platform.GetName, platform.ListName}) {
		t.Errorf("capabilities %v", names)
	}
}
