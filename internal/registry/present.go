package registry

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// Icon is an image a user interface may show beside a capability, as the
// MCP Icon type describes it.
type Icon struct {
	// Src is an https URL or a data: URI of an image.
	Src string
	// MIMEType is the image's media type ("image/png"); optional.
	MIMEType string
	// Sizes are the sizes the image fits: "48x48", or "any" for a scalable
	// one; optional.
	Sizes []string
	// Theme is "light" or "dark", the background the icon is drawn for, or
	// empty for any.
	Theme string
}

// Bounds on what a capability says about itself for user interfaces: they
// travel in every tools/list answer, so each is small.
const (
	MaxTitleLength = 128
	MaxIcons       = 8
	// MaxIconSrc bounds an icon's src; a data: URI carries the image
	// itself, so this is also the largest inline image.
	MaxIconSrc   = 8 << 10
	maxIconSizes = 8
)

var (
	mimeType = regexp.MustCompile(`^[a-z]+/[a-z0-9][a-z0-9.+-]{0,63}$`)
	iconSize = regexp.MustCompile(`^(any|[1-9][0-9]{0,3}x[1-9][0-9]{0,3})$`)
	// dataImage is the head of an inline image: its media type, then base64.
	dataImage = regexp.MustCompile(`^data:(image/[a-z0-9][a-z0-9.+-]{0,63});base64,`)
)

// CheckPresentation checks the title and icons a capability declares.
func CheckPresentation(c *Capability) error {
	if n := utf8.RuneCountInString(c.Title); n > MaxTitleLength {
		return fmt.Errorf("title has %d characters, at most %d", n, MaxTitleLength)
	}
	if !utf8.ValidString(c.Title) || strings.IndexFunc(c.Title, unicode.IsControl) >= 0 {
		return errors.New("title must be valid UTF-8 without control characters")
	}
	if len(c.Icons) > MaxIcons {
		return fmt.Errorf("%d icons, at most %d", len(c.Icons), MaxIcons)
	}
	for i, ic := range c.Icons {
		if err := checkIcon(ic); err != nil {
			return fmt.Errorf("icon %d: %w", i, err)
		}
	}
	return nil
}

