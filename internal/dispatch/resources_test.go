package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/ratelimit"
	"github.com/capgate/capgate/internal/registry"
)

// shelf is a plugin that declares resources and reads them: what it was
// asked is kept.
type shelf struct {
	mu    sync.Mutex
	reads []dispatch.ResourceRequest
	// answer overrides what a read returns.
	answer func(r dispatch.ResourceRequest) ([]dispatch.ResourceContents, error)
}

func (s *shelf) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return json.RawMessage(`{}`), nil
}

func (s *shelf) ReadResource(_ context.Context, r dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
	s.mu.Lock()
	s.reads = append(s.reads, r)
	s.mu.Unlock()
	if s.answer != nil {
		return s.answer(r)
	}
	if r.Variables["id"] == "missing" {
		return nil, &dispatch.ToolError{Code: dispatch.NotFound, Message: "no such id"}
	}
	return []dispatch.ResourceContents{{URI: r.URI, MIMEType: "text/plain", Text: "id=" + r.Variables["id"]}}, nil
}

func (s *shelf) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reads)
}

// shelfGate is a gate over a "docs" plugin with a public resource, a
// resource that needs docs.secret, a template needing docs.read, and a
// resource of the switched-off "extra" pack.
func shelfGate(t *testing.T) (*dispatch.Dispatcher, *shelf) {
	t.Helper()
	reg := registry.New([]string{"docs", "extra"})
	for _, r := range []registry.Resource{
		{URI: "docs://public", Name: "public", Pack: "docs", Plugin: "docs"},
		{URI: "docs://secret", Name: "secret", Pack: "docs", Permission: "docs.secret", Plugin: "docs"},
		{URI: "docs://extra", Name: "extra", Pack: "extra", Plugin: "docs"},
	} {
		if err := reg.AddResource(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.AddResourceTemplate(registry.ResourceTemplate{URITemplate: "docs://items/{id}", Name: "item", Pack: "docs", Permission: "docs.read", Plugin: "docs"}); err != nil {
		t.Fatal(err)
	}
	s := &shelf{}
	d, err := dispatch.New(reg, dispatch.Policy{
		Packs: map[string]bool{"docs": true},
		Roles: map[string][]string{"reader": {"docs.read"}, "admin": {"*"}, "none": nil},
	}, map[string]dispatch.Provider{"docs": s})
	if err != nil {
		t.Fatal(err)
	}
	return d, s
}

var (
	docsReader = dispatch.Principal{Role: "reader", Scope: dispatch.ScopeRead, Token: "r"}
	docsAdmin  = dispatch.Principal{Role: "admin", Scope: dispatch.ScopeAdmin, Token: "a"}
	docsNobody = dispatch.Principal{Role: "none", Scope: dispatch.ScopeRead, Token: "n"}
)

func uris(rs []*registry.Resource) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.URI)
	}
	return strings.Join(out, " ")
}

func TestVisibleResources(t *testing.T) {
	d, _ := shelfGate(t)
	for _, tc := range []struct {
		p               dispatch.Principal
		resources, tmpl string
	}{
		{docsReader, "docs://public", "docs://items/{id}"},
		{docsAdmin, "docs://public docs://secret", "docs://items/{id}"},
		{docsNobody, "docs://public", ""},
		// A principal of no known scope sees nothing, as for capabilities.
		{dispatch.Principal{Role: "admin", Scope: "bogus"}, "", ""},
	} {
		if got := uris(d.VisibleResources(tc.p)); got != tc.resources {
			t.Errorf("%s: resources %q, want %q", tc.p.Role, got, tc.resources)
		}
		var tm []string
		for _, x := range d.VisibleResourceTemplates(tc.p) {
			tm = append(tm, x.URITemplate)
		}
		if got := strings.Join(tm, " "); got != tc.tmpl {
			t.Errorf("%s: templates %q, want %q", tc.p.Role, got, tc.tmpl)
		}
		_, ok := d.ResourceTemplateAllowed(tc.p, "docs://items/{id}")
		if ok != (tc.tmpl != "") {
			t.Errorf("%s: ResourceTemplateAllowed = %v", tc.p.Role, ok)
		}
	}
	if _, ok := d.ResourceTemplateAllowed(docsAdmin, "docs://items/1"); ok {
		t.Error("a URI is no template")
	}
}

