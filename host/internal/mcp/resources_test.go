package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// catalogue is the Records option the host would pass for the test
// platform's catalogue.
func catalogue() Records {
	r := Records{Get: mcptest.RecordGet, List: mcptest.RecordList}
	for _, e := range mcptest.Entities {
		r.Entities = append(r.Entities, EntityType{Name: e.Name, Description: e.Description})
	}
	return r
}

// newRecordsFixture is a handler serving records over a platform built
// with opts.
func newRecordsFixture(t testing.TB, records Records, opts ...mcptest.Option) *fixture {
	t.Helper()
	f := &fixture{t: t, platform: mcptest.New(opts...), logs: &mcptest.LogBuffer{}}
	f.h = New(f.platform.Dispatcher, Options{
		Version: "1.2.3-test",
		Records: records,
		Logger:  slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	return f
}

// recordURIs are the URIs of mcptest.Records, in listing order.
var recordURIs = []string{
	"capgate://booking.resource/caf%C3%A9",
	"capgate://booking.resource/room%20a%2F2",
	"capgate://booking.resource/room-1",
	"capgate://booking.service/haircut",
	"capgate://booking.service/massage",
}

func recordAt(t testing.TB, uri string) mcptest.Record {
	t.Helper()
	i := slices.Index(recordURIs, uri)
	if i < 0 {
		t.Fatalf("no record at %s", uri)
	}
	return mcptest.Records[i]
}

func sameJSON(t testing.TB, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("not JSON: %v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

func TestResourceTemplates(t *testing.T) {
	on := []mcptest.Option{mcptest.WithRecords()}
	off := []mcptest.Option{mcptest.WithRecords(), mcptest.WithPackOff("search")}
	cases := []struct {
		name     string
		records  Records
		platform []mcptest.Option
		p        dispatch.Principal
		visible  bool
	}{
		{"admin", catalogue(), on, mcptest.Admin, true},
		{"customer action token", catalogue(), on, mcptest.Alice, true},
		{"read token", catalogue(), on, mcptest.Reader, true},
		{"unbound token reads", catalogue(), on, mcptest.Anonymous, true},
		{"role without permission", catalogue(), on, mcptest.Guest, false},
		{"pack off, admin", catalogue(), off, mcptest.Admin, false},
		{"pack off, customer", catalogue(), off, mcptest.Alice, false},
		{"get not provided", catalogue(), nil, mcptest.Admin, false},
		{"no records configured", Records{}, on, mcptest.Admin, false},
	}
	for _, tc := range cases {
		f := newRecordsFixture(t, tc.records, tc.platform...)
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				// The rule is tools/list's for Get: templates show exactly
				// when the gate would let the principal call it.
				listed := false
				for _, tool := range f.send(tc.p, ver, rpc{method: "tools/list", id: 1}).result(t)["tools"].([]any) {
					listed = listed || tool.(map[string]any)["name"] == mcptest.RecordGet
				}
				if tc.records.Get != "" && listed != tc.visible {
					t.Fatalf("tools/list shows %s: %v, want %v", mcptest.RecordGet, listed, tc.visible)
				}
				res := f.send(tc.p, ver, rpc{method: "resources/templates/list", id: 2}).result(t)
				got := res["resourceTemplates"].([]any)
				if !tc.visible {
					if len(got) != 0 {
						t.Fatalf("templates = %v, want none", got)
					}
					return
				}
				var want []any
				for _, e := range mcptest.Entities {
					want = append(want, map[string]any{
						"uriTemplate": "capgate://" + e.Name + "/{id}",
						"name":        e.Name,
						"description": e.Description,
						"mimeType":    "application/json",
					})
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("templates = %v\nwant %v", got, want)
				}
				_, hasTTL := res["ttlMs"]
				if hasTTL != (ver == Version20260728) || res["nextCursor"] != nil {
					t.Fatalf("list tail wrong at %q: %v", ver, res)
				}
			})
		}
	}
	t.Run("unknown cursor", func(t *testing.T) {
		f := newRecordsFixture(t, catalogue(), on...)
		rep := f.send(mcptest.Admin, Version20251125, rpc{method: "resources/templates/list", id: 1, params: map[string]any{"cursor": "x"}})
		if rep.errorCode(t) != codeInvalidParams {
			t.Fatalf("got %s", rep.raw)
		}
	})
}

func TestResourcesReadRecord(t *testing.T) {
	cases := []struct {
		name, uri string
		record    string // the recordURIs entry it names
	}{
		{"plain id", "capgate://booking.resource/room-1", "capgate://booking.resource/room-1"},
		{"encoded space and slash", "capgate://booking.resource/room%20a%2F2", "capgate://booking.resource/room%20a%2F2"},
		{"encoded UTF-8", "capgate://booking.resource/caf%C3%A9", "capgate://booking.resource/caf%C3%A9"},
		{"lower-case hex", "capgate://booking.resource/caf%c3%a9", "capgate://booking.resource/caf%C3%A9"},
		{"unencoded UTF-8", "capgate://booking.resource/café", "capgate://booking.resource/caf%C3%A9"},
		{"encoded unreserved", "capgate://booking.service/hair%63ut", "capgate://booking.service/haircut"},
		{"scheme is case-insensitive", "CapGate://booking.service/massage", "capgate://booking.service/massage"},
		{"other entity", "capgate://booking.service/haircut", "capgate://booking.service/haircut"},
	}
	f := newRecordsFixture(t, catalogue(), mcptest.WithRecords())
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				rep := f.send(mcptest.Reader, ver, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": tc.uri}})
				res := rep.result(t)
				contents := res["contents"].([]any)
				if len(contents) != 1 {
					t.Fatalf("contents = %v", contents)
				}
				c := contents[0].(map[string]any)
				if c["uri"] != tc.uri || c["mimeType"] != "application/json" || len(c) != 3 {
					t.Fatalf("content = %v", c)
				}
				if !sameJSON(t, []byte(c["text"].(string)), recordAt(t, tc.record).Data) {
					t.Fatalf("text = %s, want %s", c["text"], recordAt(t, tc.record).Data)
				}
				_, tail := res["resultType"]
				if tail != (ver == Version20260728) {
					t.Fatalf("resultType present=%v at %q", tail, ver)
				}
				// 2026-07-28 requires the caching hints on a read result.
				_, hasTTL := res["ttlMs"]
				if modern := ver == Version20260728; hasTTL != modern || (modern && res["cacheScope"] != "private") {
					t.Fatalf("ttlMs present=%v cacheScope=%v at %q", hasTTL, res["cacheScope"], ver)
				}
			})
		}
	}
}

