package registry

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Resource is a readable resource at one URI, provided by a plugin. The
// gate admits a caller to it as to a read capability of its Pack and
// Permission.
type Resource struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
	// Size is the contents' size in bytes when HasSize says it is known.
	Size       uint64
	HasSize    bool
	Pack       string
	Permission string
	Plugin     string
}

// ResourceTemplate is a family of resources named by an RFC 6570 level 1
// URI template, provided by a plugin and gated as Resource is.
type ResourceTemplate struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	MIMEType    string
	Pack        string
	Permission  string
	Plugin      string

	parts []templatePart
	// literal is how many characters of the template are literal: a
	// URI two templates match goes to the one that says more of it.
	literal int
}

// templatePart is a literal run of a template or, with variable set, one
// of its variables.
type templatePart struct {
	text     string
	variable bool
}

// Variables are the template's variable names, in order.
func (t *ResourceTemplate) Variables() []string {
	var out []string
	for _, p := range t.parts {
		if p.variable {
			out = append(out, p.text)
		}
	}
	return out
}

// Capability is r as the gate checks it: a read capability named after
// its URI, of its pack and permission.
func (r *Resource) Capability() Capability {
	return Capability{Name: r.URI, Kind: Read, Pack: r.Pack, Permission: r.Permission, Plugin: r.Plugin}
}

// Capability is t as the gate checks it: a read capability named after
// its template, of its pack and permission.
func (t *ResourceTemplate) Capability() Capability {
	return Capability{Name: t.URITemplate, Kind: Read, Pack: t.Pack, Permission: t.Permission, Plugin: t.Plugin}
}

// Bounds of a resource declaration: URIs and names are identifiers, not
// documents.
const (
	MaxResourceURIBytes         = 1024
	MaxResourceNameBytes        = 256
	MaxResourceDescriptionBytes = 4096
)

// ReservedScheme is the URI scheme of the host's own resources (catalogue
// records); no plugin declares a resource in it.
const ReservedScheme = "capgate"

// resources is the registry's resources and templates.
type resources struct {
	byURI      map[string]*Resource
	ordered    []*Resource
	templates  []*ResourceTemplate // in URI template order
	byTemplate map[string]*ResourceTemplate
	matchOrder []*ResourceTemplate // most literal first
}

// AddResource validates r and registers it. The error names the URI and
// what is wrong.
func (r *Registry) AddResource(res Resource) error {
	if err := checkURI(res.URI); err != nil {
		return fmt.Errorf("resource %q: %w", res.URI, err)
	}
	if prev, dup := r.res.byURI[res.URI]; dup {
		return fmt.Errorf("resource %q: already provided by plugin %q", res.URI, prev.Plugin)
	}
	if err := r.checkResourceMeta(res.Name, res.Title, res.Description, res.MIMEType, res.Pack, res.Permission); err != nil {
		return fmt.Errorf("resource %q: %w", res.URI, err)
	}
	if r.res.byURI == nil {
		r.res.byURI = map[string]*Resource{}
	}
	e := res
	r.res.byURI[e.URI] = &e
	i, _ := slices.BinarySearchFunc(r.res.ordered, e.URI, func(x *Resource, u string) int { return strings.Compare(x.URI, u) })
	r.res.ordered = slices.Insert(r.res.ordered, i, &e)
	return nil
}

// AddResourceTemplate validates t and registers it. The error names the
// template and what is wrong.
func (r *Registry) AddResourceTemplate(t ResourceTemplate) error {
	parts, err := parseTemplate(t.URITemplate)
	if err != nil {
		return fmt.Errorf("resource template %q: %w", t.URITemplate, err)
	}
	if prev, dup := r.res.byTemplate[t.URITemplate]; dup {
		return fmt.Errorf("resource template %q: already provided by plugin %q", t.URITemplate, prev.Plugin)
	}
	if err := r.checkResourceMeta(t.Name, t.Title, t.Description, t.MIMEType, t.Pack, t.Permission); err != nil {
		return fmt.Errorf("resource template %q: %w", t.URITemplate, err)
	}
	e := t
	e.parts = parts
	for _, p := range parts {
		if !p.variable {
			e.literal += len(p.text)
		}
	}
	if r.res.byTemplate == nil {
		r.res.byTemplate = map[string]*ResourceTemplate{}
	}
	r.res.byTemplate[e.URITemplate] = &e
	i, _ := slices.BinarySearchFunc(r.res.templates, e.URITemplate, func(x *ResourceTemplate, u string) int { return strings.Compare(x.URITemplate, u) })
	r.res.templates = slices.Insert(r.res.templates, i, &e)
	r.res.matchOrder = slices.Clone(r.res.templates)
	slices.SortStableFunc(r.res.matchOrder, func(a, b *ResourceTemplate) int { return b.literal - a.literal })
	return nil
}

