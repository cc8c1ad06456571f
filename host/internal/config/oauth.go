package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// OAuthAlgorithms are the JWS algorithms auth.oauth.algorithms may name,
// and its default: every asymmetric one. "none" and the HMAC algorithms
// (HS256…) are refused: a token signed with a key the verifier also holds
// proves nothing about who made it, and a public key used as an HMAC
// secret lets anyone forge tokens.
var OAuthAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// mcpPath is the path of the MCP endpoint (server.MCPPath), which the
// default auth.oauth.resource names.
const mcpPath = "/api/v1/mcp"

// Bounds on auth.oauth values.
const (
	maxOAuthURL        = 2048
	maxClaimName       = 128
	maxScopeToken      = 128
	maxScopesSupported = 32
	maxClockSkew       = 5 * time.Minute
)

// scopeToken is RFC 6749's scope-token: %x21 / %x23-5B / %x5D-7E.
var scopeToken = regexp.MustCompile(`^[\x21\x23-\x5B\x5D-\x7E]+$`)

// oauthLists are the list values of auth.oauth, which are read from the
// file's nodes rather than through the scalar settings.
type oauthLists struct {
	algorithms, scopesSupported []string
	algorithmsSet, scopesSet    bool
	algorithmsLine, scopesLine  int
}

// authSection reads the auth section: its scalars go to the settings
// layer, its lists are read here.
func (l *loader) authSection(n *yaml.Node) oauthLists {
	var out oauthLists
	pairs, _ := l.mapping("auth", n)
	for _, p := range pairs {
		if p.key != "oauth" {
			l.unknown(p, authKeys)
			continue
		}
		oauth, _ := l.mapping(p.path, p.val)
		for _, o := range oauth {
			switch o.key {
			case "algorithms":
				out.algorithmsSet, out.algorithmsLine = true, resolve(o.val).Line
				out.algorithms = l.uniqueStrings(o.path, o.val, checkAlgorithm)
			case "scopes_supported":
				out.scopesSet, out.scopesLine = true, resolve(o.val).Line
				out.scopesSupported = l.uniqueStrings(o.path, o.val, checkScopeToken)
			case "scopes":
				scopes, _ := l.mapping(o.path, o.val)
				for _, sc := range scopes {
					if !slices.Contains(oauthScopeKeys, sc.key) {
						l.unknown(sc, oauthScopeKeys)
						continue
					}
					l.fileScalar(settingFor("auth.oauth.scopes."+sc.key), sc.val)
				}
			default:
				if !slices.Contains(oauthKeys, o.key) {
					l.unknown(o, oauthKeys)
					continue
				}
				l.fileScalar(settingFor("auth.oauth."+o.key), o.val)
			}
		}
	}
	return out
}

func checkAlgorithm(s string) (string, error) {
	switch {
	case slices.Contains(OAuthAlgorithms, s):
		return s, nil
	case strings.EqualFold(s, "none"):
		return "", fmt.Errorf(`"none" accepts unsigned tokens, which anyone can make; use one of %s`, strings.Join(OAuthAlgorithms, ", "))
	case strings.HasPrefix(strings.ToUpper(s), "HS"):
		return "", fmt.Errorf("%s is a shared-secret algorithm: a verifier holding the secret could make tokens itself, and a published key used as the secret lets anyone; use one of %s", shorten(s), strings.Join(OAuthAlgorithms, ", "))
	}
	return "", fmt.Errorf("must be one of %s, got %q", strings.Join(OAuthAlgorithms, ", "), shorten(s))
}

func checkScopeToken(s string) (string, error) {
	switch {
	case len(s) > maxScopeToken || !scopeToken.MatchString(s):
		return "", fmt.Errorf("must be an OAuth scope: 1 to %d printable ASCII characters without space, '\"' or '\\\\', got %q", maxScopeToken, shorten(s))
	case s == "offline_access":
		return "", fmt.Errorf("offline_access asks the authorization server for a refresh token; it is not a scope of this resource, and MCP servers do not publish it")
	}
	return s, nil
}

