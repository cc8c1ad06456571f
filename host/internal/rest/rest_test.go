package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

// TestListIsVisible: the list shows each principal exactly what
// Dispatcher.Visible admits it to, each with its risk under the policy,
// its kind, pack, schemas and the path to call it.
func TestListIsVisible(t *testing.T) {
	f := newFixture(t, Options{}, func(p *dispatch.Policy) {
		p.Risk.Capabilities = map[string]registryRisk{mcptest.Cancel: "dangerous", mcptest.Slow: "blocked"}
	})
	for _, p := range []dispatch.Principal{mcptest.Admin, mcptest.Alice, mcptest.Reader, mcptest.Anonymous, mcptest.Guest, {}} {
		rep := f.get(p, CapabilitiesPath)
		if rep.status != 200 || rep.header.Get("Content-Type") != "application/json" ||
			rep.header.Get("Cache-Control") != "private, no-cache" || rep.header.Get("Vary") != "Authorization" {
			t.Fatalf("%+v: %d %v", p, rep.status, rep.header)
		}
		var got struct {
			Capabilities []struct {
				Name, Kind, Pack, Risk, Path, Description string
				Destructive                               bool            `json:"destructive"`
				OwnerGuarded                              bool            `json:"owner_guarded"`
				Input                                     json.RawMessage `json:"input_schema"`
				Output                                    json.RawMessage `json:"output_schema"`
			}
		}
		if err := json.Unmarshal(rep.body, &got); err != nil {
			t.Fatalf("%v: %s", err, rep.body)
		}
		want := f.d.Visible(p)
		if len(got.Capabilities) != len(want) {
			t.Fatalf("%+v: listed %d, Visible %d: %s", p, len(got.Capabilities), len(want), rep.body)
		}
		for i, c := range got.Capabilities {
			w := want[i]
			if c.Name != w.Name || c.Kind != w.Kind.String() || c.Pack != w.Pack || c.Risk != string(w.Risk) ||
				c.Path != CapabilitiesPath+"/"+w.Name || c.Description != w.Description ||
				c.Destructive != w.Destructive || c.OwnerGuarded != w.OwnerGuarded {
				t.Errorf("%+v: listed %+v, want %+v", p, c, w)
			}
			if !jsonEqual(c.Input, w.InputSchema) || (len(w.OutputSchema) > 0) != (c.Output != nil) {
				t.Errorf("%s: schemas differ", c.Name)
			}
			if c.Name == mcptest.Cancel && c.Risk != "dangerous" {
				t.Errorf("booking.cancel listed at risk %s, want the policy's dangerous", c.Risk)
			}
			if c.Name == mcptest.Slow {
				t.Errorf("a blocked capability is listed")
			}
		}
	}
	if rep := f.get(mcptest.Guest, CapabilitiesPath); string(rep.body) != `{"capabilities":[]}` {
		t.Errorf("a guest holding no permission: %s", rep.body)
	}
}

