package booking

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/capgate/capgate/plugins/booking/internal/store"
	"github.com/capgate/capgate/sdk"
)

// ResourceDocVersion is the shape of the booking.resource documents; bump
// it when resourceDoc changes, so search indexes rebuild.
const ResourceDocVersion = "1"

// The catalogue is a few hundred resources at most, so the provider reads
// it whole and pages in memory rather than adding paged queries to the
// store.

// The Service is the sdk.EntitySource of booking.resource.
var _ sdk.EntitySource = (*Service)(nil)

// Documents returns up to limit resources whose id sorts after after, as
// search documents.
func (s *Service) Documents(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
	rs, err := s.sortedResources(ctx)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(rs, after, func(r store.Resource, id string) int { return strings.Compare(r.ID, id) })
	if i < len(rs) && rs[i].ID == after {
		i++
	}
	rs = rs[i:min(len(rs), i+limit)]
	docs := make([]sdk.Document, len(rs))
	for i, r := range rs {
		docs[i] = resourceDoc(r)
	}
	return docs, nil
}

// DocumentsByID returns the documents of the resources among ids that
// exist.
func (s *Service) DocumentsByID(ctx context.Context, ids []string) ([]sdk.Document, error) {
	var docs []sdk.Document
	for _, id := range ids {
		r, err := s.store.Resource(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, resourceDoc(r))
	}
	return docs, nil
}

// Record is the full record of a resource, as booking.resources shows it.
func (s *Service) Record(ctx context.Context, id string) (any, error) {
	r, err := s.store.Resource(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sdk.NotFound("no %s with id %s", EntityResource, shortQuote(id))
	}
	if err != nil {
		return nil, err
	}
	return resourceToWire(r), nil
}

func (s *Service) sortedResources(ctx context.Context) ([]store.Resource, error) {
	rs, err := s.store.Resources(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rs, func(a, b store.Resource) int { return strings.Compare(a.ID, b.ID) })
	return rs, nil
}

// resourceDoc is what search indexes of a resource: its name, description,
// and the words an agent may search by (kind, location, size).
func resourceDoc(r store.Resource) sdk.Document {
	return sdk.Document{
		ID:    r.ID,
		Title: r.Name,
		Body:  r.Description,
		Fields: map[string]string{
			"kind":     r.Kind,
			"location": r.Location,
			"capacity": "for " + strconv.Itoa(r.Capacity),
		},
	}
}