func TestResourcesReadErrors(t *testing.T) {
	const notFound, malformed = 1, 2
	cases := []struct {
		name, uri string
		want      int
		msg       string // part of a malformed URI's message
	}{
		{"unknown id", "capgate://booking.resource/room-9", notFound, ""},
		{"unknown entity", "capgate://booking.person/room-1", notFound, ""},
		{"entity not offered as a resource", "capgate://booking.secret/x", notFound, ""},
		{"other scheme", "https://example.com/booking.resource/room-1", notFound, ""},
		{"the conformance suite's scheme", "test://static-text", notFound, ""},
		{"no scheme", "booking.resource/room-1", malformed, "is not an absolute URI"},
		{"absolute path", "/booking.resource/room-1", malformed, "is not an absolute URI"},
		{"empty", "", malformed, "is not an absolute URI"},
		{"no authority", "capgate:booking.resource/room-1", malformed, "is not of the form"},
		{"missing id", "capgate://booking.resource", malformed, "names no record"},
		{"empty id", "capgate://booking.resource/", malformed, "names no record"},
		{"empty entity", "capgate:///room-1", malformed, "names no record"},
		{"extra path segment", "capgate://booking.resource/room/1", malformed, "more than one path segment"},
		{"trailing slash", "capgate://booking.resource/room-1/", malformed, "more than one path segment"},
		{"query", "capgate://booking.resource/room-1?x=1", malformed, "query or fragment"},
		{"fragment", "capgate://booking.resource/room-1#top", malformed, "query or fragment"},
		{"truncated escape", "capgate://booking.resource/room%2", malformed, "percent-encoding in its id"},
		{"non-hex escape", "capgate://booking.resource/room%zz", malformed, "percent-encoding in its id"},
		{"escape is not UTF-8", "capgate://booking.resource/room%FF", malformed, "percent-encoding in its id"},
		{"bad escape in entity", "capgate://booking%2/room-1", malformed, "percent-encoding in its entity"},
	}
	f := newRecordsFixture(t, catalogue(), mcptest.WithRecords())
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				rep := f.send(mcptest.Admin, ver, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": tc.uri}})
				if rep.status != 200 {
					t.Fatalf("status %d: %s", rep.status, rep.raw)
				}
				e := rep.errorObj(t)
				code := int(e["code"].(float64))
				if tc.want == malformed {
					if code != codeInvalidParams || !contains(e["message"].(string), tc.msg) || !contains(e["message"].(string), tc.uri) {
						t.Fatalf("error = %v, want -32602 naming the uri and %q", e, tc.msg)
					}
					return
				}
				want := codeResourceNotFound
				if ver == Version20260728 {
					want = codeInvalidParams
				}
				data, _ := e["data"].(map[string]any)
				if code != want || e["message"] != "Resource not found" || data["uri"] != tc.uri {
					t.Fatalf("error = %v, want %d Resource not found with data.uri", e, want)
				}
			})
		}
	}
	// Without Get in the registry, nothing is a resource, malformed or not:
	// the answer is what it was before records existed.
	t.Run("get not provided", func(t *testing.T) {
		f := newRecordsFixture(t, catalogue())
		for _, uri := range []string{"capgate://booking.resource/room-1", "booking.resource/room-1", "capgate://x"} {
			rep := f.send(mcptest.Admin, Version20251125, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": uri}})
			if rep.errorCode(t) != codeResourceNotFound {
				t.Fatalf("%s: %s", uri, rep.raw)
			}
		}
	})
}

