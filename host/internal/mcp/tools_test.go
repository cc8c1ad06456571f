package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

func TestToolsListIsExactlyVisible(t *testing.T) {
	f := newFixture(t, Options{})
	cases := []struct {
		name string
		p    dispatch.Principal
	}{
		{"admin", mcptest.Admin},
		{"customer with action token", mcptest.Alice},
		{"read token", mcptest.Reader},
		{"unbound action token", mcptest.Anonymous},
		{"role without permissions", mcptest.Guest},
	}
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				var want []string
				for _, e := range f.platform.Dispatcher.Visible(tc.p) {
					want = append(want, e.Name)
				}
				var got []string
				for _, tool := range f.send(tc.p, ver, rpc{method: "tools/list", id: 1}).result(t)["tools"].([]any) {
					got = append(got, tool.(map[string]any)["name"].(string))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("tools/list = %v, want Visible = %v", got, want)
				}
			})
		}
	}
}

func TestToolDefinitions(t *testing.T) {
	type hints struct{ readOnly, destructive, idempotent, openWorld bool }
	cases := []struct {
		tool      string
		ver       string
		hints     hints
		hasOutput bool
	}{
		{mcptest.Search, Version20250326, hints{true, false, true, false}, false},
		{mcptest.Search, "", hints{true, false, true, false}, false},
		{mcptest.Search, Version20250618, hints{true, false, true, false}, true},
		{mcptest.Search, Version20251125, hints{true, false, true, false}, true},
		{mcptest.Search, Version20260728, hints{true, false, true, false}, true},
		{mcptest.Cancel, Version20251125, hints{false, true, false, false}, false},
		{mcptest.Rename, Version20251125, hints{false, false, false, false}, false},
		{mcptest.BookingGet, Version20260728, hints{true, false, true, false}, false},
	}
	f := newFixture(t, Options{})
	for _, tc := range cases {
		t.Run(tc.tool+"@"+tc.ver, func(t *testing.T) {
			var tool map[string]any
			for _, x := range f.send(mcptest.Admin, tc.ver, rpc{method: "tools/list", id: 1}).result(t)["tools"].([]any) {
				if x.(map[string]any)["name"] == tc.tool {
					tool = x.(map[string]any)
				}
			}
			if tool == nil {
				t.Fatalf("%s not listed", tc.tool)
			}
			e, _ := f.platform.Registry.Lookup(tc.tool)
			if tool["description"] != e.Description {
				t.Errorf("description = %v", tool["description"])
			}
			var wantIn map[string]any
			_ = json.Unmarshal(e.InputSchema, &wantIn)
			if gotIn, _ := json.Marshal(tool["inputSchema"]); string(gotIn) != mustMarshal(wantIn) {
				t.Errorf("inputSchema = %s", gotIn)
			}
			_, hasOutput := tool["outputSchema"]
			if hasOutput != tc.hasOutput {
				t.Errorf("outputSchema present = %v, want %v", hasOutput, tc.hasOutput)
			}
			a := tool["annotations"].(map[string]any)
			got := hints{a["readOnlyHint"].(bool), a["destructiveHint"].(bool), a["idempotentHint"].(bool), a["openWorldHint"].(bool)}
			if got != tc.hints {
				t.Errorf("hints = %+v, want %+v", got, tc.hints)
			}
		})
	}
}

func mustMarshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestToolsListRendersUnknownEntries covers an entry registered after the
// handler was built: it is rendered on the fly rather than dropped.
func TestToolsListRendersUnknownEntries(t *testing.T) {
	f := newFixture(t, Options{})
	if err := f.platform.Registry.Add(registry.Capability{
		Name: "booking.late", Description: "Registered late.", Kind: registry.Read,
		InputSchema: json.RawMessage(`{"type": "object"}`), Pack: "booking", Permission: "booking.read", Plugin: "core",
	}); err != nil {
		t.Fatal(err)
	}
	res := f.send(mcptest.Alice, Version20251125, rpc{method: "tools/list", id: 1}).result(t)
	found := false
	for _, x := range res["tools"].([]any) {
		if x.(map[string]any)["name"] == "booking.late" {
			found = true
		}
	}
	if !found {
		t.Fatal("late entry missing from tools/list")
	}
}

