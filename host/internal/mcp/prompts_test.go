package mcp

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
)

// noScope holds no scope the gate knows, so it passes no step.
var noScope = dispatch.Principal{Role: "customer", Scope: "none", UserID: "u-alice"}

func promptsFixture(t testing.TB) *fixture {
	return newRecordsFixture(t, catalogue(), mcptest.WithRecords(), mcptest.WithRich(), mcptest.WithPrompts())
}

func capabilitiesOf(t *testing.T, f *fixture, ver string) map[string]any {
	t.Helper()
	if ver == Version20260728 {
		return f.send(mcptest.Alice, ver, rpc{method: "server/discover", id: 1}).result(t)["capabilities"].(map[string]any)
	}
	return f.send(mcptest.Alice, ver, rpc{method: "initialize", id: 1, params: map[string]any{"protocolVersion": ver}}).result(t)["capabilities"].(map[string]any)
}

// TestPromptCapabilities: prompts and completions are declared exactly
// when there is something to ask for.
func TestPromptCapabilities(t *testing.T) {
	bare := newFixture(t, Options{})
	full := promptsFixture(t)
	records := newRecordsFixture(t, catalogue(), mcptest.WithRecords())
	for _, ver := range []string{Version20250326, Version20250618, Version20251125, Version20260728} {
		c := capabilitiesOf(t, bare, ver)
		if _, has := c["prompts"]; has {
			t.Errorf("@%s: prompts declared with none registered", ver)
		}
		if _, has := c["completions"]; has {
			t.Errorf("@%s: completions declared with nothing to complete", ver)
		}
		c = capabilitiesOf(t, full, ver)
		if compact(t, c["prompts"]) != `{"listChanged":false}` || compact(t, c["completions"]) != `{}` {
			t.Errorf("@%s: capabilities %v", ver, c)
		}
		c = capabilitiesOf(t, records, ver)
		if _, has := c["prompts"]; has || compact(t, c["completions"]) != `{}` {
			t.Errorf("@%s with records alone: %v", ver, c)
		}
	}
}

func TestPromptsList(t *testing.T) {
	f := promptsFixture(t)
	greet := `{"arguments":[{"description":"whom to greet","name":"who","required":true,"title":"Who"},{"description":"how","name":"mood","required":false}],"description":"Greet someone.","name":"docs.greet","title":"Greet"}`
	greetOld := `{"arguments":[{"description":"whom to greet","name":"who","required":true},{"description":"how","name":"mood","required":false}],"description":"Greet someone.","name":"docs.greet"}`
	secret := `{"arguments":[],"description":"A secret.","name":"docs.secret_prompt"}`
	for _, ver := range allVersions {
		want := greet
		if ver == "" || ver == Version20250326 {
			want = greetOld
		}
		for _, tc := range []struct {
			p    dispatch.Principal
			want string
		}{
			// A prompt the caller may not get is not listed; one of a
			// switched-off pack is listed to no one.
			{mcptest.Alice, "[" + want + "]"},
			{mcptest.Reader, "[" + want + "]"},
			{mcptest.Admin, "[" + want + "," + secret + "]"},
		} {
			res := f.send(tc.p, ver, rpc{method: "prompts/list", id: 1}).result(t)
			if got := compact(t, res["prompts"]); got != tc.want {
				t.Errorf("%s@%s:\n got %s\nwant %s", tc.p.Role, ver, got, tc.want)
			}
			if _, has := res["ttlMs"]; has != (ver == Version20260728) || (ver == Version20260728 && res["cacheScope"] != "private") {
				t.Errorf("%s@%s: caching hints %v", tc.p.Role, ver, res)
			}
		}
		if r := f.send(mcptest.Alice, ver, rpc{method: "prompts/list", id: 1, params: map[string]any{"cursor": "x"}}); r.errorCode(t) != codeInvalidParams {
			t.Errorf("@%s: a cursor was accepted", ver)
		}
	}
}

func TestPromptsGet(t *testing.T) {
	f := promptsFixture(t)
	for _, ver := range allVersions {
		res := f.send(mcptest.Alice, ver, rpc{method: "prompts/get", id: 1, params: map[string]any{
			"name": mcptest.PromptGreet, "arguments": map[string]any{"who": "bob", "mood": "warm"}}}).result(t)
		want := `[{"content":{"text":"Greet bob (warm)","type":"text"},"role":"user"},` +
			`{"content":{"resource":{"mimeType":"text/plain","text":"card","uri":"test://card"},"type":"resource"},"role":"user"},` +
			`{"content":{"data":"` + b64(string(mcptest.PNG)) + `","mimeType":"image/png","type":"image"},"role":"assistant"}]`
		if got := compact(t, res["messages"]); got != want {
			t.Errorf("@%s:\n got %s\nwant %s", ver, got, want)
		}
		if res["description"] != "A greeting for bob" {
			t.Errorf("@%s: description %v", ver, res["description"])
		}
		if _, has := res["ttlMs"]; has {
			t.Errorf("@%s: a rendering is not a cacheable list", ver)
		}
	}
}