// checkIcon admits an https URL (a client fetches it, so never a plain
// http one nor another scheme such as javascript: or file:) or an inline
// base64 image.
func checkIcon(ic Icon) error {
	switch {
	case len(ic.Src) > MaxIconSrc:
		return fmt.Errorf("src is %d bytes, at most %d", len(ic.Src), MaxIconSrc)
	case strings.HasPrefix(ic.Src, "data:"):
		m := dataImage.FindStringSubmatch(ic.Src)
		if m == nil {
			return errors.New(`a data: src must be a base64 image, "data:image/<type>;base64,..."`)
		}
		if _, err := base64.StdEncoding.DecodeString(ic.Src[len(m[0]):]); err != nil {
			return fmt.Errorf("data: src is not valid base64: %w", err)
		}
		if ic.MIMEType != "" && ic.MIMEType != m[1] {
			return fmt.Errorf("mimeType %q differs from the data: URI's %q", ic.MIMEType, m[1])
		}
	default:
		u, err := url.Parse(ic.Src)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || strings.ContainsAny(ic.Src, " \t\r\n") {
			return fmt.Errorf("src %q must be an https URL (without credentials) or a data: URI", shorten(ic.Src))
		}
	}
	if ic.MIMEType != "" && !mimeType.MatchString(ic.MIMEType) {
		return fmt.Errorf("mimeType %q is not a media type such as image/png", shorten(ic.MIMEType))
	}
	if len(ic.Sizes) > maxIconSizes {
		return fmt.Errorf("%d sizes, at most %d", len(ic.Sizes), maxIconSizes)
	}
	for _, s := range ic.Sizes {
		if !iconSize.MatchString(s) {
			return fmt.Errorf(`size %q must be WxH such as "48x48", or "any"`, shorten(s))
		}
	}
	if ic.Theme != "" && ic.Theme != "light" && ic.Theme != "dark" {
		return fmt.Errorf(`theme %q must be "light", "dark" or empty`, shorten(ic.Theme))
	}
	return nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// HeaderKeyword is the input schema annotation that asks a client to
// mirror an argument into an Mcp-Param-<name> HTTP header (Streamable HTTP
// from 2026-07-28), so that intermediaries can route on it.
const HeaderKeyword = "x-mcp-header"

// MaxHeaderName bounds an x-mcp-header name.
const MaxHeaderName = 64

// headerToken is an HTTP field-name token (RFC 9110 tchar).
var headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// headerTypes are the types an annotated property may have: a header
// carries one primitive value. JSON null is allowed beside one of them (an
// optional argument), as the client then sends no header.
var headerTypes = []string{"string", "integer", "boolean"}

// CheckParamHeaders checks the x-mcp-header annotations of an input schema
// as a client does before it accepts the tool (clients drop a tool whose
// annotations break a rule, so the host refuses it instead): each is a
// non-empty token of at most MaxHeaderName characters, on a property
// reachable from the root through "properties" alone, of type string,
// integer or boolean, and no two name the same header, whatever their case.
func CheckParamHeaders(s *jsonschema.Schema) error {
	seen := map[string]string{}
	reachable := 0
	var walk func(props map[string]*jsonschema.Schema, path string) error
	walk = func(props map[string]*jsonschema.Schema, path string) error {
		for _, name := range slicesSorted(props) {
			p := props[name]
			if p == nil {
				continue
			}
			at := strings.TrimPrefix(path+"."+name, ".")
			if v, ok := p.Extra[HeaderKeyword]; ok {
				reachable++
				h, ok := v.(string)
				switch {
				case !ok || h == "":
					return fmt.Errorf("property %s: %s must be a non-empty string", at, HeaderKeyword)
				case len(h) > MaxHeaderName || !headerToken.MatchString(h):
					return fmt.Errorf("property %s: %s %q must be an HTTP field-name token (letters, digits and !#$%%&'*+-.^_`|~) of at most %d characters", at, HeaderKeyword, shorten(h), MaxHeaderName)
				case !primitiveOnly(p):
					return fmt.Errorf("property %s: %s needs a property of type string, integer or boolean, this one is %s", at, HeaderKeyword, typeNames(p))
				}
				if prev, dup := seen[strings.ToLower(h)]; dup {
					return fmt.Errorf("property %s: %s %q names the header property %s already names (header names ignore case)", at, HeaderKeyword, h, prev)
				}
				seen[strings.ToLower(h)] = at
			}
			if err := walk(p.Properties, at); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(s.Properties, ""); err != nil {
		return err
	}
	if total := countKeyword(s, HeaderKeyword); total != reachable {
		return fmt.Errorf("%s is honoured only on properties reachable from the root through properties, not under items, $defs, a $ref or a composition", HeaderKeyword)
	}
	return nil
}

func primitiveOnly(p *jsonschema.Schema) bool {
	types := append([]string{p.Type}, p.Types...)
	n := 0
	for _, t := range types {
		switch {
		case t == "" || t == "null":
		case slices.Contains(headerTypes, t):
			n++
		default:
			return false
		}
	}
	return n == 1
}

func typeNames(p *jsonschema.Schema) string {
	if p.Type != "" {
		return p.Type
	}
	if len(p.Types) > 0 {
		return strings.Join(p.Types, "|")
	}
	return "untyped"
}

// countKeyword counts the schemas in s, s included, that carry keyword.
func countKeyword(s *jsonschema.Schema, keyword string) int {
	n := 0
	if _, ok := s.Extra[keyword]; ok {
		n++
	}
	eachChild(s, func(c *jsonschema.Schema) bool {
		n += countKeyword(c, keyword)
		return true
	})
	return n
}

func slicesSorted(m map[string]*jsonschema.Schema) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
