// Package synthetic registers the synthetic catalogue with a plugin.
package synthetic

import (
	"context"
	"fmt"

	"github.com/capgate/capgate/bench/plugins/synthetic/internal/gen"
	"github.com/capgate/capgate/sdk"
)

// Entity is the entity type of the generated documents.
const Entity = "synthetic.item"

// DocVersion names the shape of the documents; change it when Generate or
// document change the text of an item.
const DocVersion = "1"

// Defaults of the config block.
const (
	DefaultDocuments = 100_000
	DefaultSeed      = 42
)

// Config is the plugin's config block.
type Config struct {
	// Documents is how many items the catalogue holds.
	Documents *int `json:"documents"`
	// Seed selects the generated catalogue.
	Seed *uint64 `json:"seed"`
}

// Register declares the synthetic.item entity type on p.
func Register(p *sdk.Plugin) {
	svc := sdk.Configure(p, func(_ context.Context, env sdk.Env, cfg Config) (*Catalogue, error) {
		c := gen.Catalogue{N: DefaultDocuments, Seed: DefaultSeed}
		if cfg.Documents != nil {
			c.N = *cfg.Documents
		}
		if cfg.Seed != nil {
			c.Seed = *cfg.Seed
		}
		if c.N < 1 || c.N > gen.MaxDocuments {
			return nil, fmt.Errorf("synthetic config: documents %d: must be between 1 and %d", c.N, gen.MaxDocuments)
		}
		env.Logger.Info("synthetic catalogue", "entity", Entity, "documents", c.N, "seed", c.Seed)
		return &Catalogue{c: c}, nil
	})
	p.ProvideEntity(sdk.Entity{
		Name:        Entity,
		Description: "a generated catalogue item (room, desk, court, studio, plan or class), for benchmarks",
		Version:     DocVersion,
		Source:      svc,
	})
}

// Catalogue serves the configured catalogue's documents and records.
type Catalogue struct{ c gen.Catalogue }

// Documents returns up to limit items whose id sorts after after.
func (s *Catalogue) Documents(_ context.Context, after string, limit int) ([]sdk.Document, error) {
	items := s.c.After(after, limit)
	out := make([]sdk.Document, len(items))
	for i, it := range items {
		out[i] = document(it)
	}
	return out, nil
}

// DocumentsByID returns the documents of the ids that exist.
func (s *Catalogue) DocumentsByID(_ context.Context, ids []string) ([]sdk.Document, error) {
	out := make([]sdk.Document, 0, len(ids))
	for _, id := range ids {
		if it, ok := s.c.Get(id); ok {
			out = append(out, document(it))
		}
	}
	return out, nil
}

// Record returns the item id, or NotFound.
func (s *Catalogue) Record(_ context.Context, id string) (any, error) {
	it, ok := s.c.Get(id)
	if !ok {
		return nil, sdk.NotFound("no %s %q", Entity, id)
	}
	return it, nil
}

// document is the searchable text of an item.
func document(it gen.Item) sdk.Document {
	return sdk.Document{ID: it.ID, Title: it.Title, Body: it.Description, Fields: it.Fields}
}
