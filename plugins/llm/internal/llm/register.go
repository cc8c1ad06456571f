package llm

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/capgate/capgate/sdk"
)

// Pack is the operator toggle of llm.ask: the plugin's name, which the SDK
// makes its capabilities' pack.
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

// service is the configured state llm.ask works with.
type service struct {
	provider   *provider
	maxResults int
	log        *slog.Logger
}

// configBlock is the plugin's config block, kept raw: ParseConfig decodes
// it, naming the key path of every error and never quoting api_key. As
// its Check, ParseConfig also runs on its own when the host only checks
// the configuration (capgate validate), so a connection naming no
// connections[].slug is caught there too.
type configBlock struct{ raw json.RawMessage }

func (b *configBlock) UnmarshalJSON(data []byte) error {
	b.raw = append(json.RawMessage(nil), data...)
	return nil
}

// Check is ParseConfig's verdict on the block.
func (b *configBlock) Check() error {
	_, _, err := ParseConfig(b.raw)
	return err
}

// Register declares llm.ask and the configuration on p.
func Register(p *sdk.Plugin, opts Options) {
	svc := sdk.Configure(p, func(_ context.Context, env sdk.Env, cfg configBlock) (*service, error) {
		log := opts.Logger
		if log == nil && env.Logger != nil {
			log = env.Logger
		}
		if log == nil {
			log = p.Logger()
		}
		conn, all, err := ParseConfig(cfg.raw)
		if err != nil {
			return nil, err
		}
		// One masker for everything the plugin says: answers, errors and
		// every log line (the provider's words reach all three).
		m := newMasker(connectionSecrets(all)...)
		log = maskingLogger(log, m)
		log.Info("llm: answering with connection "+conn.String(), "connections", len(all),
			"timeout", conn.Timeout.String(), "max_tokens", conn.MaxTokens, "max_retries", conn.MaxRetries)
		return &service{provider: newProvider(conn, opts.HTTPClient, log, m), maxResults: max(env.MaxResults, 1), log: log}, nil
	})
	sdk.Add(p, sdk.Tool[AskIn, AskOut]{
		Name: "llm.ask",
		Description: "Answer a question in words with the platform's language model, grounded in the catalogue records " +
			"you may read (found with platform.search and read with platform.get as you). The answer cites its sources by " +
			"number; sources lists them. If you may not read the catalogue, the answer is ungrounded and says so.",
		Kind:       sdk.Read,
		Permission: PermAsk,
		Handler:    sdk.Method(svc, (*service).ask),
	})
}