// TestResourcesReadRefusalParity: reading a record is calling Get, so every
// principal gets from resources/read the very error a tools/call of Get with
// the same entity and id gets, or the same record.
func TestResourcesReadRefusalParity(t *testing.T) {
	platforms := []struct {
		name string
		opts []mcptest.Option
	}{
		{"pack on", []mcptest.Option{mcptest.WithRecords()}},
		{"pack off", []mcptest.Option{mcptest.WithRecords(), mcptest.WithPackOff("search")}},
	}
	principals := []struct {
		name string
		p    dispatch.Principal
	}{
		{"no permission", mcptest.Guest},
		{"read token", mcptest.Reader},
		{"action token", mcptest.Alice},
		{"unbound token", mcptest.Anonymous},
		{"admin", mcptest.Admin},
		{"unknown scope", dispatch.Principal{Role: "admin", Scope: "root", UserID: "u-x"}},
	}
	targets := []struct{ entity, id, uri string }{
		{"booking.resource", "room a/2", "capgate://booking.resource/room%20a%2F2"},
		{"booking.service", "nope", "capgate://booking.service/nope"},
		// Not an entity type offered as a resource: not found for whom the
		// gate admits, the gate's refusal for everyone else.
		{"booking.secret", "x", "capgate://booking.secret/x"},
	}
	type errorOnly struct {
		ID    json.RawMessage `json:"id"`
		Error json.RawMessage `json:"error"`
	}
	refusals := 0
	for _, pl := range platforms {
		f := newRecordsFixture(t, catalogue(), pl.opts...)
		for _, pr := range principals {
			for _, tg := range targets {
				for _, ver := range allVersions {
					t.Run(pl.name+"/"+pr.name+"/"+tg.id+"@"+ver, func(t *testing.T) {
						call := f.send(pr.p, ver, rpc{method: "tools/call", id: 1, params: map[string]any{
							"name": mcptest.RecordGet, "arguments": map[string]any{"entity": tg.entity, "id": tg.id}}})
						read := f.send(pr.p, ver, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": tg.uri}})
						if call.status != read.status {
							t.Fatalf("status: call %d, read %d", call.status, read.status)
						}
						var ce, re errorOnly
						_ = json.Unmarshal(call.raw, &ce)
						_ = json.Unmarshal(read.raw, &re)
						notFound := codeResourceNotFound
						if ver == Version20260728 {
							notFound = codeInvalidParams
						}
						if ce.Error != nil && call.errorCode(t) == codeInvalidParams {
							// The pack is off: the tool is an unknown name,
							// and its resources do not exist either.
							if !strings.Contains(string(ce.Error), "unknown tool") || read.errorCode(t) != notFound {
								t.Fatalf("tools/call error %s\nresources/read error %s; want unknown and not found", ce.Error, re.Error)
							}
							return
						}
						if ce.Error != nil {
							refusals++
							if string(re.Error) != string(ce.Error) || string(re.ID) != string(ce.ID) {
								t.Fatalf("tools/call error %s\nresources/read error %s", ce.Error, re.Error)
							}
							if code := call.errorCode(t); code != codeForbidden {
								t.Fatalf("tools/call code %d", code)
							}
							return
						}
						res := call.result(t)
						if res["isError"] == true {
							// A missing record: a tool error for tools/call,
							// the revision's resource-not-found for a read.
							want := codeResourceNotFound
							if ver == Version20260728 {
								want = codeInvalidParams
							}
							if read.errorCode(t) != want {
								t.Fatalf("read of missing record: %s", read.raw)
							}
							return
						}
						var out struct{ Record json.RawMessage }
						if err := json.Unmarshal([]byte(toolText(t, res)), &out); err != nil {
							t.Fatal(err)
						}
						text := read.result(t)["contents"].([]any)[0].(map[string]any)["text"].(string)
						if !sameJSON(t, []byte(text), out.Record) {
							t.Fatalf("read %s, call %s", text, out.Record)
						}
					})
				}
			}
		}
	}
	if refusals == 0 {
		t.Fatal("the matrix reached no refusal")
	}
}

// listAll walks resources/list through nextCursor and returns the pages.
func listAll(t *testing.T, f *fixture, p dispatch.Principal, ver string) [][]map[string]any {
	t.Helper()
	var pages [][]map[string]any
	var cursor any
	for range 10 {
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = cursor
		}
		res := f.send(p, ver, rpc{method: "resources/list", id: len(pages) + 1, params: params}).result(t)
		var page []map[string]any
		for _, r := range res["resources"].([]any) {
			page = append(page, r.(map[string]any))
		}
		pages = append(pages, page)
		_, hasTTL := res["ttlMs"]
		if hasTTL != (ver == Version20260728) {
			t.Fatalf("ttlMs present=%v at %q", hasTTL, ver)
		}
		next, ok := res["nextCursor"]
		if !ok {
			return pages
		}
		if s, _ := next.(string); s == "" {
			t.Fatalf("nextCursor = %v", next)
		}
		cursor = next
	}
	t.Fatal("resources/list did not end in 10 pages")
	return nil
}

