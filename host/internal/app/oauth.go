package app

import (
	"log/slog"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/config"
)

// openOAuth starts the OAuth resource server auth.oauth configures, or
// none. It does not wait for the issuer: its keys are fetched in the
// background, and an issuer that is down delays nothing.
func openOAuth(cfg *config.Config, gov *governance, log *slog.Logger) (*auth.OAuth, error) {
	if cfg.Auth.OAuth == nil {
		return nil, nil
	}
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, HasRole: gov.hasRole, Logger: log})
	if err != nil {
		return nil, err
	}
	c := cfg.Auth.OAuth
	log.Info("oauth: accepting access tokens beside the configured tokens", "issuer", c.Issuer, "resource", c.Resource,
		"audience", c.Audience, "metadata", auth.MetadataPath)
	return o, nil
}

// hasRole reports whether role is defined under roles as the
// configuration in force has them: OAuth principals' roles are checked
// as a reload leaves them.
func (g *governance) hasRole(role string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.cfg.Roles[role]
	return ok
}
