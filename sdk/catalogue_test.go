package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// shelfSize is enough books that a page can be clamped to the contract's
// 1000.
const shelfSize = 1500

// bookID is the id of the i-th book (from 1), sorting as the books do.
func bookID(i int) string { return fmt.Sprintf("b%04d", i) }

func bookDoc(id string) sdk.Document {
	return sdk.Document{ID: id, Title: "Book " + id, Body: "the text of " + id, Fields: map[string]string{"shelf": "A"}}
}

// shelf is a provider of shelfSize "shelf.book" documents and of a
// "shelf.broken" entity type whose functions panic or fail. Its List
// records the limits it was asked for.
type shelf struct {
	ids    []string
	limits chan int
}

func newShelf() (*sdk.Plugin, *shelf) {
	s := &shelf{limits: make(chan int, 100)}
	for i := 1; i <= shelfSize; i++ {
		s.ids = append(s.ids, bookID(i))
	}
	p := sdk.New("shelf", "1.0.0")
	p.ProvideEntity(sdk.Entity{
		Name: "shelf.book", Description: "a book on the shelf", Version: "3",
		Source: sdk.EntityFuncs{List: func(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
			s.limits <- limit
			i := sort.SearchStrings(s.ids, after)
			if i < len(s.ids) && s.ids[i] == after {
				i++
			}
			var docs []sdk.Document
			for _, id := range s.ids[i:min(len(s.ids), i+limit)] {
				docs = append(docs, bookDoc(id))
			}
			return docs, nil
		},
			Get: func(ctx context.Context, ids []string) ([]sdk.Document, error) {
				var docs []sdk.Document
				for _, id := range ids {
					if _, ok := slices.BinarySearch(s.ids, id); ok {
						docs = append(docs, bookDoc(id))
					}
				}
				return docs, nil
			},
			GetRecord: func(ctx context.Context, id string) (any, error) {
				switch id {
				case "scalar":
					return "just a string", nil
				case "array":
					return []string{"a"}, nil
				case "null":
					return nil, nil
				case "unencodable":
					return map[string]any{"c": make(chan int)}, nil
				case "fail":
					return nil, errors.New("disk on fire")
				case "boom":
					panic("record bug")
				case "raw":
					return json.RawMessage(`  {"raw": true}`), nil
				}
				if _, ok := slices.BinarySearch(s.ids, id); !ok {
					return nil, sdk.NotFound("no book %q", id)
				}
				return map[string]any{"id": id, "title": "Book " + id, "pages": 300}, nil
			}},
	})
	p.ProvideEntity(sdk.Entity{
		Name: "shelf.broken",
		Source: sdk.EntityFuncs{
			List: func(context.Context, string, int) ([]sdk.Document, error) { panic("list bug") },
			Get:  func(context.Context, []string) ([]sdk.Document, error) { return nil, errors.New("index corrupt") },
			GetRecord: func(context.Context, string) (any, error) {
				panic("record bug")
			},
		},
	})
	return p, s
}

func TestDocumentsPaging(t *testing.T) {
	p, s := newShelf()
	c := sdktest.Start(t, p, nil)
	ctx := context.Background()
	tests := []struct {
		name        string
		after       string
		limit       int
		first, last int // book numbers; 0, 0 for an empty page
		more        bool
		asked       int // the limit List sees: one more than the page
	}{
		{"limit 0 is the default 500", "", 0, 1, 500, true, 501},
		{"negative is the default", "", -5, 1, 500, true, 501},
		{"small page", "", 3, 1, 3, true, 4},
		{"limit 1000 is allowed", "", 1000, 1, 1000, true, 1001},
		{"over 1000 is clamped", "", 5000, 1, 1000, true, 1001},
		{"after a cursor", bookID(10), 5, 11, 15, true, 6},
		{"after an id that does not exist", bookID(10) + "x", 2, 11, 12, true, 3},
		{"page ends exactly at the last", bookID(1000), 500, 1001, 1500, false, 501},
		{"one short of the last", bookID(1000), 499, 1001, 1499, true, 500},
		{"one more than what is left", bookID(1000), 501, 1001, 1500, false, 502},
		{"the last one", bookID(1499), 1, 1500, 1500, false, 2},
		{"after the last", bookID(1500), 10, 0, 0, false, 11},
		{"after everything", "zzz", 0, 0, 0, false, 501},
		{"whole shelf from the middle", bookID(500), 0, 501, 1000, true, 501},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, more, err := c.Documents(ctx, "shelf.book", tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if asked := <-s.limits; asked != tc.asked {
				t.Errorf("List asked for %d; want %d", asked, tc.asked)
			}
			var want []string
			if tc.first > 0 {
				for i := tc.first; i <= tc.last; i++ {
					want = append(want, bookID(i))
				}
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.ID)
			}
			if !slices.Equal(got, want) || more != tc.more {
				t.Fatalf("page of %d (%s..), more %v; want %d (%v..%v), more %v",
					len(got), first(got), more, len(want), first(want), last(want), tc.more)
			}
		})
	}

	// Walking the pages visits every document once, in order.
	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > shelfSize {
			t.Fatal("paging does not end")
		}
		docs, more, err := c.Documents(ctx, "shelf.book", after, 400)
		<-s.limits
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			seen = append(seen, d.ID)
		}
		if !more {
			break
		}
		after = docs[len(docs)-1].ID
	}
	if !slices.Equal(seen, s.ids) {
		t.Errorf("walking the pages saw %d documents; want each of the %d once, in order", len(seen), len(s.ids))
	}
}

func first(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[0]
}

func last(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[len(xs)-1]
}