// oauth resolves auth.oauth once listen, roles and default_role are known.
// An empty issuer leaves OAuth off; the other settings are checked all the
// same, so a mistake shows before the issuer is set.
func (l *loader) oauth(cfg *Config, lists oauthLists) {
	get := func(key string) (any, source, bool) {
		v, ok := l.setting(key, settingFor(key).kind)
		return v, l.source(key), ok
	}
	str := func(key string) (string, source) {
		v, src, ok := get(key)
		if !ok {
			return "", src
		}
		return v.(string), src
	}
	o := &OAuth{}
	ok := true
	bad := func(key string, src source, format string, args ...any) {
		l.addAt(key, src, format, args...)
		ok = false
	}

	var issuerSrc source
	o.Issuer, issuerSrc = str("auth.oauth.issuer")
	if o.Issuer != "" {
		if msg := checkOAuthURL(o.Issuer, "the authorization server's issuer identifier, such as https://auth.example.com/realms/capgate", true); msg != "" {
			bad("auth.oauth.issuer", issuerSrc, "%s", msg)
		}
	}
	var src source
	if o.JWKSURL, src = str("auth.oauth.jwks_url"); o.JWKSURL != "" {
		if msg := checkOAuthURL(o.JWKSURL, "the URL of the issuer's JSON Web Key Set, or empty to find it in the issuer's metadata", false); msg != "" {
			bad("auth.oauth.jwks_url", src, "%s", msg)
		}
	}
	o.Resource, src = str("auth.oauth.resource")
	switch {
	case o.Resource != "":
		if msg := checkOAuthURL(o.Resource, "this server's resource identifier, the URL clients reach the MCP endpoint at, such as https://capgate.example.com/api/v1/mcp", true); msg != "" {
			bad("auth.oauth.resource", src, "%s", msg)
		}
	case o.Issuer != "":
		// Only a loopback listen address says how clients reach the host;
		// behind a proxy or on a routable address the URL is not ours to
		// guess, and a Host header is the caller's to choose.
		if res, msg := defaultResource(cfg.Listen); msg != "" {
			bad("auth.oauth.resource", src, "%s", msg)
		} else {
			o.Resource = res
		}
	}
	if o.Audience, src = str("auth.oauth.audience"); o.Audience != "" {
		if len(o.Audience) > maxOAuthURL || strings.ContainsFunc(o.Audience, unicode.IsControl) {
			bad("auth.oauth.audience", src, "must be at most %d characters, none a control character", maxOAuthURL)
		}
	} else {
		o.Audience = o.Resource
	}

	o.Algorithms = slices.Clone(OAuthAlgorithms)
	if lists.algorithmsSet {
		if len(lists.algorithms) == 0 {
			l.addf("auth.oauth.algorithms", lists.algorithmsLine, "must name at least one of %s", strings.Join(OAuthAlgorithms, ", "))
			ok = false
		}
		o.Algorithms = lists.algorithms
	}

	duration := func(key string) (time.Duration, source) {
		v, src, vok := get(key)
		if !vok {
			ok = false
			return 0, src
		}
		return v.(time.Duration), src
	}
	if o.ClockSkew, src = duration("auth.oauth.clock_skew"); o.ClockSkew < 0 || o.ClockSkew > maxClockSkew {
		bad("auth.oauth.clock_skew", src, "must be from 0s to %s, got %s", maxClockSkew, o.ClockSkew)
	}
	if o.JWKSRefreshInterval, src = duration("auth.oauth.jwks_refresh_interval"); o.JWKSRefreshInterval < time.Minute || o.JWKSRefreshInterval > 24*time.Hour {
		bad("auth.oauth.jwks_refresh_interval", src, "must be from 1m to 24h, got %s", o.JWKSRefreshInterval)
	}
	if o.JWKSMinRefreshInterval, src = duration("auth.oauth.jwks_min_refresh_interval"); o.JWKSMinRefreshInterval < time.Second || o.JWKSMinRefreshInterval > max(o.JWKSRefreshInterval, time.Minute) {
		bad("auth.oauth.jwks_min_refresh_interval", src, "must be from 1s to auth.oauth.jwks_refresh_interval (%s), got %s", max(o.JWKSRefreshInterval, time.Minute), o.JWKSMinRefreshInterval)
	}

	claim := func(key string, required bool) string {
		v, src := str(key)
		switch {
		case v == "" && required:
			bad(key, src, "must name a claim, such as sub")
		case len(v) > maxClaimName || strings.ContainsFunc(v, unicode.IsControl):
			bad(key, src, "must be a claim name of at most %d characters, none a control character", maxClaimName)
		}
		return v
	}
	o.UserClaim = claim("auth.oauth.user_claim", true)
	o.RoleClaim = claim("auth.oauth.role_claim", false)
	if o.DefaultRole, src = str("auth.oauth.default_role"); o.DefaultRole != "" {
		if _, defined := cfg.Roles[o.DefaultRole]; !defined {
			bad("auth.oauth.default_role", src, "%s", undefinedRole(o.DefaultRole, cfg.Roles))
		}
	} else {
		o.DefaultRole = cfg.DefaultRole
	}

	seen := map[string]string{}
	for _, level := range oauthScopeKeys {
		key := "auth.oauth.scopes." + level
		v, src := str(key)
		if v != "" {
			if _, err := checkScopeToken(v); err != nil {
				bad(key, src, "%v", err)
			} else if other, dup := seen[v]; dup {
				bad(key, src, "is also %s: each capgate scope needs an OAuth scope of its own", other)
			}
			seen[v] = key
		}
		switch level {
		case "read":
			o.Scopes.Read = v
		case "action":
			o.Scopes.Action = v
		default:
			o.Scopes.Admin = v
		}
	}
	if o.Scopes == (OAuthScopes{}) {
		bad("auth.oauth.scopes", source{}, "at least one of read, action and admin must name an OAuth scope, or no token could be granted anything")
	}
	if lists.scopesSet {
		if len(lists.scopesSupported) > maxScopesSupported {
			l.addf("auth.oauth.scopes_supported", lists.scopesLine, "at most %d scopes, got %d", maxScopesSupported, len(lists.scopesSupported))
			ok = false
		}
		o.ScopesSupported = lists.scopesSupported
	} else {
		// The least a client needs to work: reads and actions. The admin
		// scope is asked for when the admin API needs it (403
		// insufficient_scope), not granted to every client up front.
		for _, s := range []string{o.Scopes.Read, o.Scopes.Action} {
			if s != "" {
				o.ScopesSupported = append(o.ScopesSupported, s)
			}
		}
	}
	o.ResourceName, src = str("auth.oauth.resource_name")
	if len(o.ResourceName) > 256 || strings.ContainsFunc(o.ResourceName, unicode.IsControl) {
		bad("auth.oauth.resource_name", src, "must be at most 256 characters, none a control character")
	}
	if ok && o.Issuer != "" {
		cfg.Auth.OAuth = o
	}
}

