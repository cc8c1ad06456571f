package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Document is the searchable text of one catalogue record.
type Document struct {
	// ID identifies the record within its entity type.
	ID string
	// Title is the record's name; matches in it rank first.
	Title string
	// Body is the description text.
	Body string
	// Fields are extra searchable values (location, kind, ...); the keys
	// are not searched.
	Fields map[string]string
}

// Entity declares a catalogue entity type the plugin provides: the search
// pack indexes its documents, and platform.get and resources/read return
// its records. Declare only public catalogue records: the host refuses to
// start when the type carries personal or financial data ("user",
// "invoice", "shop.invoice", or one the operator blocked).
//
// Keep the documents current through events: publish "catalogue.upsert"
// (or "catalogue.delete") with Entity set to the type's name and ID to the
// record's id after each change is committed, and indexes fetch the new
// document from its Source.
type Entity struct {
	// Name is lower-case and dotted, e.g. "booking.resource".
	Name string
	// Description tells agents what a record of this type is.
	Description string
	// Version names the shape of the documents. Change it when Documents
	// or Get start producing different text for the same records, so
	// indexes built from the old shape rebuild. Empty is a version too.
	Version string
	// Source serves the type's documents and records. A service built in
	// Configure is one as soon as its pointer type has the three methods:
	// pass the *Configured that holds it.
	Source EntitySource
}

// EntitySource serves the documents and records of one entity type.
type EntitySource interface {
	// Documents returns up to limit documents whose id sorts after after
	// (byte order; "" starts at the first), sorted by id. Returning fewer
	// than limit means there are no more.
	Documents(ctx context.Context, after string, limit int) ([]Document, error)
	// DocumentsByID returns the documents of the ids that exist, in any
	// order.
	DocumentsByID(ctx context.Context, ids []string) ([]Document, error)
	// Record returns the full current record of id, marshalled to a JSON
	// object, or NotFound.
	Record(ctx context.Context, id string) (any, error)
}

// Paging limits of a Documents call, as the contract states them.
const (
	defaultDocumentsLimit = 500
	maxDocumentsLimit     = 1000
)

// ProvideEntity declares a catalogue entity type with its documents and
// records. It panics on a malformed or duplicate name or a missing
// function, as these are programming errors found the first time the plugin
// starts.
func (p *Plugin) ProvideEntity(e Entity) {
	if !entityName.MatchString(e.Name) {
		panic(fmt.Sprintf("sdk.ProvideEntity %q: name must match %s", e.Name, entityName))
	}
	if _, dup := p.providers[e.Name]; dup {
		panic(fmt.Sprintf("sdk.ProvideEntity %q: entity type declared twice", e.Name))
	}
	if e.Source == nil {
		panic(fmt.Sprintf("sdk.ProvideEntity %q: Source is required", e.Name))
	}
	if f, ok := e.Source.(EntityFuncs); ok && (f.List == nil || f.Get == nil || f.GetRecord == nil) {
		panic(fmt.Sprintf("sdk.ProvideEntity %q: EntityFuncs needs List, Get and GetRecord", e.Name))
	}
	if c, ok := e.Source.(interface{ sourceType() (string, bool) }); ok {
		if name, ok := c.sourceType(); !ok {
			panic(fmt.Sprintf("sdk.ProvideEntity %q: Source holds a %s, which lacks the methods of sdk.EntitySource", e.Name, name))
		}
	}
	p.entities = append(p.entities, &capgatev1.EntityType{Name: e.Name, Description: e.Description, Version: e.Version})
	p.providers[e.Name] = &e
}

func (s *server) provider(name string) (*Entity, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	e, ok := s.p.providers[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "plugin %s provides no entity type %q", s.p.name, name)
	}
	return e, nil
}

func (s *server) Documents(ctx context.Context, req *capgatev1.DocumentsRequest) (resp *capgatev1.DocumentsResponse, err error) {
	e, err := s.provider(req.Entity)
	if err != nil {
		return nil, err
	}
	defer s.recoverInto(e.Name+" documents", &err)
	var docs []Document
	more := false
	if len(req.Ids) > 0 {
		docs, err = e.Source.DocumentsByID(ctx, req.Ids)
	} else {
		limit := int(req.Limit)
		switch {
		case limit <= 0:
			limit = defaultDocumentsLimit
		case limit > maxDocumentsLimit:
			limit = maxDocumentsLimit
		}
		// One more than asked tells whether a next page exists.
		docs, err = e.Source.Documents(ctx, req.After, limit+1)
		if len(docs) > limit {
			docs, more = docs[:limit], true
		}
	}
	if err != nil {
		return nil, s.internal(e.Name+" documents", "", err)
	}
	out := &capgatev1.DocumentsResponse{Documents: make([]*capgatev1.Document, len(docs)), More: more}
	for i, d := range docs {
		out.Documents[i] = &capgatev1.Document{Id: d.ID, Title: d.Title, Body: d.Body, Fields: d.Fields}
	}
	return out, nil
}

func (s *server) Record(ctx context.Context, req *capgatev1.RecordRequest) (resp *capgatev1.RecordResponse, err error) {
	e, err := s.provider(req.Entity)
	if err != nil {
		return nil, err
	}
	defer s.recoverInto(e.Name+" record", &err)
	rec, err := e.Source.Record(ctx, req.Id)
	if err != nil {
		if te, ok := asWireError(err); ok {
			return &capgatev1.RecordResponse{Error: te}, nil
		}
		return nil, s.internal(e.Name+" record", "", err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, s.internal(e.Name+" record", "", fmt.Errorf("encode record %q: %w", req.Id, err))
	}
	if len(b) == 0 || b[0] != '{' {
		return nil, s.internal(e.Name+" record", "", fmt.Errorf("record %q is not a JSON object", req.Id))
	}
	return &capgatev1.RecordResponse{Record: b}, nil
}

// EntityFuncs is an EntitySource made of three functions, for a source
// that is not a type of its own.
type EntityFuncs struct {
	List      func(ctx context.Context, after string, limit int) ([]Document, error)
	Get       func(ctx context.Context, ids []string) ([]Document, error)
	GetRecord func(ctx context.Context, id string) (any, error)
}

// Documents calls List.
func (f EntityFuncs) Documents(ctx context.Context, after string, limit int) ([]Document, error) {
	return f.List(ctx, after, limit)
}

// DocumentsByID calls Get.
func (f EntityFuncs) DocumentsByID(ctx context.Context, ids []string) ([]Document, error) {
	return f.Get(ctx, ids)
}

// Record calls GetRecord.
func (f EntityFuncs) Record(ctx context.Context, id string) (any, error) { return f.GetRecord(ctx, id) }
