package registry

import (
	"maps"
	"strings"
	"testing"
)

func resourceRegistry(t *testing.T) *Registry {
	t.Helper()
	r := New([]string{"docs", "test"})
	for _, res := range []Resource{
		{URI: "test://static-text", Name: "static-text", Pack: "test", Plugin: "fx"},
		{URI: "test://template/fixed/data", Name: "fixed", Pack: "test", Plugin: "fx"},
	} {
		if err := r.AddResource(res); err != nil {
			t.Fatal(err)
		}
	}
	for _, tm := range []ResourceTemplate{
		{URITemplate: "test://template/{id}/data", Name: "template", Pack: "test", Plugin: "fx"},
		{URITemplate: "test://{any}", Name: "any", Pack: "test", Plugin: "other"},
		{URITemplate: "docs://rooms/{room}/plans/{floor}.png", Name: "plan", Pack: "docs", Permission: "docs.read", Plugin: "docs"},
	} {
		if err := r.AddResourceTemplate(tm); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func TestMatchResource(t *testing.T) {
	r := resourceRegistry(t)
	for _, tc := range []struct {
		uri      string
		resource string
		template string
		vars     map[string]string
	}{
		// An exact URI is the resource, even where a template matches too.
		{uri: "test://static-text", resource: "test://static-text"},
		{uri: "test://template/fixed/data", resource: "test://template/fixed/data"},
		// The template that says more of the URI wins over a broader one.
		{uri: "test://template/123/data", template: "test://template/{id}/data", vars: map[string]string{"id": "123"}},
		{uri: "test://template/a%20b/data", template: "test://template/{id}/data", vars: map[string]string{"id": "a b"}},
		{uri: "test://other", template: "test://{any}", vars: map[string]string{"any": "other"}},
		{uri: "docs://rooms/r1/plans/2.png", template: "docs://rooms/{room}/plans/{floor}.png", vars: map[string]string{"room": "r1", "floor": "2"}},
		// A variable never spans a '/', a query or a fragment, nor is empty.
		{uri: "test://template/1/2/data"},
		{uri: "test://template//data"},
		{uri: "test://a/b"},
		{uri: "test://a?b"},
		{uri: "docs://rooms/r1/plans/2.jpg"},
		{uri: "test://template/%zz/data"},
		{uri: "test://template/%ff/data"},
		{uri: "capgate://booking.resource/1"},
		{uri: "other://static-text"},
		{uri: ""},
		{uri: "test://" + strings.Repeat("a", MaxResourceURIBytes)},
	} {
		m, ok := r.MatchResource(tc.uri)
		switch {
		case tc.resource == "" && tc.template == "":
			if ok {
				t.Errorf("%q matched %+v, want nothing", tc.uri, m)
			}
		case !ok:
			t.Errorf("%q matched nothing", tc.uri)
		case tc.resource != "":
			if m.Resource == nil || m.Resource.URI != tc.resource {
				t.Errorf("%q matched %+v, want resource %s", tc.uri, m, tc.resource)
			}
		default:
			if m.Template == nil || m.Template.URITemplate != tc.template || !maps.Equal(m.Variables, tc.vars) {
				t.Errorf("%q matched %+v, want template %s with %v", tc.uri, m, tc.template, tc.vars)
			}
		}
	}
	m, _ := r.MatchResource("docs://rooms/r1/plans/2.png")
	if c := m.Capability(); c.Kind != Read || c.Pack != "docs" || c.Permission != "docs.read" || m.Plugin() != "docs" {
		t.Errorf("capability %+v, plugin %q", c, m.Plugin())
	}
}

func TestAddResourceRefuses(t *testing.T) {
	for _, tc := range []struct {
		res  Resource
		want string
	}{
		{Resource{URI: "no-scheme", Name: "n", Pack: "test"}, "not an absolute URI"},
		{Resource{URI: "1x://a", Name: "n", Pack: "test"}, "not an absolute URI"},
		{Resource{URI: "test:", Name: "n", Pack: "test"}, "not an absolute URI"},
		{Resource{URI: "capgate://booking.resource/1", Name: "n", Pack: "test"}, "host's own"},
		{Resource{URI: "CapGate://x", Name: "n", Pack: "test"}, "host's own"},
		{Resource{URI: "test://a b", Name: "n", Pack: "test"}, "not allowed"},
		{Resource{URI: "test://a#frag", Name: "n", Pack: "test"}, "not allowed"},
		{Resource{URI: "test://é", Name: "n", Pack: "test"}, "not allowed"},
		{Resource{URI: "test://" + strings.Repeat("a", MaxResourceURIBytes), Name: "n", Pack: "test"}, "longer than"},
		{Resource{URI: "test://a", Pack: "test"}, "name is required"},
		{Resource{URI: "test://a", Name: strings.Repeat("n", MaxResourceNameBytes+1), Pack: "test"}, "at most"},
		{Resource{URI: "test://a", Name: "n", Description: strings.Repeat("d", MaxResourceDescriptionBytes+1), Pack: "test"}, "at most"},
		{Resource{URI: "test://a", Name: "\xff", Pack: "test"}, "UTF-8"},
		{Resource{URI: "test://a", Name: "n", Pack: "nope"}, "unknown pack"},
		{Resource{URI: "test://a", Name: "n", Pack: "test", Permission: "docs.*"}, "wildcards"},
		{Resource{URI: "test://static-text", Name: "n", Pack: "test"}, `already provided by plugin "fx"`},
	} {
		err := resourceRegistry(t).AddResource(tc.res)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.res.URI) {
			t.Errorf("AddResource(%q) = %v, want an error naming it and saying %q", tc.res.URI, err, tc.want)
		}
	}
}

func TestAddResourceTemplateRefuses(t *testing.T) {
	for _, tc := range []struct {
		tmpl, want string
	}{
		{"test://fixed", "has no variable"},
		{"{scheme}://x", "must start with its scheme"},
		{"test://{a}{b}", "nothing between them"},
		{"test://{a}/{a}", "appears twice"},
		{"test://{+path}", "level 1"},
		{"test://{a,b}", "level 1"},
		{"test://{}", "level 1"},
		{"test://{open", "not closed"},
		{"test://close}", "closes nothing"},
		{"capgate://x/{id}", "host's own"},
		{"test://a b/{id}", "not allowed"},
		{"test://template/{id}/data", "already provided"},
	} {
		err := resourceRegistry(t).AddResourceTemplate(ResourceTemplate{URITemplate: tc.tmpl, Name: "n", Pack: "test"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddResourceTemplate(%q) = %v, want %q", tc.tmpl, err, tc.want)
		}
	}
}

func TestResourceLists(t *testing.T) {
	r := resourceRegistry(t)
	var uris, tmpls []string
	for _, x := range r.Resources() {
		uris = append(uris, x.URI)
	}
	for _, x := range r.ResourceTemplates() {
		tmpls = append(tmpls, x.URITemplate)
	}
	if got := strings.Join(uris, " "); got != "test://static-text test://template/fixed/data" {
		t.Errorf("resources %s", got)
	}
	if got := strings.Join(tmpls, " "); got != "docs://rooms/{room}/plans/{floor}.png test://template/{id}/data test://{any}" {
		t.Errorf("templates %s", got)
	}
	tm, ok := r.ResourceTemplate("test://template/{id}/data")
	if !ok || tm.Plugin != "fx" || strings.Join(tm.Variables(), ",") != "id" {
		t.Errorf("ResourceTemplate = %+v, %v", tm, ok)
	}
	if _, ok := r.ResourceTemplate("test://template/123/data"); ok {
		t.Error("a URI is not a template")
	}
}

// A result may be any JSON value its output schema admits.
func TestOutputOfAnyType(t *testing.T) {
	r := New([]string{"p"})
	for name, schema := range map[string]string{
		"p.list":   `{"type":"array","items":{"type":"integer"},"maxItems":3}`,
		"p.text":   `{"type":"string"}`,
		"p.object": `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
	} {
		if err := r.Add(Capability{Name: name, Kind: Read, Pack: "p", InputSchema: []byte(`{"type":"object"}`), OutputSchema: []byte(schema)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, result string
		ok           bool
	}{
		{"p.list", `[1,2]`, true},
		{"p.list", `[1,2,3,4]`, false},
		{"p.list", `["a"]`, false},
		{"p.list", `{"n":1}`, false},
		{"p.text", `"hi"`, true},
		{"p.text", `1`, false},
		{"p.object", `{"n":1}`, true},
		{"p.object", `[1]`, false},
		{"p.object", `{}`, false},
	} {
		e, _ := r.Lookup(tc.name)
		if err := e.ValidateResult([]byte(tc.result)); (err == nil) != tc.ok {
			t.Errorf("%s %s: %v", tc.name, tc.result, err)
		}
	}
	for name, want := range map[string]bool{"p.list": false, "p.text": false, "p.object": true} {
		if e, _ := r.Lookup(name); e.ObjectOutput() != want {
			t.Errorf("%s ObjectOutput = %v", name, !want)
		}
	}
}