func TestResourcesList(t *testing.T) {
	servicesOnly := catalogue()
	servicesOnly.Entities = servicesOnly.Entities[1:]
	cases := []struct {
		name     string
		records  Records
		platform []mcptest.Option
		p        dispatch.Principal
		pages    []int    // resources per page
		uris     []string // all listed, in order
	}{
		{"admin", catalogue(), []mcptest.Option{mcptest.WithRecords()}, mcptest.Admin, []int{2, 2, 1}, recordURIs},
		{"read token", catalogue(), []mcptest.Option{mcptest.WithRecords()}, mcptest.Reader, []int{2, 2, 1}, recordURIs},
		{"no permission", catalogue(), []mcptest.Option{mcptest.WithRecords()}, mcptest.Guest, []int{0}, nil},
		{"pack off", catalogue(), []mcptest.Option{mcptest.WithRecords(), mcptest.WithPackOff("search")}, mcptest.Admin, []int{0}, nil},
		{"list not provided", catalogue(), nil, mcptest.Admin, []int{0}, nil},
		{"no records configured", Records{}, []mcptest.Option{mcptest.WithRecords()}, mcptest.Admin, []int{0}, nil},
		// Items of entity types not offered are left out, so a page may
		// be empty and still have a next one.
		{"entity types filter", servicesOnly, []mcptest.Option{mcptest.WithRecords()}, mcptest.Admin, []int{0, 1, 1}, recordURIs[3:]},
	}
	for _, tc := range cases {
		f := newRecordsFixture(t, tc.records, tc.platform...)
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				pages := listAll(t, f, tc.p, ver)
				var sizes []int
				var uris []string
				for _, page := range pages {
					sizes = append(sizes, len(page))
					for _, r := range page {
						uri := r["uri"].(string)
						uris = append(uris, uri)
						rec := recordAt(t, uri)
						want := map[string]any{"uri": uri, "name": rec.ID, "mimeType": "application/json"}
						if ver == Version20250326 || ver == "" {
							want["description"] = rec.Title
						} else {
							want["title"] = rec.Title
						}
						if !reflect.DeepEqual(r, want) {
							t.Fatalf("resource = %v, want %v", r, want)
						}
					}
				}
				if !slices.Equal(sizes, tc.pages) || !slices.Equal(uris, tc.uris) {
					t.Fatalf("pages %v of %v, want %v of %v", sizes, uris, tc.pages, tc.uris)
				}
				// Every listed resource reads back as its record.
				for _, uri := range uris {
					res := f.send(tc.p, ver, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": uri}}).result(t)
					text := res["contents"].([]any)[0].(map[string]any)["text"].(string)
					if !sameJSON(t, []byte(text), recordAt(t, uri).Data) {
						t.Fatalf("%s reads %s", uri, text)
					}
				}
			})
		}
	}
}

