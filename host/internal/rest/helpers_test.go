package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/host/internal/problem"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// Capabilities of the fault provider: each answers what its arguments ask
// for, so every outcome a plugin can give is one call away.
const (
	faultName    = "fault.answer"
	faultAction  = "fault.act"
	faultDefs    = "fault_defs" // a plain name: REST paths and OpenAPI names take it as they take dotted ones
	faultPackage = "fault"
)

// faultProvider answers fault.answer with the outcome its "give" argument
// names, and fault.act with its arguments (an action, for keys and the
// kill switch).
type faultProvider struct{}

func (faultProvider) Invoke(_ context.Context, r dispatch.Request) (json.RawMessage, error) {
	if r.Capability != faultName {
		return r.Args, nil
	}
	var a struct {
		Give string `json:"give"`
	}
	if err := json.Unmarshal(r.Args, &a); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	switch a.Give {
	case "unavailable":
		return nil, &dispatch.ToolError{Code: dispatch.Unavailable, Message: "fault is restarting; nothing ran"}
	case "conflict":
		return nil, &dispatch.ToolError{Code: dispatch.Conflict, Message: "already done"}
	case "not_json":
		return json.RawMessage(`{"a":`), nil
	case "bad_utf8":
		return json.RawMessage("{\"s\":\"a\xffb\"}"), nil
	case "pending_lookalike":
		// The pending shape exactly: a capability's own result, not a
		// call the gate held.
		return json.RawMessage(`{"status":"pending_approval","approval_id":"ap_1","expires_at":"2030-01-01T00:00:00Z","message":"m"}`), nil
	case "padded":
		return json.RawMessage(" \n{\"ok\":true}\n "), nil
	}
	return json.RawMessage(`{"ok":true}`), nil
}

// fixture is a Handler over the test platform, with the fault provider's
// capabilities beside it, logging into a buffer.
type fixture struct {
	t    testing.TB
	p    *mcptest.Platform
	d    *dispatch.Dispatcher
	h    *Handler
	logs *mcptest.LogBuffer
}

// newFixture builds the handler; policy may adjust the policy before the
// dispatcher is built, opts the options.
func newFixture(t testing.TB, opts Options, policy func(*dispatch.Policy)) *fixture {
	t.Helper()
	f := &fixture{t: t, p: mcptest.New(), logs: &mcptest.LogBuffer{}}
	// The platform's dispatcher gates its own capabilities; this one
	// gates them and the fault ones, with the platform as their provider.
	reg := registry.New([]string{"search", "booking", "llm", "diag", faultPackage})
	for _, e := range f.p.Registry.All() {
		if err := reg.Add(e.Capability); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []registry.Capability{
		{Name: faultName, Description: "Answer what give asks for.", Kind: registry.Read, Pack: faultPackage, Permission: "fault.run", Plugin: "fault",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"give":{"type":"string","maxLength":32}},"additionalProperties":false}`)},
		{Name: faultAction, Description: "Act, returning the arguments.", Kind: registry.Action, Pack: faultPackage, Permission: "fault.run", Plugin: "fault",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)},
		{Name: faultDefs, Description: "A schema with references.", Kind: registry.Read, Pack: faultPackage, Permission: "fault.run", Plugin: "fault",
			InputSchema: json.RawMessage(`{"type":"object","$defs":{"when":{"type":"string","format":"date-time"},"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}},` +
				`"properties":{"at":{"$ref":"#/$defs/when"},"tree":{"$ref":"#/$defs/node"},"self":{"$ref":"#"}}}`)},
	} {
		if err := reg.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	pol := mcptest.Policy()
	pol.Packs[faultPackage] = true
	pol.Roles["customer"] = append(pol.Roles["customer"], "fault.run")
	if policy != nil {
		policy(&pol)
	}
	d, err := dispatch.New(reg, pol, map[string]dispatch.Provider{"core": f.p, "fault": faultProvider{}})
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Version == "" {
		opts.Version = "1.2.3-test"
	}
	f.h = New(d, opts)
	return f
}

// reply is an answer as a test sees it.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// problem decodes the answer as a problem, checking its media type and
// that its status is the answer's.
func (r reply) problem(t testing.TB) problem.Details {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != problem.MediaType {
		t.Fatalf("Content-Type %q, want %s; %d %s", ct, problem.MediaType, r.status, r.body)
	}
	var d problem.Details
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not a problem: %v\n%s", err, r.body)
	}
	if d.Status != r.status || d.Type != "about:blank" || d.Title != http.StatusText(r.status) || d.Detail == "" {
		t.Fatalf("problem %+v does not match status %d", d, r.status)
	}
	return d
}

func (f *fixture) do(p dispatch.Principal, r *http.Request) reply {
	f.t.Helper()
	w := httptest.NewRecorder()
	switch {
	case r.URL.Path == CapabilitiesPath:
		f.h.ServeList(w, r, p)
	case r.URL.Path == OpenAPIPath:
		f.h.ServeOpenAPI(w, r, p)
	default:
		f.h.ServeCall(w, r, p, strings.TrimPrefix(r.URL.Path, CapabilitiesPath+"/"))
	}
	return reply{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// post calls capability name as p with body, as a client sending JSON.
func (f *fixture) post(p dispatch.Principal, name, body string, header ...string) reply {
	f.t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+CapabilitiesPath+"/"+name, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return f.do(p, r)
}

func (f *fixture) get(p dispatch.Principal, path string) reply {
	f.t.Helper()
	return f.do(p, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080"+path, nil))
}

func readAll(t testing.TB, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