func TestToolsCallSuccess(t *testing.T) {
	cases := []struct {
		name           string
		ver            string
		tool           string
		args           any
		wantStructured any // nil: no structuredContent
		wantText       string
	}{
		{"object at 2025-03-26", "", mcptest.BookingGet, map[string]any{"id": "b-1"}, nil, `{"id":"b-1","owner":"u-alice","title":"Dentist","cancelled":false}`},
		{"object at 2025-06-18", Version20250618, mcptest.BookingGet, map[string]any{"id": "b-1"},
			map[string]any{"id": "b-1", "owner": "u-alice", "title": "Dentist", "cancelled": false}, `{"id":"b-1","owner":"u-alice","title":"Dentist","cancelled":false}`},
		{"object at 2026-07-28", Version20260728, mcptest.BookingGet, map[string]any{"id": "b-1"},
			map[string]any{"id": "b-1", "owner": "u-alice", "title": "Dentist", "cancelled": false}, `{"id":"b-1","owner":"u-alice","title":"Dentist","cancelled":false}`},
		{"array is text only before 2026", Version20251125, mcptest.ListNumbers, nil, nil, `[1, 2, 3]`},
		{"array is structured in 2026", Version20260728, mcptest.ListNumbers, map[string]any{}, []any{1.0, 2.0, 3.0}, `[1, 2, 3]`},
		{"escaping survives", Version20251125, mcptest.Search, map[string]any{"query": "q"},
			map[string]any{"hits": []any{map[string]any{"id": "b-1", "title": `Dentist <3 & "co"`}}}, `{"hits":[{"id":"b-1","title":"Dentist <3 & \"co\""}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			params := map[string]any{"name": tc.tool}
			if tc.args != nil {
				params["arguments"] = tc.args
			}
			res := f.send(mcptest.Alice, tc.ver, rpc{method: "tools/call", id: 1, params: params}).result(t)
			if res["isError"] != false {
				t.Fatalf("isError = %v: %v", res["isError"], res)
			}
			if got := toolText(t, res); got != tc.wantText {
				t.Errorf("text = %s, want %s", got, tc.wantText)
			}
			got, has := res["structuredContent"]
			if (tc.wantStructured != nil) != has || (has && mustMarshal(got) != mustMarshal(tc.wantStructured)) {
				t.Errorf("structuredContent = %v (present %v), want %v", got, has, tc.wantStructured)
			}
		})
	}
}

// TestToolsCallRefusals maps each gate step's refusal onto -32003 with the
// step, reason and capability in data; a tool whose pack is off answers
// exactly as an unknown one.
func TestToolsCallRefusals(t *testing.T) {
	for _, ver := range allVersions {
		f := newFixture(t, Options{})
		hidden := f.send(mcptest.Alice, ver, rpc{method: "tools/call", id: 9, params: map[string]any{"name": mcptest.LLMAsk, "arguments": map[string]any{}}})
		unknown := f.send(mcptest.Alice, ver, rpc{method: "tools/call", id: 9, params: map[string]any{"name": "llm.nosuch", "arguments": map[string]any{}}})
		if hidden.status != unknown.status || strings.ReplaceAll(string(hidden.raw), mcptest.LLMAsk, "X") != strings.ReplaceAll(string(unknown.raw), "llm.nosuch", "X") {
			t.Errorf("@%s: pack off answers %d %s; an unknown tool %d %s", ver, hidden.status, hidden.raw, unknown.status, unknown.raw)
		}
	}
	cases := []struct {
		name string
		p    dispatch.Principal
		tool string
		args map[string]any
		step dispatch.Step
	}{
		{"user binding", mcptest.Anonymous, mcptest.Cancel, map[string]any{"id": "b-1"}, dispatch.StepUserBinding},
		{"scope", mcptest.Reader, mcptest.Cancel, map[string]any{"id": "b-1"}, dispatch.StepScope},
		{"permission", mcptest.Guest, mcptest.Search, map[string]any{"query": "x"}, dispatch.StepPermission},
		{"ownership", mcptest.Bob, mcptest.Cancel, map[string]any{"id": "b-1"}, dispatch.StepOwnership},
	}
	for _, tc := range cases {
		for _, ver := range allVersions {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				f := newFixture(t, Options{})
				rep := f.send(tc.p, ver, rpc{method: "tools/call", id: 9, params: map[string]any{"name": tc.tool, "arguments": tc.args}})
				if rep.status != http.StatusOK {
					t.Fatalf("status = %d", rep.status)
				}
				e := rep.errorObj(t)
				if int(e["code"].(float64)) != codeForbidden {
					t.Fatalf("code = %v, want -32003: %s", e["code"], rep.raw)
				}
				data := e["data"].(map[string]any)
				if data["step"] != string(tc.step) || data["capability"] != tc.tool || data["reason"] == "" {
					t.Fatalf("data = %v", data)
				}
				if e["message"] != "forbidden: "+data["reason"].(string) {
					t.Fatalf("message = %v", e["message"])
				}
				if !contains(f.logs.String(), `"step":"`+string(tc.step)+`"`) {
					t.Errorf("refusal not logged: %s", f.logs.String())
				}
			})
		}
	}
}

func TestToolsCallFailures(t *testing.T) {
	cases := []struct {
		name     string
		tool     any
		args     any
		ctx      func() (context.Context, context.CancelFunc)
		wantCode int    // JSON-RPC error code, or 0 for an isError result
		wantText string // substring of the isError text
		wantLog  string // substring of the log
		noLeak   string // must not reach the client
	}{
		{name: "unknown tool", tool: "nope.nothing", wantCode: codeInvalidParams},
		{name: "unknown tool with escapes", tool: "nope.\u00e9", wantCode: codeInvalidParams},
		{name: "missing name", wantCode: codeInvalidParams},
		{name: "name not a string", tool: 12, wantCode: codeInvalidParams},
		{name: "missing target is a tool error", tool: mcptest.BookingGet, args: map[string]any{"id": "b-404"}, wantText: `booking "b-404" does not exist`},
		{name: "invalid arguments are a tool error", tool: mcptest.Search, args: map[string]any{"query": 1}, wantText: "invalid arguments for platform.search"},
		{name: "arguments not an object", tool: mcptest.Search, args: []any{1}, wantText: "invalid arguments"},
		{name: "conflict is a tool error", tool: mcptest.Cancel, args: map[string]any{"id": "b-2"}, wantText: "already cancelled"},
		{name: "internal error hides the cause", tool: mcptest.Broken, args: map[string]any{}, wantText: "internal error while running platform.broken (reference ", wantLog: "secret-dsn", noLeak: "secret-dsn"},
		{name: "panic is an internal error", tool: mcptest.Panicking, wantText: "internal error while running platform.panic", wantLog: "provider exploded", noLeak: "exploded"},
		{
			name: "deadline", tool: mcptest.Slow,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 20*time.Millisecond)
			},
			wantText: "did not finish within the time limit", wantLog: "call timed out",
		},
		{
			name: "cancelled", tool: mcptest.Slow,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(20*time.Millisecond, cancel)
				return ctx, cancel
			},
			wantText: "was cancelled", wantLog: "call cancelled",
		},
	}
	for _, tc := range cases {
		for _, ver := range []string{Version20250326, Version20260728} {
			t.Run(tc.name+"@"+ver, func(t *testing.T) {
				f := newFixture(t, Options{})
				// b-2 is cancelled up front so cancelling it again conflicts.
				f.send(mcptest.Admin, ver, rpc{method: "tools/call", id: 0, params: map[string]any{"name": mcptest.Cancel, "arguments": map[string]any{"id": "b-2"}}})
				params := map[string]any{}
				if tc.tool != nil {
					params["name"] = tc.tool
				}
				if tc.args != nil {
					params["arguments"] = tc.args
				}
				m := rpc{method: "tools/call", id: 1, params: params}
				hdr := m.headers(ver)
				if s, ok := tc.tool.(string); ok && ver == Version20260728 {
					hdr.Set("Mcp-Name", encodeName(s))
				} else if ver == Version20260728 {
					hdr.Set("Mcp-Name", "x") // cannot match; the header check comes first
				}
				r := httptest.NewRequest(http.MethodPost, "/api/v1/mcp", bytes.NewReader(m.encode(ver)))
				r.Header = hdr
				if tc.ctx != nil {
					ctx, cancel := tc.ctx()
					defer cancel()
					r = r.WithContext(ctx)
				}
				w := httptest.NewRecorder()
				f.h.Serve(w, r, mcptest.Admin)
				rep := decodeReply(t, w)
				if ver == Version20260728 && (tc.tool == nil || tc.name == "name not a string") {
					if rep.status != http.StatusBadRequest || rep.errorCode(t) != codeHeaderMismatch {
						t.Fatalf("want 400 header mismatch, got %d %s", rep.status, rep.raw)
					}
					return
				}
				if tc.noLeak != "" && contains(string(rep.raw), tc.noLeak) {
					t.Errorf("response leaks %q: %s", tc.noLeak, rep.raw)
				}
				if tc.wantLog != "" && !contains(f.logs.String(), tc.wantLog) {
					t.Errorf("log lacks %q: %s", tc.wantLog, f.logs.String())
				}
				if tc.wantCode != 0 {
					if got := rep.errorCode(t); got != tc.wantCode {
						t.Fatalf("code = %d, want %d: %s", got, tc.wantCode, rep.raw)
					}
					return
				}
				res := rep.result(t)
				if res["isError"] != true {
					t.Fatalf("isError = %v: %s", res["isError"], rep.raw)
				}
				if _, ok := res["structuredContent"]; ok {
					t.Errorf("error result carries structuredContent: %s", rep.raw)
				}
				text := toolText(t, res)
				if !contains(text, tc.wantText) {
					t.Fatalf("text = %q, want it to contain %q", text, tc.wantText)
				}
				if tc.wantLog != "" && tc.noLeak != "" {
					// The reference in the text is the one in the log.
					ref := text[len(text)-17 : len(text)-1]
					if !contains(f.logs.String(), `"correlation_id":"`+ref+`"`) {
						t.Errorf("reference %s not in log %s", ref, f.logs.String())
					}
				}
			})
		}
	}
}

// encodeName applies the 2026-07-28 header value encoding for names that
// are not plain ASCII.
func encodeName(s string) string {
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return "=?base64?" + b64(s) + "?="
		}
	}
	return s
}

// TestInvalidPluginOutput covers a provider answering with bytes that are
// not JSON: the agent gets an internal error, never the bytes.
func TestInvalidPluginOutput(t *testing.T) {
	cases := []struct {
		name string
		out  string
	}{
		{"truncated", `{"a":`},
		{"trailing garbage", `{} x`},
		{"empty", ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := registry.New([]string{"p"})
			if err := reg.Add(registry.Capability{Name: "p.out", Kind: registry.Read, InputSchema: json.RawMessage(`{"type":"object"}`), Pack: "p", Plugin: "p"}); err != nil {
				t.Fatal(err)
			}
			d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"p": true}}, map[string]dispatch.Provider{"p": fixedProvider(tc.out)})
			if err != nil {
				t.Fatal(err)
			}
			logs := &mcptest.LogBuffer{}
			h := New(d, Options{Logger: slogTo(logs)})
			m := rpc{method: "tools/call", id: 1, params: map[string]any{"name": "p.out"}}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(m.encode("")))
			r.Header = m.headers("")
			w := httptest.NewRecorder()
			h.Serve(w, r, mcptest.Admin)
			res := decodeReply(t, w).result(t)
			if res["isError"] != true || !contains(toolText(t, res), "internal error") {
				t.Fatalf("result = %v", res)
			}
			if !contains(logs.String(), "returned invalid JSON") {
				t.Fatalf("log = %s", logs.String())
			}
		})
	}
}

type fixedProvider string

func (p fixedProvider) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return json.RawMessage(p), nil
}

func TestNewPanicsWithoutDispatcher(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(nil) did not panic")
		}
	}()
	New(nil, Options{})
}

// TestPluginOutputWithInvalidUTF8 covers plugin JSON holding bytes that are
// not UTF-8: the response replaces them and stays valid UTF-8 JSON.
func TestPluginOutputWithInvalidUTF8(t *testing.T) {
	cases := []struct {
		name, out, want string
	}{
		{"in a value", "{\"a\":\"x\xffy\"}", `{"a":"x` + "\uFFFD" + `y"}`},
		{"in a key", "{\"\xfe\":1}", `{"` + "\uFFFD" + `":1}`},
		{"valid stays as is", `{"a":"é"}`, `{"a":"é"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := registry.New([]string{"p"})
			if err := reg.Add(registry.Capability{Name: "p.out", Kind: registry.Read, InputSchema: json.RawMessage(`{"type":"object"}`), Pack: "p", Plugin: "p"}); err != nil {
				t.Fatal(err)
			}
			d, err := dispatch.New(reg, dispatch.Policy{Packs: map[string]bool{"p": true}}, map[string]dispatch.Provider{"p": fixedProvider(tc.out)})
			if err != nil {
				t.Fatal(err)
			}
			h := New(d, Options{Logger: slogTo(io.Discard)})
			m := rpc{method: "tools/call", id: 1, params: map[string]any{"name": "p.out"}}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(m.encode(Version20251125)))
			r.Header = m.headers(Version20251125)
			w := httptest.NewRecorder()
			h.Serve(w, r, mcptest.Admin)
			if !utf8.Valid(w.Body.Bytes()) {
				t.Fatalf("response is not UTF-8: %q", w.Body.Bytes())
			}
			res := decodeReply(t, w).result(t)
			if got := mustMarshal(res["structuredContent"]); got != tc.want {
				t.Fatalf("structuredContent = %s, want %s", got, tc.want)
			}
			if got := toolText(t, res); !utf8.ValidString(got) {
				t.Fatalf("text %q", got)
			}
		})
	}
}