func TestReadResource(t *testing.T) {
	d, s := shelfGate(t)
	ctx := context.Background()
	got, err := d.ReadResource(ctx, docsReader, "docs://items/42")
	if err != nil || len(got) != 1 || got[0].Text != "id=42" {
		t.Fatalf("read = %+v, %v", got, err)
	}
	r := s.reads[0]
	if r.Template != "docs://items/{id}" || r.URI != "docs://items/42" || r.Principal.Role != "reader" {
		t.Errorf("request %+v", r)
	}
	if _, err := d.ReadResource(ctx, docsNobody, "docs://public"); err != nil {
		t.Errorf("public: %v", err)
	}
	if s.reads[1].Template != "" {
		t.Errorf("a fixed resource carries no template: %+v", s.reads[1])
	}
	// Not declared, not admitted (permission, pack) and not found by the
	// plugin are one answer; only the plugin's own NotFound reached it.
	before := s.count()
	for _, tc := range []struct {
		p   dispatch.Principal
		uri string
	}{
		{docsReader, "docs://nothing"},
		{docsReader, "docs://secret"},
		{docsNobody, "docs://items/1"},
		{docsAdmin, "docs://extra"},
		{docsReader, "docs://items/missing"},
		{docsReader, "docs://items/a/b"},
	} {
		if _, err := d.ReadResource(ctx, tc.p, tc.uri); !errors.Is(err, dispatch.ErrResourceNotFound) {
			t.Errorf("%s reading %s: %v, want not found", tc.p.Role, tc.uri, err)
		}
	}
	if n := s.count() - before; n != 1 {
		t.Errorf("the plugin was asked %d times, want once (the missing id)", n)
	}
}

func TestReadResourceFailures(t *testing.T) {
	d, s := shelfGate(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		answer func(dispatch.ResourceRequest) ([]dispatch.ResourceContents, error)
		check  func(error) bool
	}{
		{"nothing", func(dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) { return nil, nil },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "no contents") }},
		{"too many", func(dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
			return make([]dispatch.ResourceContents, 65), nil
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "more than 64") }},
		{"tool error", func(dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
			return nil, &dispatch.ToolError{Code: dispatch.Unavailable, Message: "later"}
		}, func(err error) bool {
			var te *dispatch.ToolError
			return errors.As(err, &te) && te.Code == dispatch.Unavailable
		}},
		{"internal", func(dispatch.ResourceRequest) ([]dispatch.ResourceContents, error) {
			return nil, errors.New("disk on fire")
		},
			func(err error) bool { return err != nil && !errors.Is(err, dispatch.ErrResourceNotFound) }},
	} {
		s.answer = tc.answer
		if _, err := d.ReadResource(ctx, docsReader, "docs://public"); !tc.check(err) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestResourceNeedsReader(t *testing.T) {
	reg := registry.New([]string{"docs"})
	if err := reg.AddResource(registry.Resource{URI: "docs://a", Name: "a", Pack: "docs", Plugin: "docs"}); err != nil {
		t.Fatal(err)
	}
	_, err := dispatch.New(reg, dispatch.Policy{}, map[string]dispatch.Provider{"docs": plainProvider{}})
	if err == nil || !strings.Contains(err.Error(), `"docs://a"`) {
		t.Fatalf("New = %v, want an error naming the resource", err)
	}
}

type plainProvider struct{}

func (plainProvider) Invoke(context.Context, dispatch.Request) (json.RawMessage, error) {
	return nil, nil
}

func TestReadResourceRateLimitAndAudit(t *testing.T) {
	d, _ := shelfGate(t)
	if err := d.SetPolicy(dispatch.Policy{
		Packs:  map[string]bool{"docs": true},
		Roles:  map[string][]string{"reader": {"docs.read"}},
		Limits: dispatch.Limits{PerToken: dispatch.Rate{Count: 1, Per: time.Minute}},
	}); err != nil {
		t.Fatal(err)
	}
	d.UseLimiter(ratelimit.NewMemory())
	aud := &trail{}
	d.UseAuditor(aud, false)
	ctx := dispatch.WithOrigin(context.Background(), dispatch.Origin{Protocol: "mcp"})
	if _, err := d.ReadResource(ctx, docsReader, "docs://public"); err != nil {
		t.Fatal(err)
	}
	_, err := d.ReadResource(ctx, docsReader, "docs://public")
	refusalAt(t, err, dispatch.StepRateLimit, "docs://public")
	if _, err := d.ReadResource(ctx, docsReader, "docs://nothing"); !errors.Is(err, dispatch.ErrResourceNotFound) {
		t.Fatal(err)
	}
	decs := aud.take()
	if len(decs) != 3 {
		t.Fatalf("%d decisions, want 3", len(decs))
	}
	if d0 := decs[0]; d0.Capability != dispatch.ReadResourceName || d0.Plugin != "docs" || string(d0.Args) != `{"uri":"docs://public"}` || d0.Err != nil || d0.Origin.Protocol != "mcp" {
		t.Errorf("first %+v", d0)
	}
	if decs[1].Refusal == nil || decs[1].Refusal.Step != dispatch.StepRateLimit {
		t.Errorf("second %+v", decs[1])
	}
	if te, ok := decs[2].Err.(*dispatch.ToolError); !ok || te.Code != dispatch.NotFound || decs[2].Plugin != "" {
		t.Errorf("third %+v", decs[2])
	}
}
