package app

import (
	"context"
	"fmt"
	"net/http"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/console"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/internal/dispatch"
)

// newConsole builds the admin console over an admin API of its own: the
// same handlers and host interfaces as the public one's (opts), serving
// the console in process only, and knowing a caller by the label of the
// token its session stands for, as the tokens stand now. Its sessions are
// signed with the key every replica sharing the database reads.
func newConsole(ctx context.Context, opts server.Options, gov *governance, tokens *auth.Store, store *approvals.Store) (http.Handler, error) {
	key, err := store.SessionKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("database.dsn: approvals: %w", err)
	}
	api := opts
	// The console signs in with configured tokens only, and its calls
	// carry their label.
	api.Auth, api.OAuth = labelAuth{tokens}, nil
	// The console's reads are not MCP requests, and it has no console.
	api.Observe, api.Console = nil, nil
	c, err := console.New(console.Options{
		API: server.New(api).Handler(), Accounts: accounts{gov}, Key: key, Version: opts.Version, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// labelAuth authenticates the console's in-process calls: the label of a
// configured token, which only the console, having checked its session,
// sends.
type labelAuth struct{ tokens *auth.Store }

func (a labelAuth) Authenticate(authorization string) (dispatch.Principal, bool) {
	label, ok := console.LabelOf(authorization)
	if !ok {
		return dispatch.Principal{}, false
	}
	return a.tokens.ByLabel(label)
}

// accounts finds tokens for the console in the configuration in force,
// which a reload replaces whole.
type accounts struct{ gov *governance }

func (a accounts) find(match func(label string, sum [32]byte) bool) (console.Account, bool) {
	a.gov.mu.Lock()
	defer a.gov.mu.Unlock()
	for _, t := range a.gov.cfg.Tokens {
		if match(t.Label, t.SHA256) {
			return console.Account{Label: t.Label, Scope: t.Scope, TokenSHA256: t.SHA256}, true
		}
	}
	return console.Account{}, false
}

func (a accounts) ByTokenSHA256(sum [32]byte) (console.Account, bool) {
	return a.find(func(_ string, s [32]byte) bool { return s == sum })
}

func (a accounts) ByLabel(label string) (console.Account, bool) {
	return a.find(func(l string, _ [32]byte) bool { return l == label })
}