// TestToolsCallOperatorRefusals: the kill switch, a switched-off
// capability and a rate limit reach the agent as -32003 naming their step;
// a rate limit also says when to retry, and the switched-off capability is
// gone from tools/list while the limited one stays.
func TestToolsCallOperatorRefusals(t *testing.T) {
	f := newFixture(t, Options{})
	d := f.platform.Dispatcher
	policy := mcptest.Policy()
	policy.ActionsOff = true
	policy.DisabledCapabilities = []string{mcptest.Search}
	policy.Limits = dispatch.Limits{Capabilities: map[string]dispatch.Rate{mcptest.BookingGet: {Count: 1, Per: time.Hour}}}
	if err := d.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	d.UseLimiter(ratelimit.NewMemory())
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		step  dispatch.Step
		retry bool
	}{
		{mcptest.Cancel, map[string]any{"id": "b-1"}, dispatch.StepKillSwitch, false},
		{mcptest.BookingGet, map[string]any{"id": "b-1"}, "", false}, // the one call the hour allows
		{mcptest.BookingGet, map[string]any{"id": "b-1"}, dispatch.StepRateLimit, true},
	} {
		rep := f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 1, params: map[string]any{"name": tc.tool, "arguments": tc.args}})
		if tc.step == "" {
			if strings.Contains(string(rep.raw), `"error"`) || strings.Contains(string(rep.raw), `"isError":true`) {
				t.Fatalf("%s: %s, want a result", tc.tool, rep.raw)
			}
			continue
		}
		e := rep.errorObj(t)
		data := e["data"].(map[string]any)
		if int(e["code"].(float64)) != codeForbidden || data["step"] != string(tc.step) {
			t.Fatalf("%s: %s, want a refusal at %s", tc.tool, rep.raw, tc.step)
		}
		ms, has := data["retry_after_ms"].(float64)
		if has != tc.retry || (tc.retry && (ms < 3_500_000 || ms > 3_600_000)) {
			t.Errorf("%s: retry_after_ms = %v (present %v), want about an hour: %s", tc.tool, data["retry_after_ms"], has, rep.raw)
		}
	}
	// A disabled tool is an unknown one.
	if rep := f.send(mcptest.Alice, Version20251125, rpc{method: "tools/call", id: 1, params: map[string]any{"name": mcptest.Search, "arguments": map[string]any{"query": "x"}}}); !strings.Contains(string(rep.raw), `unknown tool \"`+mcptest.Search+`\"`) {
		t.Errorf("disabled %s: %s, want the answer to an unknown tool", mcptest.Search, rep.raw)
	}
	list := f.send(mcptest.Alice, Version20251125, rpc{method: "tools/list", id: 2})
	if strings.Contains(string(list.raw), `"`+mcptest.Search+`"`) || !strings.Contains(string(list.raw), `"`+mcptest.BookingGet+`"`) {
		t.Errorf("tools/list should hide %s and keep %s: %s", mcptest.Search, mcptest.BookingGet, list.raw)
	}
}