func (r *Registry) checkResourceMeta(name, title, description, mime, pack, permission string) error {
	switch {
	case name == "":
		return fmt.Errorf("name is required")
	case len(name) > MaxResourceNameBytes || len(title) > MaxResourceNameBytes || len(mime) > MaxResourceNameBytes:
		return fmt.Errorf("name, title and mimeType are at most %d bytes", MaxResourceNameBytes)
	case len(description) > MaxResourceDescriptionBytes:
		return fmt.Errorf("description is at most %d bytes", MaxResourceDescriptionBytes)
	case !utf8.ValidString(name + title + description + mime):
		return fmt.Errorf("name, title, description and mimeType must be UTF-8")
	case !r.packs[pack]:
		return fmt.Errorf("unknown pack %q (known: %s)", pack, strings.Join(r.KnownPacks(), ", "))
	case permission != "" && !permissionPattern.MatchString(permission):
		return fmt.Errorf("permission %q must be a dotted name like \"booking.read\" (wildcards belong to roles)", permission)
	}
	return nil
}

// checkURI reports what makes uri no resource URI of a plugin's: not an
// absolute URI (RFC 3986 scheme, then ':'), too long, with spaces,
// controls or non-ASCII bytes (which a URI percent-encodes), with a
// fragment, or in the host's own scheme.
func checkURI(uri string) error {
	if len(uri) > MaxResourceURIBytes {
		return fmt.Errorf("URI is longer than %d bytes", MaxResourceURIBytes)
	}
	colon := strings.IndexByte(uri, ':')
	if colon <= 0 || !validScheme(uri[:colon]) || colon == len(uri)-1 {
		return fmt.Errorf("not an absolute URI (scheme:rest)")
	}
	if strings.EqualFold(uri[:colon], ReservedScheme) {
		return fmt.Errorf("the %s scheme is the host's own", ReservedScheme)
	}
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c >= 0x7f || c == '#' || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '|' {
			return fmt.Errorf("character %q is not allowed in a URI (percent-encode it)", c)
		}
	}
	return nil
}