// defaultResource is the resource identifier of a host listening on a
// loopback address: the URL a client on the same machine uses.
func defaultResource(listen string) (string, string) {
	const need = "must be set (the URL clients reach the MCP endpoint at, such as https://capgate.example.com/api/v1/mcp)"
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", need
	}
	if !isLoopbackHost(host) {
		return "", need + fmt.Sprintf(": listen (%s) is not a loopback address, so it does not say how clients reach capgate", listen)
	}
	if port == "0" {
		return "", need + ": listen has port 0, chosen when capgate starts"
	}
	return "http://" + net.JoinHostPort(host, port) + mcpPath, ""
}

// checkOAuthURL accepts an absolute https URL, or http to a loopback host
// only: keys or metadata fetched over plain http from anywhere else could
// be swapped on the way, and then anyone could make tokens capgate
// accepts. Loopback never leaves the machine (a local authorization
// server, tests). A resource identifier has no query either (RFC 8707).
func checkOAuthURL(s, what string, noQuery bool) string {
	u, err := url.Parse(s)
	switch {
	case len(s) > maxOAuthURL:
		return fmt.Sprintf("must be at most %d characters", maxOAuthURL)
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return fmt.Sprintf("must be %s; got %q", what, shorten(s))
	case u.User != nil:
		return "must not carry credentials"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Sprintf("must have no fragment, got %q", shorten(s))
	case noQuery && (u.RawQuery != "" || u.ForceQuery):
		return fmt.Sprintf("must have no query, got %q", shorten(s))
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return ""
	case u.Scheme == "http":
		return fmt.Sprintf("must be https: plain http is accepted for a loopback host only (127.0.0.1, ::1, localhost), as anything on the way could change what it serves; got %q", shorten(s))
	}
	return fmt.Sprintf("scheme must be https, got %q", u.Scheme)
}

// isLoopbackHost reports whether host names this machine: localhost or a
// loopback IP address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
