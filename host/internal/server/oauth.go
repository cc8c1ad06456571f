package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/internal/dispatch"
)

// OAuth is the OAuth 2.1 resource server the host runs beside its tokens
// (auth.OAuth).
type OAuth interface {
	// Authenticate validates an access token; a refusal is an
	// *auth.TokenError.
	Authenticate(ctx context.Context, token string) (dispatch.Principal, error)
	// Metadata is the protected resource metadata (RFC 9728), served at
	// MetadataPaths without authentication.
	Metadata() []byte
	MetadataPaths() []string
	// Challenge is the WWW-Authenticate value answering a refusal (nil:
	// no token at all).
	Challenge(err error) string
	// InsufficientScope is the 403 asking for the OAuth scope that grants
	// scope, or nil when none does.
	InsufficientScope(scope dispatch.Scope) *auth.TokenError
}

// routeOAuth serves the protected resource metadata when OAuth is on and
// the host is enabled: the document tells clients which authorization
// server issues tokens for this endpoint, so it is public, and a host
// switched off publishes nothing.
func (s *Server) routeOAuth(e *echo.Echo) {
	if s.opts.OAuth == nil || !s.opts.Enabled {
		return
	}
	doc := s.opts.OAuth.Metadata()
	serve := func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Cache-Control", "max-age=300")
		// Public by design: a client running in a browser reads it too.
		h.Set("Access-Control-Allow-Origin", "*")
		return c.JSONBlob(http.StatusOK, doc)
	}
	for _, p := range s.opts.OAuth.MetadataPaths() {
		e.GET(p, serve)
		e.HEAD(p, serve)
	}
}

// authenticateOAuth admits a request to a host running OAuth: a
// configured token first, then an access token. Any other request is told
// how to get a token (RFC 6750, RFC 9728): 401 with a challenge naming
// the metadata and the scopes to ask for, the refusal's error code when a
// token was sent; 403 insufficient_scope for a token granting none of
// this server's scopes; 503 when the issuer's keys cannot be had.
func (s *Server) authenticateOAuth(c echo.Context, authz string, next principalHandler) error {
	if authz != "" {
		if p, ok := s.opts.Auth.Authenticate(authz); ok {
			return next(c, p)
		}
	}
	tok, ok := bearerToken(authz)
	if !ok {
		// No token (or another scheme): RFC 6750 says the challenge then
		// carries no error code.
		return s.oauthRefusal(c, nil)
	}
	p, err := s.opts.OAuth.Authenticate(c.Request().Context(), tok)
	if err != nil {
		return s.oauthRefusal(c, err)
	}
	return next(c, p)
}

// bearerToken is the token of "Bearer <token>": the scheme in any case,
// then the token, up to auth.MaxJWTLength.
func bearerToken(h string) (string, bool) {
	const scheme = "Bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimLeft(h[len(scheme):], " ")
	if tok == "" || len(tok) > auth.MaxJWTLength {
		return tok, tok != "" // too long: still a token, refused as malformed
	}
	return tok, true
}

// oauthRefusal answers a request OAuth refused with err (nil: no token).
func (s *Server) oauthRefusal(c echo.Context, err error) error {
	status, body := http.StatusUnauthorized, oauthError{}
	var te *auth.TokenError
	if errors.As(err, &te) {
		status, body = te.Status, oauthError{Code: te.Code, Description: te.Description, Scope: te.Scope}
	} else if err != nil {
		s.log.LogAttrs(c.Request().Context(), slog.LevelError, "oauth: authenticating a request failed", slog.String("err", err.Error()))
		status, body.Description = http.StatusInternalServerError, "the token could not be checked"
	}
	h := c.Response().Header()
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		if status == http.StatusUnauthorized || body.Code == "insufficient_scope" {
			h.Set(echo.HeaderWWWAuthenticate, s.opts.OAuth.Challenge(err))
		}
	case http.StatusServiceUnavailable:
		h.Set("Retry-After", "5")
	}
	if body.Code == "" && body.Description == "" {
		return c.NoContent(status)
	}
	b, _ := json.Marshal(body) // strings always marshal
	return c.JSONBlob(status, b)
}

// oauthError is the body of an OAuth refusal, as an authorization server
// words its errors.
type oauthError struct {
	Code        string `json:"error,omitempty"`
	Description string `json:"error_description,omitempty"`
	Scope       string `json:"scope,omitempty"`
}

// scopeRefused answers a principal whose scope is not admin on the admin
// API. An OAuth principal is asked to step up (403 insufficient_scope
// naming the admin scope), so its client can get a token that has it;
// a configured token, whose scope no client can change, gets the plain
// 403.
func (s *Server) scopeRefused(c echo.Context, p dispatch.Principal) error {
	if s.opts.OAuth != nil && strings.HasPrefix(p.Token, auth.OAuthLabelPrefix) {
		if te := s.opts.OAuth.InsufficientScope(dispatch.ScopeAdmin); te != nil {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, s.opts.OAuth.Challenge(te))
		}
	}
	return s.problem(c, http.StatusForbidden, forbiddenScope)
}
