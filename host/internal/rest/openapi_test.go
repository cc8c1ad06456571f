package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	validatorerrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/capgate/capgate/host/internal/mcp/mcptest"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// openAPIValidator checks doc against the OpenAPI 3.1 specification with
// a maintained validator, and returns it for checking exchanges against
// doc.
func openAPIValidator(t *testing.T, doc []byte) validator.Validator {
	t.Helper()
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatalf("not an OpenAPI document: %v", err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("the document does not build: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("invalid: %s: %s (%v)", e.Message, e.Reason, e.SchemaValidationErrors)
		}
		t.FailNow()
	}
	return v
}

// TestOpenAPIDocument: each token's document is valid OpenAPI 3.1 and has
// one operation for exactly each capability the token may call, with its
// schemas, and a 202 where a call may be held for a human.
func TestOpenAPIDocument(t *testing.T) {
	f := newFixture(t, Options{}, func(p *dispatch.Policy) {
		p.Risk.Capabilities = map[string]registry.Risk{mcptest.Cancel: registry.RiskDangerous}
	})
	for _, p := range []dispatch.Principal{mcptest.Admin, mcptest.Alice, mcptest.Reader, mcptest.Guest} {
		rep := f.get(p, OpenAPIPath)
		if rep.status != 200 || rep.header.Get("Content-Type") != "application/json" || rep.header.Get("Cache-Control") != "private, no-cache" {
			t.Fatalf("%+v: %d %v", p, rep.status, rep.header)
		}
		openAPIValidator(t, rep.body)
		var doc struct {
			OpenAPI string `json:"openapi"`
			Info    struct{ Version string }
			Paths   map[string]map[string]struct {
				OperationID string                     `json:"operationId"`
				Capability  string                     `json:"x-capgate-capability"`
				Risk        string                     `json:"x-capgate-risk"`
				Responses   map[string]json.RawMessage `json:"responses"`
				Parameters  []json.RawMessage          `json:"parameters"`
			}
			Components struct {
				Schemas map[string]json.RawMessage
			}
		}
		if err := json.Unmarshal(rep.body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.OpenAPI != "3.1.0" || doc.Info.Version != "1.2.3-test" {
			t.Errorf("openapi %q, version %q", doc.OpenAPI, doc.Info.Version)
		}
		var ops []string
		for path, item := range doc.Paths {
			if path == CapabilitiesPath {
				continue
			}
			op, ok := item["post"]
			if !ok || len(item) != 1 {
				t.Errorf("%s: %v", path, item)
			}
			name := strings.TrimPrefix(path, CapabilitiesPath+"/")
			ops = append(ops, name)
			e, _ := f.d.Registry().Lookup(name)
			if op.OperationID != strings.ReplaceAll(name, ".", "-") || op.Capability != name || op.Risk != string(f.d.Risk(&e.Capability)) {
				t.Errorf("%s: %+v", name, op)
			}
			_, held := op.Responses["202"]
			if held != (name == mcptest.Cancel) {
				t.Errorf("%s: a 202 answer declared %v", name, held)
			}
			if (len(op.Parameters) == 1) != (e.Kind == registry.Action) {
				t.Errorf("%s: the Idempotency-Key is declared for actions only: %s", name, op.Parameters)
			}
			if _, ok := doc.Components.Schemas[name+".input"]; !ok {
				t.Errorf("%s: no input schema", name)
			}
			if _, ok := doc.Components.Schemas[name+".output"]; ok != (len(e.OutputSchema) > 0) {
				t.Errorf("%s: output schema listed %v", name, ok)
			}
		}
		var want []string
		for _, l := range f.d.Visible(p) {
			want = append(want, l.Name)
		}
		slices.Sort(ops)
		if !slices.Equal(ops, want) {
			t.Errorf("%+v: operations %v, want the visible %v", p, ops, want)
		}
	}
}

// TestOpenAPIReferences: a schema's local references point where the
// schema now sits in the document; a value that happens to hold a
// "$ref" is not touched; a schema with an $id keeps its own.
func TestOpenAPIReferences(t *testing.T) {
	got := string(placeSchema(json.RawMessage(`{"type":"object","$defs":{"a":{"type":"string"},"n":{"properties":{"next":{"$ref":"#/$defs/n"}}}},`+
		`"properties":{"x":{"$ref":"#/$defs/a"},"all":{"allOf":[{"$ref":"#/$defs/a"}]},"self":{"$ref":"#"},`+
		`"const":{"const":{"$ref":"#/kept"}},"$ref":{"enum":[{"$ref":"#/kept"}]},"far":{"$ref":"https://example.com/s.json"},"n":{"type":"number","default":1.50}}}`), "c.x.input"))
	for _, want := range []string{
		`"x":{"$ref":"#/components/schemas/c.x.input/$defs/a"}`,
		`"allOf":[{"$ref":"#/components/schemas/c.x.input/$defs/a"}]`,
		`"next":{"$ref":"#/components/schemas/c.x.input/$defs/n"}`,
		`"self":{"$ref":"#/components/schemas/c.x.input"}`,
		`"const":{"const":{"$ref":"#/kept"}}`,
		`"$ref":{"enum":[{"$ref":"#/kept"}]}`,
		`"far":{"$ref":"https://example.com/s.json"}`,
		`"default":1.50`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in\n%s", want, got)
		}
	}
	withID := `{"$id":"https://example.com/s","type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{}}}`
	if got := string(placeSchema(json.RawMessage(withID), "c.x.input")); got != withID {
		t.Errorf("a schema with its own $id changed: %s", got)
	}
	if got := string(placeSchema(json.RawMessage(`[1]`), "c")); got != `[1]` {
		t.Errorf("not a schema object: %s", got)
	}
}

