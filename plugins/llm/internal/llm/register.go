package llm

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/capgate/capgate/sdk"
)

// Pack is the operator toggle of llm.ask.
const Pack = "llm"

// PermAsk is the permission llm.ask requires.
const PermAsk = "llm.ask"

// Options are what tests change; the zero value is what the plugin binary
// uses.
type Options struct {
	// Logger replaces env.Logger, so a test can read what is logged.
	Logger *slog.Logger
	// HTTPClient replaces the connection's own HTTP client.
	HTTPClient *http.Client
}

// plugin is the configured state llm.ask works with.
type plugin struct {
	provider   atomic.Pointer[provider]
	maxResults atomic.Int64
	log        atomic.Pointer[slog.Logger]
}

// Register declares llm.ask and the configuration on p.
func Register(p *sdk.Plugin, opts Options) {
	pl := &plugin{}
	pl.log.Store(p.Logger())
	p.OnConfigure(func(_ context.Context, env sdk.Env) error {
		log := opts.Logger
		if log == nil && env.Logger != nil {
			log = env.Logger
		}
		if log == nil {
			log = p.Logger()
		}
		conn, all, err := ParseConfig(env.Config, env.LLMConnectionSlug)
		if err != nil {
			return err
		}
		pl.log.Store(log)
		pl.maxResults.Store(int64(max(env.MaxResults, 1)))
		pl.provider.Store(newProvider(conn, opts.HTTPClient, log))
		log.Info("llm: answering with connection "+conn.String(), "connections", len(all),
			"timeout", conn.Timeout.String(), "max_tokens", conn.MaxTokens, "max_retries", conn.MaxRetries)
		return nil
	})
	sdk.Add(p, sdk.Tool[AskIn, AskOut]{
		Name: "llm.ask",
		Description: "Answer a question in words with the platform's language model, grounded in the catalogue records " +
			"you may read (found with platform.search and read with platform.get as you). The answer cites its sources by " +
			"number; sources lists them. If you may not read the catalogue, the answer is ungrounded and says so.",
		Kind:       sdk.Read,
		Pack:       Pack,
		Permission: PermAsk,
		Handler:    pl.ask,
	})
}
