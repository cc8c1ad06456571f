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
// document from List/Get.
type Entity struct {
	// Name is lower-case and dotted, e.g. "booking.resource".
	Name string
	// Description tells agents what a record of this type is.
	Description string
	// Version names the shape of the documents. Change it when Documents
	// or Get start producing different text for the same records, so
	// indexes built from the old shape rebuild. Empty is a version too.
	Version string
	// List returns up to limit documents whose id sorts after after (byte
	// order; "" starts at the first), sorted by id. Returning fewer than
	// limit means there are no more.
	List func(ctx context.Context, after string, limit int) ([]Document, error)
	// Get returns the documents of the ids that exist, in any order.
	Get func(ctx context.Context, ids []string) ([]Document, error)
	// Record returns the full current record of id, marshalled to a JSON
	// object, or NotFound.
	Record func(ctx context.Context, id string) (any, error)
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
	if e.List == nil || e.Get == nil || e.Record == nil {
		panic(fmt.Sprintf("sdk.ProvideEntity %q: List, Get and Record are required", e.Name))
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
		docs, err = e.Get(ctx, req.Ids)
	} else {
		limit := int(req.Limit)
		switch {
		case limit <= 0:
			limit = defaultDocumentsLimit
		case limit > maxDocumentsLimit:
			limit = maxDocumentsLimit
		}
		// One more than asked tells whether a next page exists.
		docs, err = e.List(ctx, req.After, limit+1)
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
	rec, err := e.Record(ctx, req.Id)
	if err != nil {
		if te, ok := asToolError(err); ok {
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