// TestOpenAPIDescribesAnswers: what the adapter answers is what its
// document says: each exchange, its problems included, passes the
// validator's check of requests and responses against the document.
func TestOpenAPIDescribesAnswers(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	v := openAPIValidator(t, f.get(mcptest.Admin, OpenAPIPath).body)
	for _, tc := range []struct {
		p                dispatch.Principal
		capability, body string
		status           int
		checkRequest     bool
	}{
		{mcptest.Admin, mcptest.Search, `{"query":"x"}`, 200, true},
		{mcptest.Admin, mcptest.BookingGet, `{"id":"b-1"}`, 200, true},
		{mcptest.Admin, faultAction, `{"n":3}`, 200, true},
		{mcptest.Admin, faultDefs, `{"at":"2030-01-01T00:00:00Z","tree":{"next":{}}}`, 200, true},
		{mcptest.Admin, mcptest.BookingGet, `{"id":"b-404"}`, 422, true},
		{mcptest.Admin, mcptest.Search, `{"query":""}`, 422, false},
		{mcptest.Admin, mcptest.Broken, `{}`, 500, true},
		{mcptest.Bob, mcptest.BookingGet, `{"id":"b-1"}`, 403, true},
	} {
		rep := f.post(tc.p, tc.capability, tc.body)
		if rep.status != tc.status {
			t.Fatalf("%s: %d %s", tc.capability, rep.status, rep.body)
		}
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+CapabilitiesPath+"/"+tc.capability, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer x")
		resp := &http.Response{StatusCode: rep.status, Header: rep.header, Body: io.NopCloser(bytes.NewReader(rep.body)), Request: req}
		var (
			ok   bool
			errs []*validatorerrors.ValidationError
		)
		if tc.checkRequest {
			ok, errs = v.ValidateHttpRequestResponse(req, resp)
		} else {
			ok, errs = v.ValidateHttpResponse(req, resp)
		}
		if !ok {
			for _, e := range errs {
				t.Errorf("%s %d: %s: %s %v", tc.capability, tc.status, e.Message, e.Reason, e.SchemaValidationErrors)
			}
		}
	}
	list := f.get(mcptest.Admin, CapabilitiesPath)
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+CapabilitiesPath, nil)
	req.Header.Set("Authorization", "Bearer x")
	resp := &http.Response{StatusCode: 200, Header: list.header, Body: io.NopCloser(bytes.NewReader(list.body)), Request: req}
	if ok, errs := v.ValidateHttpRequestResponse(req, resp); !ok {
		for _, e := range errs {
			t.Errorf("list: %s: %s %v", e.Message, e.Reason, e.SchemaValidationErrors)
		}
	}
}