type registryRisk = registry.Risk

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestCallOutcomes: every outcome of the gate and of a plugin reaches the
// client at the status HTTP gives it, as a problem carrying what MCP's
// answer carries.
func TestCallOutcomes(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cases := []struct {
		name       string
		p          dispatch.Principal
		capability string
		body       string
		status     int
		step, code string
		detail     string // a part of the problem's detail
	}{
		{"admitted", mcptest.Alice, mcptest.BookingGet, `{"id":"b-1"}`, 200, "", "", ""},
		{"ownership", mcptest.Bob, mcptest.BookingGet, `{"id":"b-1"}`, 403, "ownership", "", dispatch.OwnershipReason},
		{"scope", mcptest.Reader, mcptest.Rename, `{"id":"b-1","title":"x"}`, 403, "scope", "", "scope"},
		{"user binding", mcptest.Anonymous, mcptest.Rename, `{"id":"b-1","title":"x"}`, 403, "user_binding", "", "bound to a user"},
		{"permission", mcptest.Guest, mcptest.Search, `{"query":"x"}`, 403, "permission", "", `role "guest" does not hold permission "search.read"`},
		// Invisible and un-callable: as if no plugin provided it.
		{"pack", mcptest.Admin, mcptest.LLMAsk, `{}`, 404, "", "", `no capability is named "llm.ask"`},
		{"scope unknown", dispatch.Principal{Role: "admin", UserID: "u"}, mcptest.Search, `{"query":"x"}`, 403, "scope", "", "not one of"},
		{"unknown capability", mcptest.Admin, "no.such", `{}`, 404, "", "", `no capability is named "no.such"`},
		{"invalid arguments", mcptest.Alice, mcptest.Search, `{"query":""}`, 422, "", "invalid_input", "invalid arguments for platform.search"},
		{"arguments not an object", mcptest.Alice, mcptest.Search, `[1]`, 422, "", "invalid_input", "object"},
		{"not found", mcptest.Alice, mcptest.BookingGet, `{"id":"b-404"}`, 422, "", "not_found", `booking "b-404" does not exist`},
		{"conflict", mcptest.Alice, faultName, `{"give":"conflict"}`, 422, "", "conflict", "already done"},
		{"unavailable", mcptest.Alice, faultName, `{"give":"unavailable"}`, 503, "", "unavailable", "restarting"},
		{"internal", mcptest.Alice, mcptest.Broken, `{}`, 500, "", "", "internal error while running platform.broken (reference "},
		{"panic", mcptest.Alice, mcptest.Panicking, `{}`, 500, "", "", "internal error while running platform.panic"},
		{"result not JSON", mcptest.Alice, faultName, `{"give":"not_json"}`, 500, "", "", "internal error while running fault.answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := f.post(tc.p, tc.capability, tc.body)
			if rep.status != tc.status {
				t.Fatalf("status %d, want %d: %s", rep.status, tc.status, rep.body)
			}
			if tc.status == 200 {
				return
			}
			d := rep.problem(t)
			if d.Step != tc.step || d.Code != tc.code || !strings.Contains(d.Detail, tc.detail) {
				t.Fatalf("problem %+v, want step %q code %q detail ~%q", d, tc.step, tc.code, tc.detail)
			}
			if tc.step != "" && (d.Reason != d.Detail || d.Capability != tc.capability) {
				t.Fatalf("a refusal names its reason and capability: %+v", d)
			}
			if tc.code != "" && d.Capability != tc.capability {
				t.Fatalf("a tool error names its capability: %+v", d)
			}
			if tc.status == 500 {
				if d.Reference == "" || !strings.Contains(d.Detail, d.Reference) || strings.Contains(string(rep.body), "secret") ||
					strings.Contains(string(rep.body), "exploded") || !strings.Contains(f.logs.String(), d.Reference) {
					t.Fatalf("an internal failure shows a reference that is in the log, never its cause: %s", rep.body)
				}
			}
			if tc.status == 503 && rep.header.Get("Retry-After") != "1" {
				t.Fatalf("503 without Retry-After: %v", rep.header)
			}
			if tc.name == "unknown capability" && d.Capability != "" {
				t.Fatalf("an unknown name is not given back as a capability: %+v", d)
			}
		})
	}
}