func TestResourcesListCursor(t *testing.T) {
	cases := []struct {
		name     string
		p        dispatch.Principal
		cursor   any
		code     int
		resource int // resources on the page when no error
	}{
		{"valid cursor", mcptest.Admin, "o2", 0, 2},
		{"empty cursor is the first page", mcptest.Admin, "", 0, 2},
		{"null cursor is the first page", mcptest.Admin, nil, 0, 2},
		{"cursor the capability rejects", mcptest.Admin, "bogus", codeInvalidParams, 0},
		{"cursor past the end", mcptest.Admin, "o99", codeInvalidParams, 0},
		{"cursor not a string", mcptest.Admin, 2, codeInvalidParams, 0},
		// The gate answers before the capability sees the cursor.
		{"refused principal, bad cursor", mcptest.Guest, "bogus", 0, 0},
	}
	f := newRecordsFixture(t, catalogue(), mcptest.WithRecords())
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				rep := f.send(tc.p, ver, rpc{method: "resources/list", id: 1, params: map[string]any{"cursor": tc.cursor}})
				if tc.code != 0 {
					if got := rep.errorCode(t); got != tc.code {
						t.Fatalf("code = %d, want %d: %s", got, tc.code, rep.raw)
					}
					return
				}
				if n := len(rep.result(t)["resources"].([]any)); n != tc.resource {
					t.Fatalf("%d resources, want %d: %s", n, tc.resource, rep.raw)
				}
			})
		}
	}
}

// rawCatalogue is a provider whose platform.get and platform.list return
// whatever a test sets, to see the adapter meet a misbehaving plugin (the
// registry here states no output schema, so nothing else checks it).
type rawCatalogue struct {
	out   json.RawMessage
	err   error
	panic bool
}

func (c rawCatalogue) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	if c.panic {
		panic("catalogue exploded")
	}
	return c.out, c.err
}