// TestPromptsGetUnknownAndInvisible: a prompt the caller may not get is
// answered exactly as one that does not exist, so a token cannot learn
// that it does.
func TestPromptsGetUnknownAndInvisible(t *testing.T) {
	f := promptsFixture(t)
	for _, ver := range allVersions {
		errOf := func(p dispatch.Principal, name string) string {
			r := f.send(p, ver, rpc{method: "prompts/get", id: 1, params: map[string]any{"name": name}})
			return strings.ReplaceAll(compact(t, r.errorObj(t)), name, "NAME")
		}
		unknown := errOf(mcptest.Alice, "docs.nothing")
		if !strings.Contains(unknown, `"code":-32602`) || !strings.Contains(unknown, `unknown prompt \"NAME\"`) {
			t.Fatalf("@%s: unknown prompt answered %s", ver, unknown)
		}
		for _, tc := range []struct {
			p    dispatch.Principal
			name string
		}{{mcptest.Alice, mcptest.PromptSecret}, {mcptest.Admin, mcptest.PromptOff}, {noScope, mcptest.PromptGreet}} {
			if got := errOf(tc.p, tc.name); got != unknown {
				t.Errorf("%s@%s %s: %s, want %s", tc.p.Role, ver, tc.name, got, unknown)
			}
			r := f.send(tc.p, ver, rpc{method: "completion/complete", id: 1, params: map[string]any{
				"ref": map[string]any{"type": "ref/prompt", "name": tc.name}, "argument": map[string]any{"name": "who", "value": ""}}})
			if got := strings.ReplaceAll(compact(t, r.errorObj(t)), tc.name, "NAME"); got != unknown {
				t.Errorf("complete %s@%s %s: %s, want %s", tc.p.Role, ver, tc.name, got, unknown)
			}
		}
	}
	if r := f.send(mcptest.Admin, Version20251125, rpc{method: "prompts/get", id: 1, params: map[string]any{"name": mcptest.PromptSecret}}); r.msg["error"] != nil {
		t.Fatalf("admin refused the secret prompt: %s", r.raw)
	}
}

