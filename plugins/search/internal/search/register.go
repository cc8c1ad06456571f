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
	"github.com/capgate/capgate/sdk/platform"
)

// Pack is the operator toggle of every search capability: the plugin's
// name, which the SDK makes its capabilities' pack.
const Pack = "search"

// PermCatalogue is the permission the capabilities require.
const PermCatalogue = "catalogue.read"

// IndexDir is the index's directory inside the plugin's data directory.
const IndexDir = "index"

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

// Check refuses a block the plugin could not start with, opening nothing:
// the SDK runs it before the service is built, and capgate validate runs
// it alone.
func (cfg Config) Check() error {
	_, err := cfg.queryTimeout()
	return err
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

	svc := sdk.Configure(p, func(_ context.Context, env sdk.Env, cfg Config) (*service, error) {
		timeout, err := cfg.queryTimeout()
		if err != nil {
			return nil, err
		}
		if env.DataDir == "" {
			return nil, errors.New("search: the host gave no data directory")
		}
		fi, err := os.Stat(env.DataDir)
		if err != nil {
			return nil, fmt.Errorf("search: data directory: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("search: data directory %q is not a directory", env.DataDir)
		}
		idx, err := index.Open(filepath.Join(env.DataDir, IndexDir))
		if err != nil {
			return nil, fmt.Errorf("search: %w", err)
		}
		s.configure(withLogger(env), idx, timeout)
		p.OnClose(s.close)
		return s, nil
	})
	p.OnStart(func(ctx context.Context, env sdk.Env, st sdk.Start) error {
		if err := s.start(ctx, withLogger(env), st); err != nil {
			return fmt.Errorf("search: %w", err)
		}
		return nil
	})

	sdk.Add(p, sdk.Tool[platform.SearchIn, platform.SearchOut]{
		Name: platform.SearchName,
		Description: "Search the platform's public catalogue (bookable resources and every other catalogue record type) by words, " +
			"best match first. Forgives typos and matches a partly typed last word; \"double quotes\" match a phrase. " +
			"Use platform.get with a hit's entity and id for the full record.",
		Kind:       sdk.Read,
		Permission: PermCatalogue,
		Handler:    sdk.Method(svc, (*service).search),
	})
	sdk.Add(p, sdk.Tool[platform.GetIn, platform.GetOut]{
		Name:        platform.GetName,
		Description: "Read the full current record of one catalogue entry by entity type and id, as platform.search or platform.list name it.",
		Kind:        sdk.Read,
		Permission:  PermCatalogue,
		Handler:     sdk.Method(svc, (*service).get),
	})
	sdk.Add(p, sdk.Tool[platform.ListIn, platform.ListOut]{
		Name: platform.ListName,
		Description: "List the catalogue's records page by page, ordered by entity type and then id, optionally of one entity type only. " +
			"Pass next_cursor back as cursor for the next page; it is absent on the last page.",
		Kind:       sdk.Read,
		Permission: PermCatalogue,
		Handler:    sdk.Method(svc, (*service).list),
	})
	return s
}