func newRawCatalogue(t *testing.T, prov rawCatalogue) (*Handler, *mcptest.LogBuffer) {
	t.Helper()
	reg := registry.New([]string{"search"})
	for _, name := range []string{mcptest.RecordGet, mcptest.RecordList} {
		if err := reg.Add(registry.Capability{Name: name, Kind: registry.Read, InputSchema: json.RawMessage(`{"type":"object"}`),
			Pack: "search", Permission: "catalogue.read", Plugin: "cat"}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"search": true}, Roles: map[string][]string{"admin": {"*"}}},
		map[string]dispatch.Provider{"cat": prov})
	if err != nil {
		t.Fatal(err)
	}
	logs := &mcptest.LogBuffer{}
	return New(d, Options{Records: catalogue(), Logger: slogTo(logs)}), logs
}

// TestResourcesProviderFailures: what is not a refusal, a missing record or
// the caller's mistake is -32603 with a reference the log also carries,
// never the cause; a tool error the caller can act on is -32602 with its
// message.
func TestResourcesProviderFailures(t *testing.T) {
	const secret = "dial tcp 10.0.0.1: secret-dsn"
	read := rpc{method: "resources/read", id: 1, params: map[string]any{"uri": "capgate://booking.service/haircut"}}
	list := rpc{method: "resources/list", id: 1}
	cases := []struct {
		name string
		prov rawCatalogue
		msg  rpc
		code int
		text string // part of the error message
	}{
		{"read: plugin error", rawCatalogue{err: errors.New(secret)}, read, codeInternalError, "internal error while running platform.get (reference "},
		{"read: plugin panics", rawCatalogue{panic: true}, read, codeInternalError, "internal error while running platform.get (reference "},
		{"read: timeout", rawCatalogue{err: fmt.Errorf("%s: %w", secret, context.DeadlineExceeded)}, read, codeInternalError, "did not finish within the time limit"},
		{"read: no record", rawCatalogue{out: json.RawMessage(`{"entity":"booking.service","id":"haircut"}`)}, read, codeInternalError, "(reference "},
		{"read: record not an object", rawCatalogue{out: json.RawMessage(`{"record":[1]}`)}, read, codeInternalError, "(reference "},
		{"read: not JSON", rawCatalogue{out: json.RawMessage(`{"record":`)}, read, codeInternalError, "(reference "},
		{"read: null record", rawCatalogue{out: json.RawMessage(`{"entity":"booking.service","id":"haircut","record":null}`)}, read, codeInternalError, "(reference "},
		{"read: not an object", rawCatalogue{out: json.RawMessage(`[{"record":{}}]`)}, read, codeInternalError, "(reference "},
		{"read: conflict", rawCatalogue{err: &dispatch.ToolError{Code: dispatch.Conflict, Message: "record is being rebuilt"}}, read, codeInvalidParams, "invalid params: record is being rebuilt"},
		{"list: plugin error", rawCatalogue{err: errors.New(secret)}, list, codeInternalError, "internal error while running platform.list (reference "},
		{"list: no items", rawCatalogue{out: json.RawMessage(`{}`)}, list, codeInternalError, "(reference "},
		{"list: null items", rawCatalogue{out: json.RawMessage(`{"items":null}`)}, list, codeInternalError, "(reference "},
		{"list: item without entity", rawCatalogue{out: json.RawMessage(`{"items":[{"id":"a"}]}`)}, list, codeInternalError, "(reference "},
		{"list: item not an object", rawCatalogue{out: json.RawMessage(`{"items":["a"]}`)}, list, codeInternalError, "(reference "},
		{"list: item without id", rawCatalogue{out: json.RawMessage(`{"items":[{"entity":"booking.service"}]}`)}, list, codeInternalError, "(reference "},
		{"list: empty id", rawCatalogue{out: json.RawMessage(`{"items":[{"entity":"booking.service","id":""}]}`)}, list, codeInternalError, "(reference "},
		{"list: title not a string", rawCatalogue{out: json.RawMessage(`{"items":[{"entity":"booking.service","id":"a","title":1}]}`)}, list, codeInternalError, "(reference "},
		{"list: cursor not a string", rawCatalogue{out: json.RawMessage(`{"items":[],"next_cursor":7}`)}, list, codeInternalError, "(reference "},
		{"list: not JSON", rawCatalogue{out: json.RawMessage(`{"items":[`)}, list, codeInternalError, "(reference "},
	}
	for _, tc := range cases {
		for _, ver := range []string{Version20251125, Version20260728} {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				h, logs := newRawCatalogue(t, tc.prov)
				f := &fixture{t: t, h: h, logs: logs}
				rep := f.send(mcptest.Admin, ver, tc.msg)
				e := rep.errorObj(t)
				msg, _ := e["message"].(string)
				if int(e["code"].(float64)) != tc.code || !contains(msg, tc.text) || contains(string(rep.raw), "secret-dsn") {
					t.Fatalf("error = %v, want %d with %q and no cause", e, tc.code, tc.text)
				}
				if tc.code == codeInternalError {
					ref := msg[strings.LastIndex(msg, "reference ")+len("reference ") : len(msg)-1]
					if !contains(logs.String(), `"correlation_id":"`+ref+`"`) {
						t.Fatalf("reference %s not in log %s", ref, logs.String())
					}
				}
			})
		}
	}
}