// TestToolsListShowsRisk: each tool carries its level under the current
// policy in _meta from 2025-06-18 on (2025-03-26 has no _meta on a tool),
// a reload changes it at once, and a blocked tool is not listed.
func TestToolsListShowsRisk(t *testing.T) {
	f := newFixture(t, Options{})
	risks := func(ver string) map[string]any {
		out := map[string]any{}
		for _, tool := range f.send(mcptest.Admin, ver, rpc{method: "tools/list", id: 1}).result(t)["tools"].([]any) {
			m := tool.(map[string]any)
			meta, _ := m["_meta"].(map[string]any)
			out[m["name"].(string)] = meta[MetaRisk]
		}
		return out
	}
	if r := risks(Version20250618); r["booking.cancel"] != "safe" || r["booking.rename"] != "safe" {
		t.Fatalf("default risks %v; want safe", r)
	}
	policy := mcptest.Policy()
	policy.Risk = dispatch.RiskPolicy{
		Capabilities: map[string]registry.Risk{"booking.cancel": registry.RiskDangerous, "booking.get": registry.RiskBlocked},
		Packs:        map[string]registry.Risk{"booking": registry.RiskReviewRequired},
	}
	if err := f.platform.Dispatcher.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	for _, ver := range []string{Version20250618, Version20251125, Version20260728} {
		r := risks(ver)
		if r["booking.cancel"] != "dangerous" || r["booking.rename"] != "review_required" {
			t.Errorf("%s: risks %v; want booking.cancel dangerous, booking.rename review_required (its pack's)", ver, r)
		}
		if _, listed := r["booking.get"]; listed {
			t.Errorf("%s: the blocked booking.get is listed", ver)
		}
	}
	for name, risk := range risks(Version20250326) {
		if risk != nil {
			t.Errorf("2025-03-26: %s has _meta %v", name, risk)
		}
	}
	res := f.send(mcptest.Admin, Version20250618, rpc{method: "tools/call", id: 2, params: map[string]any{"name": "booking.get", "arguments": map[string]any{"id": "b-1"}}})
	if res.errorCode(t) != codeForbidden || !strings.Contains(string(res.raw), `"step":"risk"`) {
		t.Errorf("calling the blocked booking.get: %s; want a refusal at step risk", res.raw)
	}
}