// TestCallResult: a 200's body is the plugin's result itself, trimmed,
// with bytes that are not UTF-8 escaped as the MCP adapter escapes them;
// a result that only looks like a pending approval is a result.
func TestCallResult(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	for _, tc := range []struct{ give, want string }{
		{"padded", `{"ok":true}`},
		{"bad_utf8", `{"s":"a\ufffdb"}`},
		{"pending_lookalike", `{"status":"pending_approval","approval_id":"ap_1","expires_at":"2030-01-01T00:00:00Z","message":"m"}`},
	} {
		rep := f.post(mcptest.Alice, faultName, `{"give":"`+tc.give+`"}`)
		if rep.status != 200 || string(rep.body) != tc.want || rep.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s, want 200 %s", tc.give, rep.status, rep.body, tc.want)
		}
	}
	rep := f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`)
	if want := `{"hits":[{"id":"b-1","title":"Dentist <3 & \"co\""}]}`; string(rep.body) != want {
		t.Errorf("a result's bytes are not changed: %s, want %s", rep.body, want)
	}
	// A JSON value other than an object is a result too.
	if rep := f.post(mcptest.Alice, mcptest.ListNumbers, ``); rep.status != 200 || string(rep.body) != `[1, 2, 3]` {
		t.Errorf("an array result: %d %s", rep.status, rep.body)
	}
}

// TestCallBody: an absent body is the empty object, with or without a
// Content-Type; a body is JSON of that media type, within the bound.
func TestCallBody(t *testing.T) {
	f := newFixture(t, Options{MaxBodyBytes: 64}, nil)
	send := func(ct string, body string, chunked bool) reply {
		var rd = strings.NewReader(body)
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+CapabilitiesPath+"/"+faultName, rd)
		if chunked {
			r.ContentLength = -1
		}
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		return f.do(mcptest.Alice, r)
	}
	for _, tc := range []struct {
		name, ct, body string
		chunked        bool
		status         int
	}{
		{"no body, no type", "", "", false, 200},
		{"blank body, no type", "", "  \n", false, 200},
		{"null", "application/json", "null", false, 200},
		{"empty object", "application/json", "{}", false, 200},
		{"with charset", "application/json; charset=utf-8", `{"give":"ok"}`, false, 200},
		{"structured +json", "application/merge-patch+json", `{}`, false, 200},
		{"body without type", "", `{}`, false, 415},
		{"form", "application/x-www-form-urlencoded", `give=ok`, false, 415},
		{"text", "text/plain", `{}`, false, 415},
		{"bad media type", "application/", `{}`, false, 415},
		{"not JSON", "application/json", `{"give":`, false, 400},
		{"two values", "application/json", `{} {}`, false, 400},
		{"too large", "application/json", `{"give":"` + strings.Repeat("x", 80) + `"}`, false, 413},
		{"too large, chunked", "application/json", `{"give":"` + strings.Repeat("x", 80) + `"}`, true, 413},
		{"at the bound", "application/json", `{"give":"` + strings.Repeat("x", 64-11) + `"}`, false, 422},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := send(tc.ct, tc.body, tc.chunked)
			if rep.status != tc.status {
				t.Fatalf("status %d, want %d: %s", rep.status, tc.status, rep.body)
			}
			if tc.status != 200 {
				rep.problem(t)
			}
		})
	}
}

// TestMethodsAndOrigin: a route answers another method 405 naming the
// ones it takes, and a browser origin the policy refuses 403, before
// anything else; HEAD is GET without the body.
func TestMethodsAndOrigin(t *testing.T) {
	f := newFixture(t, Options{AllowedOrigins: []string{"https://app.example.com"}}, nil)
	for _, tc := range []struct {
		method, path, allow string
	}{
		{http.MethodPost, CapabilitiesPath, "GET, HEAD"},
		{http.MethodDelete, OpenAPIPath, "GET, HEAD"},
		{http.MethodGet, CapabilitiesPath + "/" + mcptest.Search, "POST"},
		{http.MethodPut, CapabilitiesPath + "/" + mcptest.Search, "POST"},
		{"PROPFIND", CapabilitiesPath + "/" + mcptest.Search, "POST"},
	} {
		rep := f.do(mcptest.Alice, httptest.NewRequest(tc.method, "http://127.0.0.1"+tc.path, nil))
		if rep.status != 405 || rep.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q", tc.method, tc.path, rep.status, rep.header.Get("Allow"))
		}
		rep.problem(t)
	}
	for _, path := range []string{CapabilitiesPath, OpenAPIPath} {
		r := httptest.NewRequest(http.MethodHead, "http://127.0.0.1"+path, nil)
		if rep := f.do(mcptest.Alice, r); rep.status != 200 {
			t.Errorf("HEAD %s: %d", path, rep.status)
		}
	}
	for _, tc := range []struct {
		origin string
		status int
	}{
		{"https://evil.example", 403},
		{"https://app.example.com", 200},
		{"http://localhost:3000", 200},
	} {
		for _, path := range []string{CapabilitiesPath, OpenAPIPath, CapabilitiesPath + "/" + mcptest.Search} {
			method := http.MethodGet
			if path == CapabilitiesPath+"/"+mcptest.Search {
				method = http.MethodPost
			}
			r := httptest.NewRequest(method, "http://capgate.example.com"+path, strings.NewReader(`{"query":"x"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Origin", tc.origin)
			rep := f.do(mcptest.Alice, r)
			if rep.status != tc.status {
				t.Errorf("Origin %s on %s: %d, want %d", tc.origin, path, rep.status, tc.status)
			}
			if tc.status == 403 && !strings.Contains(rep.problem(t).Detail, "may not call") {
				t.Errorf("origin refusal: %s", rep.body)
			}
		}
	}
}

