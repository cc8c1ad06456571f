package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// compact is v as compact JSON, for comparing what a response held.
func compact(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestContentPerVersion renders each kind of content block, and the
// structured value beside blocks, at every revision.
func TestContentPerVersion(t *testing.T) {
	f := newRecordsFixture(t, Records{}, mcptest.WithRich())
	png := b64(string(mcptest.PNG))
	text := `{"text":"hello","type":"text"}`
	image := `{"data":"` + png + `","mimeType":"image/png","type":"image"}`
	audio := `{"data":"` + b64("RIFF") + `","mimeType":"audio/wav","type":"audio"}`
	link := `{"mimeType":"text/plain","name":"static-text","size":5,"title":"Static text","type":"resource_link","uri":"test://static-text"}`
	linkAsText := `{"text":"Resource \"Static text\" at test://static-text (text/plain)","type":"text"}`
	embedded := `{"resource":{"mimeType":"text/plain","text":"embedded","uri":"test://embedded"},"type":"resource"}`
	blob := `{"resource":{"blob":"` + png + `","mimeType":"image/png","uri":"test://blob"},"type":"resource"}`
	for _, tc := range []struct {
		tool, ver  string
		content    string // the content array, compact
		structured string // structuredContent, "" for none
	}{
		// Resource links arrived with 2025-06-18: before, they are text.
		{mcptest.RichBlocks, "", "[" + strings.Join([]string{text, image, audio, linkAsText, embedded, blob}, ",") + "]", ""},
		{mcptest.RichBlocks, Version20250326, "[" + strings.Join([]string{text, image, audio, linkAsText, embedded, blob}, ",") + "]", ""},
		{mcptest.RichBlocks, Version20250618, "[" + strings.Join([]string{text, image, audio, link, embedded, blob}, ",") + "]", ""},
		{mcptest.RichBlocks, Version20251125, "[" + strings.Join([]string{text, image, audio, link, embedded, blob}, ",") + "]", ""},
		{mcptest.RichBlocks, Version20260728, "[" + strings.Join([]string{text, image, audio, link, embedded, blob}, ",") + "]", ""},
		// The value goes where the revision can carry it: in
		// structuredContent, else as one more text block.
		{mcptest.RichBoth, Version20250326, `[{"text":"one","type":"text"},{"text":"{\"n\":1}","type":"text"}]`, ""},
		{mcptest.RichBoth, Version20250618, `[{"text":"one","type":"text"}]`, `{"n":1}`},
		{mcptest.RichBoth, Version20251125, `[{"text":"one","type":"text"}]`, `{"n":1}`},
		{mcptest.RichBoth, Version20260728, `[{"text":"one","type":"text"}]`, `{"n":1}`},
		// Only 2026-07-28 takes a structured value that is not an object.
		{mcptest.RichArray, Version20250326, `[{"text":"three","type":"text"},{"text":"[1,2,3]","type":"text"}]`, ""},
		{mcptest.RichArray, Version20250618, `[{"text":"three","type":"text"},{"text":"[1,2,3]","type":"text"}]`, ""},
		{mcptest.RichArray, Version20251125, `[{"text":"three","type":"text"},{"text":"[1,2,3]","type":"text"}]`, ""},
		{mcptest.RichArray, Version20260728, `[{"text":"three","type":"text"}]`, `[1,2,3]`},
	} {
		res := f.send(mcptest.Alice, tc.ver, rpc{method: "tools/call", id: 1, params: map[string]any{"name": tc.tool}}).result(t)
		if got := compact(t, res["content"]); got != tc.content {
			t.Errorf("%s@%s content\n got %s\nwant %s", tc.tool, tc.ver, got, tc.content)
		}
		sc, has := res["structuredContent"]
		switch {
		case tc.structured == "" && has:
			t.Errorf("%s@%s: structuredContent %v, want none", tc.tool, tc.ver, sc)
		case tc.structured != "" && compact(t, sc) != tc.structured:
			t.Errorf("%s@%s: structuredContent %v, want %s", tc.tool, tc.ver, sc, tc.structured)
		}
		if res["isError"] != false {
			t.Errorf("%s@%s: isError %v", tc.tool, tc.ver, res["isError"])
		}
	}
}

func TestPluginResourcesList(t *testing.T) {
	f := newRecordsFixture(t, Records{}, mcptest.WithRich())
	for _, ver := range allVersions {
		for _, tc := range []struct {
			p    dispatch.Principal
			uris string
		}{
			// A resource the caller may not read is not listed; one of a
			// switched-off pack is listed to no one.
			{mcptest.Alice, "test://static-binary test://static-text"},
			{mcptest.Admin, "test://secret test://static-binary test://static-text"},
		} {
			res := f.send(tc.p, ver, rpc{method: "resources/list", id: 1}).result(t)
			var uris []string
			for _, r := range res["resources"].([]any) {
				r := r.(map[string]any)
				uris = append(uris, r["uri"].(string))
				if r["uri"] == mcptest.DocsText {
					want := `{"description":"A text.","mimeType":"text/plain","name":"static-text","size":5,"title":"Static text","uri":"test://static-text"}`
					if ver == "" || ver == Version20250326 {
						want = `{"description":"A text.","mimeType":"text/plain","name":"static-text","size":5,"uri":"test://static-text"}`
					}
					if got := compact(t, r); got != want {
						t.Errorf("@%s: %s, want %s", ver, got, want)
					}
				}
			}
			if got := strings.Join(uris, " "); got != tc.uris {
				t.Errorf("%s@%s: listed %q, want %q", tc.p.Role, ver, got, tc.uris)
			}
		}
		res := f.send(mcptest.Guest, ver, rpc{method: "resources/templates/list", id: 1}).result(t)
		want := `[{"mimeType":"application/json","name":"template","title":"Data by id","uriTemplate":"test://template/{id}/data"}]`
		if ver == "" || ver == Version20250326 {
			want = `[{"description":"Data by id","mimeType":"application/json","name":"template","uriTemplate":"test://template/{id}/data"}]`
		}
		if got := compact(t, res["resourceTemplates"]); got != want {
			t.Errorf("templates@%s: %s, want %s", ver, got, want)
		}
	}
}

// TestPluginResourcesWithRecords: the plugins' resources open the first
// page of resources/list and the catalogue's records follow; the
// templates list holds both.
func TestPluginResourcesWithRecords(t *testing.T) {
	f := newRecordsFixture(t, catalogue(), mcptest.WithRecords(), mcptest.WithRich())
	pages := listAll(t, f, mcptest.Admin, Version20251125)
	var first []string
	for _, r := range pages[0] {
		first = append(first, r["uri"].(string))
	}
	want := "test://secret test://static-binary test://static-text " + recordURIs[0] + " " + recordURIs[1]
	if got := strings.Join(first, " "); got != want {
		t.Errorf("first page %q, want %q", got, want)
	}
	if n := len(pages[1]); n != 2 || strings.HasPrefix(pages[1][0]["uri"].(string), "test:") {
		t.Errorf("second page %v", pages[1])
	}
	res := f.send(mcptest.Admin, Version20251125, rpc{method: "resources/templates/list", id: 1}).result(t)
	if n := len(res["resourceTemplates"].([]any)); n != 1+len(mcptest.Entities) {
		t.Errorf("%d templates: %v", n, res)
	}
	// A guest the catalogue refuses still sees the plugin resources it
	// may read.
	res = f.send(mcptest.Guest, Version20251125, rpc{method: "resources/list", id: 1}).result(t)
	if got := compact(t, res["resources"]); !strings.Contains(got, "test://static-text") || strings.Contains(got, "capgate:") {
		t.Errorf("guest lists %s", got)
	}
	// Records are still read as before.
	res = f.send(mcptest.Admin, Version20251125, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": recordURIs[2]}}).result(t)
	if !strings.Contains(compact(t, res), "Room 1") {
		t.Errorf("record read %v", res)
	}
}

func TestPluginResourcesRead(t *testing.T) {
	f := newRecordsFixture(t, Records{}, mcptest.WithRich())
	for _, ver := range allVersions {
		notFound := codeResourceNotFound
		if ver == Version20260728 {
			notFound = codeInvalidParams
		}
		read := func(p dispatch.Principal, uri string) reply {
			return f.send(p, ver, rpc{method: "resources/read", id: 1, params: map[string]any{"uri": uri}})
		}
		for _, tc := range []struct {
			p        dispatch.Principal
			uri      string
			contents string
		}{
			{mcptest.Alice, mcptest.DocsText, `[{"mimeType":"text/plain","text":"hello","uri":"test://static-text"}]`},
			{mcptest.Guest, mcptest.DocsBinary, `[{"blob":"` + b64(string(mcptest.PNG)) + `","mimeType":"image/png","uri":"test://static-binary"}]`},
			{mcptest.Alice, "test://template/123/data", `[{"mimeType":"application/json","text":"{\"id\":\"123\",\"templateTest\":true}","uri":"test://template/123/data"}]`},
			{mcptest.Admin, mcptest.DocsSecret, `[{"text":"secret","uri":"test://secret"}]`},
		} {
			rep := read(tc.p, tc.uri)
			if got := compact(t, rep.result(t)["contents"]); got != tc.contents {
				t.Errorf("%s@%s: %s, want %s", tc.uri, ver, got, tc.contents)
			}
			if res := rep.result(t); ver == Version20260728 && (res["ttlMs"] == nil || res["cacheScope"] != "private") {
				t.Errorf("%s@%s: no caching hints: %v", tc.uri, ver, res)
			}
		}
		// What the caller may not read, what no plugin declares and what
		// the plugin finds nothing at are the same error, naming the URI.
		for _, tc := range []struct {
			p   dispatch.Principal
			uri string
		}{
			{mcptest.Alice, mcptest.DocsSecret},
			{mcptest.Admin, mcptest.DocsOff},
			{mcptest.Alice, "test://template/missing/data"},
			{mcptest.Alice, "test://template/a/b/data"},
			{mcptest.Alice, "test://nonexistent-resource-for-conformance-testing"},
			{mcptest.Alice, "capgate://booking.resource/room-1"},
		} {
			rep := read(tc.p, tc.uri)
			e := rep.errorObj(t)
			if int(e["code"].(float64)) != notFound || e["message"] != "Resource not found" || compact(t, e["data"]) != `{"uri":"`+tc.uri+`"}` {
				t.Errorf("%s by %s@%s: %s, want not found", tc.uri, tc.p.Role, ver, rep.raw)
			}
		}
		// A failure of the plugin is an internal error with a reference.
		rep := read(mcptest.Alice, mcptest.DocsBadContent)
		if e := rep.errorObj(t); int(e["code"].(float64)) != codeInternalError || strings.Contains(e["message"].(string), "store is down") {
			t.Errorf("bad@%s: %s", ver, rep.raw)
		}
		// Without catalogue records, no URI is malformed: it names nothing.
		if rep := read(mcptest.Alice, "not a uri"); rep.errorCode(t) != notFound {
			t.Errorf("malformed@%s: %s", ver, rep.raw)
		}
	}
	if !strings.Contains(f.logs.String(), "store is down") {
		t.Error("the plugin's failure is not in the log")
	}
}

// An output schema of another type than object is shown only where the
// revision allows it (2026-07-28), beside the held variant's.
func TestOutputSchemaOfAnyType(t *testing.T) {
	f := newRecordsFixture(t, Records{}, mcptest.WithRich())
	for _, ver := range allVersions {
		res := f.send(mcptest.Alice, ver, rpc{method: "tools/list", id: 1}).result(t)
		for _, tool := range res["tools"].([]any) {
			tool := tool.(map[string]any)
			if tool["name"] != mcptest.RichArray {
				continue
			}
			schema, has := tool["outputSchema"]
			switch {
			case ver == Version20260728 && compact(t, schema) != `{"items":{"type":"integer"},"type":"array"}`:
				t.Errorf("@%s: outputSchema %v", ver, schema)
			case ver != Version20260728 && has:
				t.Errorf("@%s: outputSchema %v, want none", ver, schema)
			}
		}
	}
	if got := string(heldSchema([]byte(`{"type":"array"}`))); !strings.HasPrefix(got, `{"anyOf":[{"type":"array"},`) {
		t.Errorf("held array schema %s", got)
	}
}
