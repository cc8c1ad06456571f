package sdk

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Resource declares a resource at one URI that callers read (MCP
// resources/read), gated like a read capability: the caller's role must
// hold Permission and Pack must be on. The host refuses to start when the
// URI is not absolute, is in the host's own capgate scheme, or is declared
// twice.
type Resource struct {
	// URI is absolute, e.g. "docs://terms".
	URI string
	// Name identifies the resource to programs; Title is for people.
	Name        string
	Title       string
	Description string
	// MIMEType is the contents' media type, and the default of what Read
	// returns.
	MIMEType string
	// Size is the contents' size in bytes when known; 0 leaves it unsaid.
	Size uint64
	// Pack is the operator toggle; empty means the plugin's pack.
	Pack string
	// Permission is what the caller's role must hold; empty means any
	// caller.
	Permission string
	// Read returns the contents for the caller. Call.Invoke is not
	// available while reading a resource.
	Read func(ctx context.Context, call Call) (ResourceContents, error)
}

// ResourceTemplate declares a family of resources named by a URI template
// of RFC 6570 level 1 ("docs://rooms/{id}/plan"): each variable matches
// one or more characters other than '/', '?' and '#', percent-decoded
// before Read sees it. A URI declared by a Resource is that resource, not
// the template's.
type ResourceTemplate struct {
	URITemplate string
	Name        string
	Title       string
	Description string
	MIMEType    string
	Pack        string
	Permission  string
	// Read returns the contents of the resource at uri, whose variables
	// the host matched; NotFound when they name nothing, which the caller
	// reads as no resource at all.
	Read func(ctx context.Context, call Call, uri string, vars map[string]string) (ResourceContents, error)
}

// ResourceContents is what a resource holds: Text, or Blob when it is
// not nil. MIMEType defaults to the declaration's.
type ResourceContents struct {
	MIMEType string
	Text     string
	Blob     []byte
}

type resourceReader func(ctx context.Context, call Call, uri string, vars map[string]string) (ResourceContents, error)

type resourceDecl struct {
	mime string
	read resourceReader
}

// AddResource declares r. It panics on a declaration that can never work
// (no Read, no URI or Name, a URI declared twice), as Add does.
func AddResource(p *Plugin, r Resource) {
	if r.Read == nil || r.URI == "" || r.Name == "" {
		panic(fmt.Sprintf("sdk.AddResource %q: URI, Name and Read are required", r.URI))
	}
	if _, dup := p.resourceByURI[r.URI]; dup {
		panic(fmt.Sprintf("sdk.AddResource %q: declared twice", r.URI))
	}
	if r.Pack == "" {
		r.Pack = p.pack
	}
	w := &capgatev1.Resource{Uri: r.URI, Name: r.Name, Title: r.Title, Description: r.Description,
		MimeType: r.MIMEType, Pack: r.Pack, Permission: r.Permission}
	if r.Size > 0 {
		w.Size = &r.Size
	}
	p.resources = append(p.resources, w)
	read := r.Read
	p.resourceByURI[r.URI] = resourceDecl{mime: r.MIMEType, read: func(ctx context.Context, call Call, _ string, _ map[string]string) (ResourceContents, error) {
		return read(ctx, call)
	}}
}

// AddResourceTemplate declares t. It panics on a declaration that can
// never work (no Read, no template or Name, a template declared twice);
// the host checks the template's syntax when it starts.
func AddResourceTemplate(p *Plugin, t ResourceTemplate) {
	if t.Read == nil || t.URITemplate == "" || t.Name == "" {
		panic(fmt.Sprintf("sdk.AddResourceTemplate %q: URITemplate, Name and Read are required", t.URITemplate))
	}
	if _, dup := p.resourceByTemplate[t.URITemplate]; dup {
		panic(fmt.Sprintf("sdk.AddResourceTemplate %q: declared twice", t.URITemplate))
	}
	if t.Pack == "" {
		t.Pack = p.pack
	}
	p.resourceTemplates = append(p.resourceTemplates, &capgatev1.ResourceTemplate{UriTemplate: t.URITemplate, Name: t.Name,
		Title: t.Title, Description: t.Description, MimeType: t.MIMEType, Pack: t.Pack, Permission: t.Permission})
	p.resourceByTemplate[t.URITemplate] = resourceDecl{mime: t.MIMEType, read: t.Read}
}

// ReadResource serves the host's read of a declared resource.
func (s *server) ReadResource(ctx context.Context, req *capgatev1.ReadResourceRequest) (resp *capgatev1.ReadResourceResponse, err error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	var (
		decl resourceDecl
		ok   bool
	)
	if req.UriTemplate == "" {
		decl, ok = s.p.resourceByURI[req.Uri]
	} else {
		decl, ok = s.p.resourceByTemplate[req.UriTemplate]
	}
	if !ok {
		return nil, status.Errorf(codes.NotFound, "plugin %s declares no resource %q", s.p.name, req.Uri)
	}
	defer s.recoverInto(req.Uri, &err)
	pr := req.GetPrincipal()
	call := Call{Principal: Principal{Role: pr.GetRole(), Scope: Scope(pr.GetScope()), UserID: pr.GetUserId()}}
	vars := req.Variables
	if vars == nil {
		vars = map[string]string{}
	}
	rc, err := decl.read(ctx, call, req.Uri, vars)
	if err != nil {
		if te, ok := asWireError(err); ok {
			return &capgatev1.ReadResourceResponse{Error: te}, nil
		}
		return nil, s.internal(req.Uri, "", err)
	}
	w, err := wireResourceContents(req.Uri, decl.mime, rc)
	if err != nil {
		return nil, s.internal(req.Uri, "", err)
	}
	if n := len(rc.Text) + len(rc.Blob); s.maxResult > 0 && n > s.maxResult {
		s.p.logger.Warn("resource over the host's limit", "uri", req.Uri, "bytes", n, "limit", s.maxResult)
		return &capgatev1.ReadResourceResponse{Error: &capgatev1.ToolError{Code: capgatev1.ToolError_CODE_INVALID_INPUT,
			Message: fmt.Sprintf("the resource %s is %d bytes, more than this server's limit of %d bytes", req.Uri, n, s.maxResult)}}, nil
	}
	return &capgatev1.ReadResourceResponse{Contents: []*capgatev1.ResourceContents{w}}, nil
}

// wireResourceContents is rc as the contract carries it, for uri.
func wireResourceContents(uri, mime string, rc ResourceContents) (*capgatev1.ResourceContents, error) {
	if rc.MIMEType != "" {
		mime = rc.MIMEType
	}
	w := &capgatev1.ResourceContents{Uri: uri, MimeType: mime}
	if rc.Blob != nil {
		if rc.Text != "" {
			return nil, errors.New("resource contents have both text and blob")
		}
		w.Body = &capgatev1.ResourceContents_Blob{Blob: rc.Blob}
		return w, nil
	}
	if !utf8.ValidString(rc.Text) {
		return nil, errors.New("resource text is not valid UTF-8")
	}
	w.Body = &capgatev1.ResourceContents_Text{Text: rc.Text}
	return w, nil
}