func TestDocumentsCarryTheirText(t *testing.T) {
	p, _ := newShelf()
	c := sdktest.Start(t, p, nil)
	docs, _, err := c.Documents(context.Background(), "shelf.book", "", 1)
	if err != nil || len(docs) != 1 {
		t.Fatalf("documents = %v, %v", docs, err)
	}
	d := docs[0]
	if d.ID != "b0001" || d.Title != "Book b0001" || d.Body != "the text of b0001" || d.Fields["shelf"] != "A" || len(d.Fields) != 1 {
		t.Errorf("document = %v", d)
	}
}

func TestDocumentsByID(t *testing.T) {
	p, s := newShelf()
	c := sdktest.Start(t, p, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"all exist", []string{"b0002", "b0001"}, []string{"b0001", "b0002"}},
		{"missing are left out", []string{"b0003", "nope", "b9999", "b1500"}, []string{"b0003", "b1500"}},
		{"none exist", []string{"nope"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := c.DocumentsByID(ctx, "shelf.book", tc.ids...)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.ID)
			}
			slices.Sort(got) // Get may answer in any order
			if !slices.Equal(got, tc.want) {
				t.Errorf("documents %v; want %v", got, tc.want)
			}
		})
	}
	select {
	case l := <-s.limits:
		t.Errorf("a request by ids reached List (limit %d)", l)
	default:
	}
}

func TestRecord(t *testing.T) {
	p, _ := newShelf()
	c := sdktest.Start(t, p, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		id   string
		want string     // the record, for a success
		code codes.Code // the gRPC error code, for an internal failure
		tool *sdk.Error // the tool error, for a NotFound
	}{
		{id: "b0042", want: `{"id":"b0042","pages":300,"title":"Book b0042"}`},
		{id: "raw", want: `{"raw":true}`},
		{id: "b9999", tool: &sdk.Error{Code: sdk.CodeNotFound, Message: `no book "b9999"`}},
		{id: "scalar", code: codes.Internal},
		{id: "array", code: codes.Internal},
		{id: "null", code: codes.Internal},
		{id: "unencodable", code: codes.Internal},
		{id: "fail", code: codes.Internal},
		{id: "boom", code: codes.Internal},
	} {
		t.Run(tc.id, func(t *testing.T) {
			rec, err := c.Record(ctx, "shelf.book", tc.id)
			var te *sdk.Error
			errors.As(err, &te)
			switch {
			case tc.want != "":
				if err != nil || string(rec) != tc.want {
					t.Fatalf("record = %s, %v; want %s", rec, err, tc.want)
				}
				var obj map[string]any
				if err := json.Unmarshal(rec, &obj); err != nil {
					t.Fatalf("record %s is not a JSON object: %v", rec, err)
				}
			case tc.tool != nil:
				if te == nil || *te != *tc.tool {
					t.Fatalf("record = %s, %v; want tool error %v", rec, err, tc.tool)
				}
			default:
				if te != nil || status.Code(err) != tc.code {
					t.Fatalf("record = %s, %v; want %v", rec, err, tc.code)
				}
			}
		})
	}
	// The plugin survived the panic.
	if rec, err := c.Record(ctx, "shelf.book", "b0001"); err != nil || len(rec) == 0 {
		t.Errorf("after a panic: %s, %v", rec, err)
	}
}

func TestCatalogueFailures(t *testing.T) {
	p, _ := newShelf()
	c := sdktest.Start(t, p, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
	}{
		{"documents of an unknown entity", func() error { _, _, err := c.Documents(ctx, "shelf.nope", "", 0); return err }, codes.NotFound},
		{"documents by id of an unknown entity", func() error { _, err := c.DocumentsByID(ctx, "shelf.nope", "b0001"); return err }, codes.NotFound},
		{"record of an unknown entity", func() error { _, err := c.Record(ctx, "shelf.nope", "b0001"); return err }, codes.NotFound},
		{"panicking List", func() error { _, _, err := c.Documents(ctx, "shelf.broken", "", 0); return err }, codes.Internal},
		{"failing Get", func() error { _, err := c.DocumentsByID(ctx, "shelf.broken", "x"); return err }, codes.Internal},
		{"panicking Record", func() error { _, err := c.Record(ctx, "shelf.broken", "x"); return err }, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != tc.code {
				t.Fatalf("err = %v; want %v", err, tc.code)
			}
		})
	}
	// The plugin survived the panics.
	if docs, err := c.DocumentsByID(ctx, "shelf.book", "b0001"); err != nil || len(docs) != 1 {
		t.Errorf("after the panics: %v, %v", docs, err)
	}
}

// TestCallsBeforeConfigure talks to the server as a host that skipped
// Configure would: every call is refused.
func TestCallsBeforeConfigure(t *testing.T) {
	p, _ := newShelf()
	started := false
	p.OnStart(func(context.Context, sdk.Env, sdk.Start) error { started = true; return nil })
	srv := sdkserver.NewServer(p)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"documents", func() error {
			_, err := srv.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "shelf.book"})
			return err
		}},
		{"documents by id", func() error {
			_, err := srv.Documents(ctx, &capgatev1.DocumentsRequest{Entity: "shelf.book", Ids: []string{"b0001"}})
			return err
		}},
		{"record", func() error {
			_, err := srv.Record(ctx, &capgatev1.RecordRequest{Entity: "shelf.book", Id: "b0001"})
			return err
		}},
		{"unknown entity", func() error {
			_, err := srv.Record(ctx, &capgatev1.RecordRequest{Entity: "shelf.nope", Id: "b0001"})
			return err
		}},
		{"start", func() error { _, err := srv.Start(ctx, &capgatev1.StartRequest{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("err = %v; want FailedPrecondition", err)
			}
		})
	}
	if started {
		t.Error("OnStart ran before Configure")
	}
}