// TestRateLimit: a rate-limit refusal is 429 with Retry-After in whole
// seconds and retry_after_ms exactly, both rounded up.
func TestRateLimit(t *testing.T) {
	f := newFixture(t, Options{}, func(p *dispatch.Policy) {
		p.Limits = dispatch.Limits{Capabilities: map[string]dispatch.Rate{mcptest.Search: {Count: 1, Per: time.Hour}}}
	})
	f.d.UseLimiter(ratelimit.NewMemory())
	if rep := f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`); rep.status != 200 {
		t.Fatalf("first call: %d %s", rep.status, rep.body)
	}
	rep := f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`)
	if rep.status != 429 {
		t.Fatalf("second call: %d %s", rep.status, rep.body)
	}
	d := rep.problem(t)
	secs, err := strconv.Atoi(rep.header.Get("Retry-After"))
	if d.Step != "rate_limit" || d.RetryAfterMS <= 0 || err != nil || int64(secs) != (d.RetryAfterMS+999)/1000 || secs < 3500 {
		t.Fatalf("429: Retry-After %q, problem %+v", rep.header.Get("Retry-After"), d)
	}
}

// TestKillSwitchAndRisk: the operator's switches and risk levels reach a
// REST call as the gate decides them.
func TestKillSwitchAndRisk(t *testing.T) {
	f := newFixture(t, Options{}, func(p *dispatch.Policy) {
		p.ActionsOff = true
		p.DisabledCapabilities = []string{mcptest.Search}
		p.Risk.Capabilities = map[string]registryRisk{mcptest.BookingGet: "blocked", faultName: "dangerous"}
	})
	for _, tc := range []struct {
		capability, body, step string
	}{
		{mcptest.Rename, `{"id":"b-1","title":"x"}`, "kill_switch"},
		{mcptest.BookingGet, `{"id":"b-1"}`, "risk"},
		// Held for a human, but this gate takes no approvals.
		{faultName, `{}`, "risk"},
	} {
		rep := f.post(mcptest.Alice, tc.capability, tc.body)
		if d := rep.problem(t); rep.status != 403 || d.Step != tc.step {
			t.Errorf("%s: %d %+v, want 403 at %s", tc.capability, rep.status, d, tc.step)
		}
	}
	// A capability the operator disabled answers exactly as an unknown name.
	hidden, unknown := f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`), f.post(mcptest.Alice, "platform.nosuch", `{"query":"x"}`)
	if hidden.status != 404 || strings.ReplaceAll(string(hidden.body), mcptest.Search, "X") != strings.ReplaceAll(string(unknown.body), "platform.nosuch", "X") {
		t.Errorf("disabled %s: %d %s; an unknown name: %d %s", mcptest.Search, hidden.status, hidden.body, unknown.status, unknown.body)
	}
}

// TestTimeoutAndCancel: a call that outlives the request's deadline is 504
// with a reference; one whose client goes away is cancelled inside the
// provider.
func TestTimeoutAndCancel(t *testing.T) {
	f := newFixture(t, Options{RequestTimeout: 20 * time.Millisecond}, nil)
	rep := f.post(mcptest.Alice, mcptest.Slow, `{}`)
	if d := rep.problem(t); rep.status != 504 || d.Reference == "" || !strings.Contains(d.Detail, "did not finish within the time limit") {
		t.Fatalf("timeout: %d %s", rep.status, rep.body)
	}

	f = newFixture(t, Options{}, nil)
	f.p.SlowStarted = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1"+CapabilitiesPath+"/"+mcptest.Slow, nil)
	done := make(chan reply, 1)
	go func() { done <- f.do(mcptest.Alice, r) }()
	<-f.p.SlowStarted
	cancel()
	if rep := <-done; rep.status != 503 || !strings.Contains(rep.problem(t).Detail, "was cancelled") {
		t.Fatalf("cancelled: %d %s", rep.status, rep.body)
	}
}

// TestIdempotencyKeyHeader: the header is read as a structured-field
// string or bare, must be a key the store accepts, and comes once.
func TestIdempotencyKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		values []string
		key    string
		bad    bool
	}{
		{nil, "", false},
		{[]string{`"8e03978e-40d5"`}, "8e03978e-40d5", false},
		{[]string{`8e03978e-40d5`}, "8e03978e-40d5", false},
		{[]string{` "a\"b\\c" `}, `a"b\c`, false},
		{[]string{`"a" "b"`}, "", true},
		{[]string{`"a\nb"`}, "", true},
		{[]string{`"abc`}, "", true},
		{[]string{`""`}, "", true},
		{[]string{`"a b"`}, "", true},
		{[]string{"\"caf\xc3\xa9\""}, "", true},
		{[]string{strings.Repeat("k", 256)}, "", true},
		{[]string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), false},
		{[]string{"a", "b"}, "", true},
	} {
		hd := http.Header{}
		for _, v := range tc.values {
			hd.Add(IdempotencyKeyHeader, v)
		}
		key, msg := idempotencyKey(hd)
		if key != tc.key || (msg != "") != tc.bad {
			t.Errorf("%q: key %q, message %q", tc.values, key, msg)
		}
		if strings.Contains(msg, "kkkk") {
			t.Errorf("the message quotes the header: %s", msg)
		}
	}
	f := newFixture(t, Options{}, nil)
	rep := f.post(mcptest.Alice, faultAction, `{}`, IdempotencyKeyHeader, `"`)
	if d := rep.problem(t); rep.status != 400 || !strings.Contains(d.Detail, "Idempotency-Key") {
		t.Fatalf("a malformed key: %d %s", rep.status, rep.body)
	}
}

// TestOrigin: every call is audited with the REST origin and the
// client's request id, when it sends a usable one.
func TestAuditOrigin(t *testing.T) {
	var got []dispatch.Origin
	f := newFixture(t, Options{Invoke: nil}, nil)
	f.h.invoke = func(ctx context.Context, p dispatch.Principal, name string, args json.RawMessage) (json.RawMessage, error) {
		got = append(got, dispatch.OriginOf(ctx))
		return f.d.Invoke(ctx, p, name, args)
	}
	f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`, "X-Request-Id", "req-42")
	f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`, "X-Request-Id", "has space")
	f.post(mcptest.Alice, mcptest.Search, `{"query":"x"}`, "X-Request-Id", strings.Repeat("r", 129))
	want := []dispatch.Origin{
		{Protocol: "rest", ProtocolVersion: "v1", RequestID: "req-42"},
		{Protocol: "rest", ProtocolVersion: "v1"},
		{Protocol: "rest", ProtocolVersion: "v1"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("origins %+v, want %+v", got, want)
	}
}