// validScheme reports RFC 3986's scheme = ALPHA *( ALPHA / DIGIT / "+" /
// "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := (c|0x20) >= 'a' && (c|0x20) <= 'z'
		digit := c >= '0' && c <= '9'
		if !alpha && (i == 0 || !(digit || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// parseTemplate splits an RFC 6570 level 1 template into literals and
// variables: at least one variable, each a name of letters, digits and
// '_', none next to another (where one ends would be anyone's guess),
// none in the scheme; the literal parts obey checkURI's rules.
func parseTemplate(tmpl string) ([]templatePart, error) {
	if len(tmpl) > MaxResourceURIBytes {
		return nil, fmt.Errorf("template is longer than %d bytes", MaxResourceURIBytes)
	}
	var parts []templatePart
	seen := map[string]bool{}
	var literal strings.Builder
	for i := 0; i < len(tmpl); {
		switch c := tmpl[i]; c {
		case '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("'{' at %d is not closed", i)
			}
			name := tmpl[i+1 : i+end]
			if !validVarName(name) {
				return nil, fmt.Errorf("variable {%s}: only level 1 templates are served, whose variables are names of letters, digits and '_'", name)
			}
			if seen[name] {
				return nil, fmt.Errorf("variable {%s} appears twice", name)
			}
			seen[name] = true
			if literal.Len() == 0 && len(parts) > 0 {
				return nil, fmt.Errorf("variable {%s} follows another variable with nothing between them", name)
			}
			if literal.Len() > 0 {
				parts = append(parts, templatePart{text: literal.String()})
				literal.Reset()
			}
			parts = append(parts, templatePart{text: name, variable: true})
			i += end + 1
		case '}':
			return nil, fmt.Errorf("'}' at %d closes nothing", i)
		default:
			literal.WriteByte(c)
			i++
		}
	}
	if literal.Len() > 0 {
		parts = append(parts, templatePart{text: literal.String()})
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("has no variable; declare a resource at a fixed URI instead")
	}
	if parts[0].variable || !strings.Contains(parts[0].text, ":") {
		return nil, fmt.Errorf("must start with its scheme, before any variable")
	}
	// The literal parts, joined with a stand-in value, must make a URI.
	var sample strings.Builder
	for _, p := range parts {
		if p.variable {
			sample.WriteString("x")
		} else {
			sample.WriteString(p.text)
		}
	}
	if err := checkURI(sample.String()); err != nil {
		return nil, err
	}
	return parts, nil
}

func validVarName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c|0x20) >= 'a' && (c|0x20) <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// match returns the variables of uri under t, percent-decoded, or false
// when t does not match it. A variable matches one or more characters, up
// to the next literal part, that are neither '/', '?' nor '#': the
// characters level 1 expansion percent-encodes.
func (t *ResourceTemplate) match(uri string) (map[string]string, bool) {
	vars := make(map[string]string, len(t.parts))
	rest := uri
	for i, p := range t.parts {
		if !p.variable {
			var ok bool
			if rest, ok = strings.CutPrefix(rest, p.text); !ok {
				return nil, false
			}
			continue
		}
		end := len(rest)
		if i+1 < len(t.parts) {
			end = strings.Index(rest, t.parts[i+1].text)
		}
		if end <= 0 {
			return nil, false
		}
		raw := rest[:end]
		if strings.ContainsAny(raw, "/?#") {
			return nil, false
		}
		v, ok := percentDecode(raw)
		if !ok {
			return nil, false
		}
		vars[p.text] = v
		rest = rest[end:]
	}
	return vars, rest == ""
}

// percentDecode decodes %XX escapes; false on a malformed one or a result
// that is not UTF-8.
func percentDecode(s string) (string, bool) {
	v, err := url.PathUnescape(s)
	return v, err == nil && utf8.ValidString(v)
}

// ResourceMatch is what a URI names: a resource, or a template with the
// values of its variables.
type ResourceMatch struct {
	Resource  *Resource
	Template  *ResourceTemplate
	Variables map[string]string
}

// Capability is the matched declaration as the gate checks it.
func (m ResourceMatch) Capability() Capability {
	if m.Resource != nil {
		return m.Resource.Capability()
	}
	return m.Template.Capability()
}

// Plugin is the plugin that provides the match.
func (m ResourceMatch) Plugin() string {
	if m.Resource != nil {
		return m.Resource.Plugin
	}
	return m.Template.Plugin
}

// MatchResource finds what uri names: the resource declared at exactly
// uri, else the template that matches it (the one with the most literal
// characters when several do, then the first in template order).
func (r *Registry) MatchResource(uri string) (ResourceMatch, bool) {
	if len(uri) > MaxResourceURIBytes {
		return ResourceMatch{}, false
	}
	if res, ok := r.res.byURI[uri]; ok {
		return ResourceMatch{Resource: res}, true
	}
	for _, t := range r.res.matchOrder {
		if vars, ok := t.match(uri); ok {
			return ResourceMatch{Template: t, Variables: vars}, true
		}
	}
	return ResourceMatch{}, false
}

// ResourceTemplate returns the template declared as uriTemplate exactly,
// and so the plugin that provides it (completion of its variables goes
// there).
func (r *Registry) ResourceTemplate(uriTemplate string) (*ResourceTemplate, bool) {
	t, ok := r.res.byTemplate[uriTemplate]
	return t, ok
}

// Resources returns every resource in URI order. The slice is shared: do
// not modify it.
func (r *Registry) Resources() []*Resource { return r.res.ordered }

// ResourceTemplates returns every resource template in template order.
// The slice is shared: do not modify it.
func (r *Registry) ResourceTemplates() []*ResourceTemplate { return r.res.templates }
