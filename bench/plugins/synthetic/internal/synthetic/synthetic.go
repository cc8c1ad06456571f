// Package synthetic registers the synthetic catalogue with a plugin.
package synthetic

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

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
	var cat atomic.Pointer[gen.Catalogue]
	get := func() (*gen.Catalogue, error) {
		if c := cat.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("synthetic plugin is not configured")
	}

	p.OnConfigure(func(_ context.Context, env sdk.Env) error {
		var cfg Config
		if err := env.DecodeConfig(&cfg); err != nil {
			return fmt.Errorf("synthetic config: %w", err)
		}
		c := gen.Catalogue{N: DefaultDocuments, Seed: DefaultSeed}
		if cfg.Documents != nil {
			c.N = *cfg.Documents
		}
		if cfg.Seed != nil {
			c.Seed = *cfg.Seed
		}
		if c.N < 1 || c.N > gen.MaxDocuments {
			return fmt.Errorf("synthetic config: documents %d: must be between 1 and %d", c.N, gen.MaxDocuments)
		}
		cat.Store(&c)
		env.Logger.Info("synthetic catalogue", "entity", Entity, "documents", c.N, "seed", c.Seed)
		return nil
	})

	p.ProvideEntity(sdk.Entity{
		Name:        Entity,
		Description: "a generated catalogue item (room, desk, court, studio, plan or class), for benchmarks",
		Version:     DocVersion,
		List: func(_ context.Context, after string, limit int) ([]sdk.Document, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			items := c.After(after, limit)
			out := make([]sdk.Document, len(items))
			for i, it := range items {
				out[i] = document(it)
			}
			return out, nil
		},
		Get: func(_ context.Context, ids []string) ([]sdk.Document, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			out := make([]sdk.Document, 0, len(ids))
			for _, id := range ids {
				if it, ok := c.Get(id); ok {
					out = append(out, document(it))
				}
			}
			return out, nil
		},
		Record: func(_ context.Context, id string) (any, error) {
			c, err := get()
			if err != nil {
				return nil, err
			}
			it, ok := c.Get(id)
			if !ok {
				return nil, sdk.NotFound("no %s %q", Entity, id)
			}
			return it, nil
		},
	})
}

// document is the searchable text of an item.
func document(it gen.Item) sdk.Document {
	return sdk.Document{ID: it.ID, Title: it.Title, Body: it.Description, Fields: it.Fields}
}