// TestResourcesListOutputShape: empty pages, a null cursor and escapes in
// what the plugin returns all come out as valid resources.
func TestResourcesListOutputShape(t *testing.T) {
	h, logs := newRawCatalogue(t, rawCatalogue{out: json.RawMessage(
		` {"items":[ {"title":"T\u00e9 \"q\"","id":"a b","entity":"booking.service","extra":{"x":[1]}} , {"entity":"other","id":"z"} ],"next_cursor":null} `)})
	f := &fixture{t: t, h: h, logs: logs}
	res := f.send(mcptest.Admin, Version20251125, rpc{method: "resources/list", id: 1}).result(t)
	want := []any{map[string]any{"uri": "capgate://booking.service/a%20b", "name": "a b", "title": `Té "q"`, "mimeType": "application/json"}}
	if !reflect.DeepEqual(res["resources"], want) || res["nextCursor"] != nil {
		t.Fatalf("result = %v", res)
	}
}

// TestResourcesReadRecordText: a record reads as the provider's JSON
// object, its numbers exactly as written and its text unescaped.
func TestResourcesReadRecordText(t *testing.T) {
	h, logs := newRawCatalogue(t, rawCatalogue{out: json.RawMessage(
		`{"entity":"booking.service","id":"haircut","record":{"price":12345678901234567890.10,"note":"<b> & \u00e9","n":[1e400]}}`)})
	f := &fixture{t: t, h: h, logs: logs}
	res := f.send(mcptest.Admin, Version20251125, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": "capgate://booking.service/haircut"}}).result(t)
	text := res["contents"].([]any)[0].(map[string]any)["text"].(string)
	if want := `{"n":[1e400],"note":"<b> & é","price":12345678901234567890.10}`; text != want {
		t.Fatalf("text = %s, want %s", text, want)
	}
}

// FuzzRecordURI: whatever the entity and id, the URI resources/list
// renders parses back to them.
func FuzzRecordURI(f *testing.F) {
	f.Add("booking.resource", "room a/2")
	f.Add("e", "café?#%")
	f.Add("a/b", "%2F")
	f.Fuzz(func(t *testing.T, entity, id string) {
		if entity == "" || id == "" || !utf8.ValidString(entity) || !utf8.ValidString(id) {
			return
		}
		uri := recordPrefix + escapeSegment(entity) + "/" + escapeSegment(id)
		e, i, ours, msg := parseRecordURI(uri)
		if !ours || msg != "" || e != entity || i != id {
			t.Fatalf("%q parsed to %q %q %v %q", uri, e, i, ours, msg)
		}
	})
}
