package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/capgate/capgate/plugins/search/internal/index"
	"github.com/capgate/capgate/sdk"
)

// Pack is the operator toggle of every search capability.
const Pack = "search"

// PermCatalogue is the permission the capabilities require.
const PermCatalogue = "catalogue.read"

// IndexDir is the index's directory inside the plugin's data directory.
const IndexDir = "index"

// Capability names.
const (
	CapSearch = "platform.search"
	CapGet    = "platform.get"
	CapList   = "platform.list"
)

// Config is the plugin's config block; an unknown key is an error.
type Config struct {
	// QueryTimeout is a Go duration ("2s", "500ms"): a search still
	// running after it stops and tells the agent to narrow the query.
	// DefaultQueryTimeout when empty.
	QueryTimeout string `json:"query_timeout"`
}

// DefaultQueryTimeout is query_timeout's default: far above what any search
// within the index's limits takes (milliseconds, and well under a second
// at the p99 of a saturated two-core host over 100 000 documents), so only
// a search gone wrong meets it, and short enough that one cannot hold a
// core for long.
const DefaultQueryTimeout = 2 * time.Second

// queryTimeout is cfg's query_timeout, checked.
func (cfg Config) queryTimeout() (time.Duration, error) {
	if cfg.QueryTimeout == "" {
		return DefaultQueryTimeout, nil
	}
	d, err := time.ParseDuration(cfg.QueryTimeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("search config: query_timeout: %s is not a positive Go duration such as 2s or 500ms", shortQuote(cfg.QueryTimeout))
	}
	return d, nil
}

// Option adjusts Register.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger makes the plugin log to l instead of the host's log, so tests
// can read what it logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// Register adds the search capabilities to p. The index opens when the host
// configures p, syncs from the providers when the host starts it, and is
// kept current from catalogue events until the host stops it.
func Register(p *sdk.Plugin, opts ...Option) { register(p, opts...) }

func register(p *sdk.Plugin, opts ...Option) *service {
	var o options
	for _, f := range opts {
		f(&o)
	}
	s := &service{}
	withLogger := func(env sdk.Env) sdk.Env {
		if o.logger != nil {
			env.Logger = o.logger
		}
		return env
	}

	p.OnConfigure(func(_ context.Context, env sdk.Env) error {
		var cfg Config
		if err := env.DecodeConfig(&cfg); err != nil {
			return fmt.Errorf("search config: %w", err)
		}
		timeout, err := cfg.queryTimeout()
		if err != nil {
			return err
		}
		if env.DataDir == "" {
			return errors.New("search: the host gave no data directory")
		}
		fi, err := os.Stat(env.DataDir)
		if err != nil {
			return fmt.Errorf("search: data directory: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("search: data directory %q is not a directory", env.DataDir)
		}
		idx, err := index.Open(filepath.Join(env.DataDir, IndexDir))
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		s.configure(withLogger(env), idx, timeout)
		p.OnClose(s.close)
		return nil
	})
	p.OnStart(func(ctx context.Context, env sdk.Env, st sdk.Start) error {
		if err := s.start(ctx, withLogger(env), st); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		return nil
	})

	sdk.Add(p, sdk.Tool[SearchIn, SearchOut]{
		Name: CapSearch,
		Description: "Search the platform's public catalogue (bookable resources and every other catalogue record type) by words, " +
			"best match first. Forgives typos and matches a partly typed last word; \"double quotes\" match a phrase. " +
			"Use platform.get with a hit's entity and id for the full record.",
		Kind: sdk.Read, Pack: Pack, Permission: PermCatalogue,
		Handler: func(ctx context.Context, _ sdk.Call, in SearchIn) (SearchOut, error) {
			return s.search(ctx, in)
		},
	})
	sdk.Add(p, sdk.Tool[GetIn, GetOut]{
		Name:        CapGet,
		Description: "Read the full current record of one catalogue entry by entity type and id, as platform.search or platform.list name it.",
		Kind:        sdk.Read, Pack: Pack, Permission: PermCatalogue,
		Handler: func(ctx context.Context, _ sdk.Call, in GetIn) (GetOut, error) {
			return s.get(ctx, in)
		},
	})
	sdk.Add(p, sdk.Tool[ListIn, ListOut]{
		Name: CapList,
		Description: "List the catalogue's records page by page, ordered by entity type and then id, optionally of one entity type only. " +
			"Pass next_cursor back as cursor for the next page; it is absent on the last page.",
		Kind: sdk.Read, Pack: Pack, Permission: PermCatalogue,
		Handler: func(ctx context.Context, _ sdk.Call, in ListIn) (ListOut, error) {
			return s.list(ctx, in)
		},
	})
	return s
}