// TestHeldToolAdmitsThePendingResult: a tool whose calls may be held
// declares an output schema its own results and the pending result both
// satisfy, so that clients checking results accept either; the root stays
// an object schema, as MCP requires, and a safe tool's schema is its own.
func TestHeldToolAdmitsThePendingResult(t *testing.T) {
	f := newFixture(t, Options{})
	outputSchema := func() map[string]any {
		for _, tool := range f.send(mcptest.Admin, Version20251125, rpc{method: "tools/list", id: 1}).result(t)["tools"].([]any) {
			if m := tool.(map[string]any); m["name"] == "platform.search" {
				return m["outputSchema"].(map[string]any)
			}
		}
		t.Fatal("platform.search not listed")
		return nil
	}
	if s := outputSchema(); s["anyOf"] != nil {
		t.Fatalf("a safe tool's output schema admits the pending result: %v", s)
	}
	policy := mcptest.Policy()
	policy.Risk.Capabilities = map[string]registry.Risk{"platform.search": registry.RiskReviewRequired}
	if err := f.platform.Dispatcher.SetPolicy(policy); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(outputSchema())
	resolved, err := compileSchema(raw)
	if err != nil {
		t.Fatalf("held output schema %s: %v", raw, err)
	}
	for _, c := range []struct {
		value string
		ok    bool
	}{
		{`{"hits":[]}`, true},
		{`{"status":"pending_approval","approval_id":"ap_1","expires_at":"2026-12-02T12:00:00Z","message":"waits"}`, true},
		{`{"hits":"none"}`, false},
	} {
		var v any
		_ = json.Unmarshal([]byte(c.value), &v)
		if err := resolved.Validate(v); (err == nil) != c.ok {
			t.Errorf("%s against %s: %v; want valid = %v", c.value, raw, err, c.ok)
		}
	}
	if outputSchema()["type"] != "object" {
		t.Errorf("held output schema %s is not rooted in an object schema", raw)
	}
}

// compileSchema resolves a JSON Schema document as a client would.
func compileSchema(raw []byte) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s.Resolve(nil)
}

// TestHeldSchemaKeepsReferences: definitions move to the root, so the
// references of the capability's own schema still resolve.
func TestHeldSchemaKeepsReferences(t *testing.T) {
	raw := heldSchema(json.RawMessage(`{"type":"object","$defs":{"n":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/n"}},"required":["x"]}`))
	resolved, err := compileSchema(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	for value, ok := range map[string]bool{
		`{"x":"a"}`: true, `{"x":1}`: false,
		`{"status":"pending_approval","approval_id":"ap_1","expires_at":"2026-12-02T12:00:00Z","message":"waits"}`: true,
		`{"status":"done","approval_id":"ap_1","expires_at":"2026-12-02T12:00:00Z","message":"waits"}`:             false,
	} {
		var v any
		_ = json.Unmarshal([]byte(value), &v)
		if err := resolved.Validate(v); (err == nil) != ok {
			t.Errorf("%s against %s: %v; want valid = %v", value, raw, err, ok)
		}
	}
}