func TestPromptsGetFailures(t *testing.T) {
	f := promptsFixture(t)
	for _, tc := range []struct {
		params map[string]any
		code   int
		want   string
	}{
		{map[string]any{}, codeInvalidParams, "prompts/get needs params.name"},
		{map[string]any{"name": 7}, codeInvalidParams, "prompts/get needs params.name"},
		{map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": 1}}, codeInvalidParams, "an object of strings"},
		{map[string]any{"name": mcptest.PromptGreet}, codeInvalidParams, `needs argument \"who\"`},
		{map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": "x", "zz": "y"}}, codeInvalidParams, `takes no argument \"zz\"`},
		{map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": strings.Repeat("x", 21)}}, codeInvalidParams, "more than its limit of 20"},
		{map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": "nobody"}}, codeInvalidParams, "no one called nobody"},
		{map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": "crash"}}, codeInternalError, "(reference "},
	} {
		r := f.send(mcptest.Alice, Version20251125, rpc{method: "prompts/get", id: 1, params: tc.params})
		if got := compact(t, r.errorObj(t)); r.errorCode(t) != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("%v: %s, want code %d with %q", tc.params, got, tc.code, tc.want)
		}
		if strings.Contains(string(r.raw), "secret-dsn") {
			t.Errorf("%v: the cause reached the caller: %s", tc.params, r.raw)
		}
	}
	if !strings.Contains(f.logs.String(), "secret-dsn") {
		t.Error("the internal failure was not logged")
	}
}

// TestPromptsGetModernHeaders: at 2026-07-28 Mcp-Name carries the prompt's
// name and must match params.name.
func TestPromptsGetModernHeaders(t *testing.T) {
	f := promptsFixture(t)
	m := rpc{method: "prompts/get", id: 1, params: map[string]any{"name": mcptest.PromptGreet, "arguments": map[string]any{"who": "bob"}}}
	for _, tc := range []struct {
		name string // the Mcp-Name header; "-" for none
		ok   bool
	}{{mcptest.PromptGreet, true}, {"-", false}, {"docs.other", false}} {
		h := m.headers(Version20260728)
		if tc.name == "-" {
			h.Del("Mcp-Name")
		} else {
			h.Set("Mcp-Name", tc.name)
		}
		r := f.do(mcptest.Alice, "POST", h, m.encode(Version20260728))
		if ok := r.msg["error"] == nil; ok != tc.ok || (!ok && (r.status != 400 || r.errorCode(t) != codeHeaderMismatch)) {
			t.Errorf("Mcp-Name %q: status %d %s", tc.name, r.status, r.raw)
		}
	}
}

func TestCompletionComplete(t *testing.T) {
	f := promptsFixture(t)
	complete := func(p dispatch.Principal, ver string, ref map[string]any, arg, value string, ctx map[string]any) reply {
		params := map[string]any{"ref": ref, "argument": map[string]any{"name": arg, "value": value}}
		if ctx != nil {
			params["context"] = map[string]any{"arguments": ctx}
		}
		return f.send(p, ver, rpc{method: "completion/complete", id: 1, params: params})
	}
	prompt := map[string]any{"type": "ref/prompt", "name": mcptest.PromptGreet}
	for _, ver := range allVersions {
		res := complete(mcptest.Alice, ver, prompt, "who", "al", map[string]any{"mood": "warm"}).result(t)
		if got := compact(t, res["completion"]); got != `{"hasMore":false,"total":2,"values":["alice","alina"]}` {
			t.Errorf("@%s: %s", ver, got)
		}
		// An argument the plugin does not complete has no suggestions.
		res = complete(mcptest.Alice, ver, prompt, "mood", "w", nil).result(t)
		if got := compact(t, res["completion"]); got != `{"hasMore":false,"values":[]}` {
			t.Errorf("mood@%s: %s", ver, got)
		}
		// A plugin's resource template, through the gate.
		res = complete(mcptest.Guest, ver, map[string]any{"type": "ref/resource", "uri": mcptest.DocsTemplate}, "id", "a-", nil).result(t)
		if got := compact(t, res["completion"].(map[string]any)["values"]); got != `["a-1","a-2"]` {
			t.Errorf("template@%s: %s", ver, got)
		}
		// A catalogue template: ids from List, called as the caller.
		res = complete(mcptest.Alice, ver, map[string]any{"type": "ref/resource", "uri": "capgate://booking.service/{id}"}, "id", "h", nil).result(t)
		if got := compact(t, res["completion"].(map[string]any)["values"]); got != `["haircut"]` {
			t.Errorf("records@%s: %s", ver, got)
		}
	}
	for _, tc := range []struct {
		p     dispatch.Principal
		ref   map[string]any
		arg   string
		value string
		ctx   map[string]any
		want  string
	}{
		{mcptest.Alice, prompt, "nope", "", nil, `takes no argument \"nope\"`},
		{mcptest.Alice, prompt, "who", strings.Repeat("x", 21), nil, "more than its limit of 20"},
		{mcptest.Alice, prompt, "who", "", map[string]any{"zz": "1"}, `takes no argument \"zz\" (in the completion context)`},
		{mcptest.Alice, map[string]any{"type": "ref/other", "name": "x"}, "who", "", nil, `ref.type must be`},
		{mcptest.Alice, map[string]any{"type": "ref/resource", "uri": "test://nothing/{id}"}, "id", "", nil, `unknown resource template \"test://nothing/{id}\"`},
		{mcptest.Alice, map[string]any{"type": "ref/resource", "uri": mcptest.DocsTemplate}, "zz", "", nil, `has no variable \"zz\"`},
		// Guests may not call Get, so the catalogue templates are not theirs.
		{mcptest.Guest, map[string]any{"type": "ref/resource", "uri": "capgate://booking.service/{id}"}, "id", "", nil, `unknown resource template`},
		{mcptest.Alice, map[string]any{"type": "ref/resource", "uri": "capgate://booking.service/{id}"}, "name", "", nil, `has no variable \"name\"`},
	} {
		r := complete(tc.p, Version20251125, tc.ref, tc.arg, tc.value, tc.ctx)
		if got := compact(t, r.errorObj(t)); r.errorCode(t) != codeInvalidParams || !strings.Contains(got, tc.want) {
			t.Errorf("%v %s: %s, want %q", tc.ref, tc.arg, got, tc.want)
		}
	}
	for _, params := range []map[string]any{
		{},
		{"ref": prompt},
		{"ref": prompt, "argument": map[string]any{"name": "who"}},
		{"ref": prompt, "argument": map[string]any{"name": "who", "value": 3}},
		{"ref": prompt, "argument": map[string]any{"name": "who", "value": ""}, "context": map[string]any{"arguments": []any{}}},
	} {
		r := f.send(mcptest.Alice, Version20251125, rpc{method: "completion/complete", id: 1, params: params})
		if r.errorCode(t) != codeInvalidParams {
			t.Errorf("%v: %s", params, r.raw)
		}
	}
}
