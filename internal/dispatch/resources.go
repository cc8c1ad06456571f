package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/capgate/capgate/internal/registry"
)

// ErrResourceNotFound is a URI that names no resource the caller may
// read: nothing is declared there, the gate does not admit the caller to
// what is, or the providing plugin finds nothing. The three are one
// answer, so a caller learns nothing of resources it may not read.
var ErrResourceNotFound = errors.New("resource not found")

// ResourceRequest is a resource read the gate admitted, as a
// ResourceReader receives it.
type ResourceRequest struct {
	Principal Principal
	// URI is the URI the caller asked for.
	URI string
	// Template is the matched template's URI template, empty for a
	// resource at a fixed URI; Variables are its values, percent-decoded.
	Template  string
	Variables map[string]string
	// CallID is the audit ID of the read; empty without an auditor.
	CallID string
}

// ResourceReader is a Provider whose plugin declares resources: it reads
// one for an admitted caller. A URI that names nothing is a NotFound
// *ToolError.
type ResourceReader interface {
	ReadResource(ctx context.Context, r ResourceRequest) ([]ResourceContents, error)
}

// resourceAllowed reports whether p passes the steps of a resource read:
// those of a read capability of the resource's pack and permission (the
// kill switch takes the resource's URI, or its template, as the
// capability's name).
func resourceAllowed(pol *compiledPolicy, p Principal, c *registry.Capability) bool {
	return check(pol, p, c) == nil
}

// VisibleResources returns the resources p may read, in URI order: those
// whose read resources/read would admit.
func (d *Dispatcher) VisibleResources(p Principal) []*registry.Resource {
	pol := d.policy.Load()
	var out []*registry.Resource
	for _, r := range d.reg.Resources() {
		c := r.Capability()
		if resourceAllowed(pol, p, &c) {
			out = append(out, r)
		}
	}
	return out
}

// VisibleResourceTemplates returns the resource templates p may read, in
// template order.
func (d *Dispatcher) VisibleResourceTemplates(p Principal) []*registry.ResourceTemplate {
	pol := d.policy.Load()
	var out []*registry.ResourceTemplate
	for _, t := range d.reg.ResourceTemplates() {
		c := t.Capability()
		if resourceAllowed(pol, p, &c) {
			out = append(out, t)
		}
	}
	return out
}

// ResourceTemplateAllowed reports whether p may read the resources of the
// template declared as uriTemplate: false too when there is none, so a
// caller learns nothing of templates it may not read. Completion of a
// template's variables asks it before it reaches the provider.
func (d *Dispatcher) ResourceTemplateAllowed(p Principal, uriTemplate string) (*registry.ResourceTemplate, bool) {
	t, ok := d.reg.ResourceTemplate(uriTemplate)
	if !ok {
		return nil, false
	}
	c := t.Capability()
	if !resourceAllowed(d.policy.Load(), p, &c) {
		return nil, false
	}
	return t, true
}

// maxResourceContents bounds how many contents one read answers.
const maxResourceContents = 64

// ReadResource is the gate for a resource read: the URI is matched to a
// declared resource (exactly) or template, the caller passes the steps of
// a read capability of its pack and permission, and the rate limit, and
// the providing plugin reads it. Whatever the caller may not learn is
// ErrResourceNotFound; a rate limit is a *Refusal (only a caller who may
// read the resource meets it); a failure the caller can act on a
// *ToolError. With an auditor the read is recorded as a call of
// "resources/read" with {"uri"}.
func (d *Dispatcher) ReadResource(ctx context.Context, p Principal, uri string) ([]ResourceContents, error) {
	if d.auditor == nil {
		return d.readResource(ctx, p, uri, "", nil)
	}
	start := time.Now()
	id := d.auditor.NewID(start)
	var plugin string
	contents, err := d.readResource(ctx, p, uri, id, &plugin)
	args, _ := json.Marshal(map[string]string{"uri": uri})
	dec := Decision{ID: id, Origin: OriginOf(ctx), Time: start, Latency: time.Since(start), Principal: p,
		Capability: ReadResourceName, Plugin: plugin, Args: args}
	if err != nil {
		if errors.Is(err, ErrResourceNotFound) {
			dec.Err = &ToolError{Code: NotFound, Message: "resource not found"}
		} else {
			err = classify(&dec, err)
		}
	}
	d.auditor.Record(dec)
	return contents, err
}

// ReadResourceName is how the audit trail names a resource read.
const ReadResourceName = "resources/read"

func (d *Dispatcher) readResource(ctx context.Context, p Principal, uri, id string, plugin *string) ([]ResourceContents, error) {
	m, ok := d.reg.MatchResource(uri)
	if !ok {
		return nil, ErrResourceNotFound
	}
	c := m.Capability()
	pol := d.policy.Load()
	if !resourceAllowed(pol, p, &c) {
		return nil, ErrResourceNotFound
	}
	if plugin != nil {
		*plugin = c.Plugin
	}
	if r, err := d.limit(ctx, pol, p, c.Name); r != nil || err != nil {
		return nil, errOr(r, err)
	}
	rr, ok := d.providers[c.Plugin].(ResourceReader)
	if !ok {
		return nil, fmt.Errorf("plugin %q declares resources but its provider cannot read them", c.Plugin)
	}
	req := ResourceRequest{Principal: p, URI: uri, Variables: m.Variables, CallID: id}
	if m.Template != nil {
		req.Template = m.Template.URITemplate
	}
	contents, err := rr.ReadResource(ctx, req)
	var te *ToolError
	switch {
	case errors.As(err, &te) && te.Code == NotFound:
		return nil, ErrResourceNotFound
	case err != nil:
		return nil, err
	case len(contents) == 0:
		// An empty answer would read as a resource with nothing in it.
		return nil, fmt.Errorf("plugin %q answered no contents for resource %q", c.Plugin, uri)
	case len(contents) > maxResourceContents:
		return nil, fmt.Errorf("plugin %q answered %d contents for resource %q, more than %d", c.Plugin, len(contents), uri, maxResourceContents)
	}
	return contents, nil
}

// checkResourceProviders reports a resource whose plugin has no provider
// that reads resources.
func checkResourceProviders(reg *registry.Registry, providers map[string]Provider) error {
	need := func(kind, name, plugin string) error {
		if _, ok := providers[plugin].(ResourceReader); !ok {
			return fmt.Errorf("%s %q: no provider that reads resources for plugin %q", kind, name, plugin)
		}
		return nil
	}
	for _, r := range reg.Resources() {
		if err := need("resource", r.URI, r.Plugin); err != nil {
			return err
		}
	}
	for _, t := range reg.ResourceTemplates() {
		if err := need("resource template", t.URITemplate, t.Plugin); err != nil {
			return err
		}
	}
	return nil
}
