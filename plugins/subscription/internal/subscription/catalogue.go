package subscription

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capgate/capgate/plugins/subscription/internal/store"
	"github.com/capgate/capgate/sdk"
)

// PlanDocVersion is the shape of the subscription.plan documents; bump it
// when planDoc changes, so search indexes rebuild.
const PlanDocVersion = "1"

// The catalogue is a handful of plans, so the provider reads it whole and
// pages in memory rather than adding paged queries to the store.

// The Service is the sdk.EntitySource of subscription.plan.
var _ sdk.EntitySource = (*Service)(nil)

// Documents returns up to limit plans whose id sorts after after, as
// search documents.
func (s *Service) Documents(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
	ps, err := s.store.Plans(ctx) // ordered by id
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(ps, after, func(p store.Plan, id string) int { return strings.Compare(p.ID, id) })
	if i < len(ps) && ps[i].ID == after {
		i++
	}
	ps = ps[i:min(len(ps), i+limit)]
	docs := make([]sdk.Document, len(ps))
	for i, p := range ps {
		docs[i] = planDoc(p)
	}
	return docs, nil
}

// DocumentsByID returns the documents of the plans among ids that exist.
func (s *Service) DocumentsByID(ctx context.Context, ids []string) ([]sdk.Document, error) {
	var docs []sdk.Document
	for _, id := range ids {
		p, err := s.store.Plan(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, planDoc(p))
	}
	return docs, nil
}

// Record is the full record of a plan, as subscription.plans shows it.
func (s *Service) Record(ctx context.Context, id string) (any, error) {
	p, err := s.store.Plan(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sdk.NotFound("no %s with id %s", EntityPlan, shortQuote(id))
	}
	if err != nil {
		return nil, err
	}
	return planToWire(p), nil
}

// planDoc is what search indexes of a plan: its name, description, and
// the words an agent may search by ("monthly", "yearly", the price).
func planDoc(p store.Plan) sdk.Document {
	billing := "monthly"
	if p.Period == store.Yearly {
		billing = "yearly"
	}
	return sdk.Document{
		ID:    p.ID,
		Title: p.Name,
		Body:  p.Description,
		Fields: map[string]string{
			"billing": billing,
			"price":   formatPrice(p),
		},
	}
}

// formatPrice is the price as people write it: "9.99 EUR per month".
func formatPrice(p store.Plan) string {
	return fmt.Sprintf("%d.%02d %s per %s", p.PriceCents/100, p.PriceCents%100, p.Currency, p.Period)
}
