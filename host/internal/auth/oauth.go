package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

// OAuthLabelPrefix starts the label of every OAuth principal, so audit
// records and rate limits tell them from configured tokens, whose labels
// have no colon.
const OAuthLabelPrefix = "oauth:"

// MaxJWTLength bounds an access token: a few claims signed take 1 to 2
// KiB; far more is no token an authorization server issues, and costs a
// decode.
const MaxJWTLength = 8 << 10

// maxUserID bounds the user id a token may carry, as the audit trail and
// idempotency keys bound it.
const maxUserID = 255

// MetadataPath is the protected resource metadata's well-known path (RFC
// 9728), served alone and followed by the resource's path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// TokenError is why an access token was not accepted, as RFC 6750 has it:
// Code is the error of the WWW-Authenticate challenge, Status the HTTP
// answer. Description is safe to send: it never quotes the token.
type TokenError struct {
	// Code is "invalid_token" (401), "insufficient_scope" (403), or empty
	// for a refusal that no other token could mend (403: a role capgate
	// does not know) or a failure of capgate's (503).
	Code        string
	Status      int
	Description string
	// Scope is what a 403 insufficient_scope asks for.
	Scope string
	// reason is for the log, at debug: what exactly was wrong.
	reason string
}

func (e *TokenError) Error() string { return e.Description }

// invalid is a 401 invalid_token.
func invalid(description, reason string) *TokenError {
	return &TokenError{Code: "invalid_token", Status: http.StatusUnauthorized, Description: description, reason: reason}
}

// OAuthOptions configure an OAuth resource server.
type OAuthOptions struct {
	Config config.OAuth
	// HasRole reports whether a role is defined under roles as they stand
	// now (a reload may change them); nil admits every role.
	HasRole func(role string) bool
	// HTTPClient fetches the issuer's metadata and keys; nil uses one that
	// gives up after 10 seconds.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock tokens are checked against; nil is time.Now.
	Now func() time.Time
}

// OAuth accepts OAuth 2.1 access tokens: JWTs the configured issuer signed
// for this resource, with keys from its published JWKS. It maps a token's
// claims to a principal. It is safe for concurrent use.
type OAuth struct {
	cfg     config.OAuth
	hasRole func(string) bool
	log     *slog.Logger
	now     func() time.Time
	keys    *keySource
	algs    map[jwa.SignatureAlgorithm]bool
	// checked holds the tokens whose signature and claims passed, so that
	// a client's every request does not pay for the signature again.
	checked checkedTokens

	metadata []byte
	paths    []string
	// metaURL is the metadata's URL every challenge points to; scopes the
	// scopes a challenge asks for, unless a request needs others.
	metaURL string
	scopes  string
}

// NewOAuth builds the resource server and starts fetching the issuer's
// keys in the background, until Close: it never waits for the issuer, so
// an authorization server that is down delays no start.
func NewOAuth(opts OAuthOptions) (*OAuth, error) {
	c := opts.Config
	if c.Issuer == "" || c.Resource == "" || c.Audience == "" {
		return nil, errors.New("auth: OAuth needs an issuer, a resource and an audience")
	}
	o := &OAuth{cfg: c, hasRole: opts.HasRole, log: opts.Logger, now: opts.Now, algs: map[jwa.SignatureAlgorithm]bool{}}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.hasRole == nil {
		o.hasRole = func(string) bool { return true }
	}
	for _, name := range c.Algorithms {
		alg, ok := jwa.LookupSignatureAlgorithm(name)
		if !ok || !slices.Contains(config.OAuthAlgorithms, name) {
			return nil, fmt.Errorf("auth.oauth.algorithms: %q is not an algorithm capgate verifies", name)
		}
		o.algs[alg] = true
	}
	res, err := url.Parse(c.Resource)
	if err != nil || res.Host == "" {
		return nil, fmt.Errorf("auth.oauth.resource: %q is not a URL", c.Resource)
	}
	// RFC 9728 section 3.1: the metadata's URL inserts the well-known path
	// between the resource's host and its path.
	path := strings.TrimSuffix(res.EscapedPath(), "/")
	metaURL := res.Scheme + "://" + res.Host + MetadataPath + path
	o.paths = []string{MetadataPath}
	if path != "" {
		o.paths = append(o.paths, MetadataPath+path)
	}
	o.metadata, err = json.Marshal(struct {
		Resource               string   `json:"resource"`
		AuthorizationServers   []string `json:"authorization_servers"`
		ScopesSupported        []string `json:"scopes_supported,omitempty"`
		BearerMethodsSupported []string `json:"bearer_methods_supported"`
		ResourceName           string   `json:"resource_name,omitempty"`
	}{c.Resource, []string{c.Issuer}, c.ScopesSupported, []string{"header"}, c.ResourceName})
	if err != nil {
		return nil, fmt.Errorf("auth: the protected resource metadata: %w", err)
	}
	o.metaURL = metaURL
	o.scopes = strings.Join(c.ScopesSupported, " ")
	if o.scopes == "" {
		o.scopes = cmpOr(c.Scopes.Read, c.Scopes.Action, c.Scopes.Admin)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	o.keys = newKeySource(c, hc, o.log)
	return o, nil
}

func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// Close stops fetching keys.
func (o *OAuth) Close() { o.keys.close() }

// Metadata is the protected resource metadata document (RFC 9728), JSON.
func (o *OAuth) Metadata() []byte { return o.metadata }

// MetadataPaths are the paths the metadata is served at: the well-known
// path alone, and followed by the resource's path.
func (o *OAuth) MetadataPaths() []string { return o.paths }

// Challenge is the WWW-Authenticate value answering err: a request
// without a token (err nil) learns where the metadata is and which scopes
// to ask for; a refused token also learns why, as RFC 6750 codes it.
func (o *OAuth) Challenge(err error) string {
	var te *TokenError
	errors.As(err, &te)
	scope := o.scopes
	if te != nil && te.Code == "insufficient_scope" {
		// The scopes this request needs, not the general ones.
		scope = te.Scope
	}
	h := `Bearer resource_metadata=` + quote(o.metaURL)
	if scope != "" {
		h += `, scope=` + quote(scope)
	}
	if te == nil || te.Code == "" {
		return h
	}
	return h + `, error=` + quote(te.Code) + `, error_description=` + quote(te.Description)
}

// InsufficientScope is the refusal of a principal of this server that
// lacks scope: 403 insufficient_scope naming the OAuth scope that grants
// it, or nil when no OAuth scope does (the operator left it empty), so no
// new token could help.
func (o *OAuth) InsufficientScope(scope dispatch.Scope) *TokenError {
	var s string
	switch scope {
	case dispatch.ScopeRead:
		s = cmpOr(o.cfg.Scopes.Read, o.cfg.Scopes.Action, o.cfg.Scopes.Admin)
	case dispatch.ScopeAction:
		s = cmpOr(o.cfg.Scopes.Action, o.cfg.Scopes.Admin)
	case dispatch.ScopeAdmin:
		s = o.cfg.Scopes.Admin
	}
	if s == "" {
		return nil
	}
	return &TokenError{Code: "insufficient_scope", Status: http.StatusForbidden, Scope: s,
		Description: "this request needs the " + s + " scope"}
}

// LooksLikeJWT reports whether tok has the shape of a JWS in compact
// form: three base64url parts, at most MaxJWTLength long. Nothing is
// decoded.
func LooksLikeJWT(tok string) bool {
	if len(tok) < 5 || len(tok) > MaxJWTLength {
		return false
	}
	dots := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2 && tok[0] != '.' && tok[len(tok)-1] != '.' && !strings.Contains(tok, "..")
}

// Authenticate validates an access token and maps it to a principal. A
// refusal is a *TokenError; its reason is logged at debug, never the
// token.
func (o *OAuth) Authenticate(ctx context.Context, token string) (dispatch.Principal, error) {
	p, err := o.authenticate(ctx, token)
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) && te.reason != "" && o.log.Enabled(ctx, slog.LevelDebug) {
			o.log.LogAttrs(ctx, slog.LevelDebug, "oauth: access token refused",
				slog.Int("status", te.Status), slog.String("error", te.Code), slog.String("reason", bound(te.reason, 256)))
		}
	}
	return p, err
}

// accessTokenTypes are the typ headers of an access token (see verify).
var accessTokenTypes = []string{"", "jwt", "at+jwt", "application/at+jwt"}

func (o *OAuth) authenticate(ctx context.Context, token string) (dispatch.Principal, error) {
	if !LooksLikeJWT(token) {
		return dispatch.Principal{}, invalid("the access token is malformed", "not a compact JWS")
	}
	sum := sha256.Sum256([]byte(token))
	now := o.now()
	// The keys as they stand before the check: a token checked is taken
	// again only while they do, so a key the issuer withdraws stops
	// admitting its tokens at the fetch that finds it gone.
	keys := o.keys.keys.Load()
	if tok, ok := o.checked.get(sum, keys, now); ok {
		// The claims are mapped again: roles may have changed since.
		return o.principal(ctx, tok)
	}
	tok, err := o.verify(ctx, token)
	if err != nil {
		return dispatch.Principal{}, err
	}
	o.checked.put(sum, tok, keys, now, o.cfg.ClockSkew)
	return o.principal(ctx, tok)
}

// verify checks token's signature and claims, and returns it parsed.
//
// Accepted types: none, JWT, or RFC 9068's access token type. Any other
// (an ID token's profile, a logout token) is not an access token.
func (o *OAuth) verify(ctx context.Context, token string) (jwt.Token, error) {
	// The protected header alone, to choose the key: the whole token is
	// parsed once, by the verification below.
	var h struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return nil, invalid("the access token is malformed", "protected header")
	}
	alg, ok := jwa.LookupSignatureAlgorithm(h.Alg)
	if !ok || !o.algs[alg] {
		return nil, invalid("the access token is signed with an algorithm this server does not accept", "alg "+bound(h.Alg, 32))
	}
	if !slices.Contains(accessTokenTypes, strings.ToLower(h.Typ)) {
		return nil, invalid("the token is not an access token", "typ "+bound(h.Typ, 32))
	}
	key, err := o.keys.lookup(ctx, h.Kid)
	if err != nil {
		return nil, err
	}
	if ka, ok := key.Algorithm(); ok && ka.String() != alg.String() {
		return nil, invalid("the access token's signature does not verify", "the key is for "+ka.String()+", the token says "+alg.String())
	}
	tok, err := jwt.ParseString(token,
		jwt.WithKey(alg, key),
		jwt.WithValidate(true),
		jwt.WithIssuer(o.cfg.Issuer),
		jwt.WithAudience(o.cfg.Audience),
		jwt.WithAcceptableSkew(o.cfg.ClockSkew),
		jwt.WithClock(jwt.ClockFunc(o.now)),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithRequiredClaim(jwt.SubjectKey),
	)
	if err != nil {
		return nil, classify(err)
	}
	var cnf any
	if tok.Get("cnf", &cnf) == nil {
		// A sender-constrained token (DPoP, mTLS) is only safe where the
		// proof is checked; taking it as a plain bearer token would undo
		// the constraint.
		return nil, invalid("sender-constrained tokens are not accepted here", "cnf claim")
	}
	return tok, nil
}

// classify turns a validation failure into the refusal a client reads.
func classify(err error) *TokenError {
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		return invalid("the access token has expired", err.Error())
	case errors.Is(err, jwt.TokenNotYetValidError()), errors.Is(err, jwt.InvalidIssuedAtError()):
		return invalid("the access token is not valid yet", err.Error())
	case errors.Is(err, jwt.InvalidIssuerError()):
		return invalid("the access token was issued by another authorization server", err.Error())
	case errors.Is(err, jwt.InvalidAudienceError()):
		return invalid("the access token was issued for another resource", err.Error())
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return invalid("the access token lacks a required claim (exp, sub)", err.Error())
	case errors.Is(err, jwt.ValidateError()):
		return invalid("the access token is not valid", err.Error())
	}
	return invalid("the access token's signature does not verify", err.Error())
}

// plainSubject is a sub a label may carry as is: short, and made of
// characters no log or header reader trips on.
var plainSubject = regexp.MustCompile(`^[A-Za-z0-9._@+|-]{1,64}$`)

// principal maps a validated token's claims to a principal.
func (o *OAuth) principal(ctx context.Context, tok jwt.Token) (dispatch.Principal, error) {
	sub, _ := tok.Subject()
	if sub == "" || len(sub) > maxUserID || !utf8.ValidString(sub) {
		return dispatch.Principal{}, invalid("the access token's sub is empty or too long", "sub")
	}
	p := dispatch.Principal{Token: subjectLabel(sub)}

	scopes := grantedScopes(tok)
	switch s := o.cfg.Scopes; {
	case s.Admin != "" && scopes[s.Admin]:
		p.Scope = dispatch.ScopeAdmin
	case s.Action != "" && scopes[s.Action]:
		p.Scope = dispatch.ScopeAction
	case s.Read != "" && scopes[s.Read]:
		p.Scope = dispatch.ScopeRead
	default:
		return dispatch.Principal{}, &TokenError{Code: "insufficient_scope", Status: http.StatusForbidden, Scope: o.scopes,
			Description: "the access token grants none of this server's scopes", reason: "no mapped scope"}
	}

	if o.cfg.UserClaim != "" {
		var v any
		if tok.Get(o.cfg.UserClaim, &v) == nil {
			u, ok := v.(string)
			if !ok || u == "" || len(u) > maxUserID || !utf8.ValidString(u) || strings.ContainsFunc(u, unicode.IsControl) {
				o.log.LogAttrs(ctx, slog.LevelWarn, "oauth: a token's user claim is not a user id; check auth.oauth.user_claim",
					slog.String("claim", o.cfg.UserClaim), slog.String("label", p.Token))
				return dispatch.Principal{}, &TokenError{Status: http.StatusForbidden,
					Description: "the access token's user claim is not a user id this server accepts"}
			}
			p.UserID = u
		}
	}

	p.Role = o.cfg.DefaultRole
	if o.cfg.RoleClaim != "" {
		var v any
		if tok.Get(o.cfg.RoleClaim, &v) == nil {
			role, ok := o.role(v)
			if !ok {
				o.log.LogAttrs(ctx, slog.LevelWarn, "oauth: a token's role is not defined under roles; the request is refused",
					slog.String("claim", o.cfg.RoleClaim), slog.String("role", bound(fmt.Sprint(v), 64)), slog.String("label", p.Token))
				return dispatch.Principal{}, &TokenError{Status: http.StatusForbidden,
					Description: "the access token's role is not one this server knows"}
			}
			p.Role = role
		}
	}
	if p.Role != "" && !o.hasRole(p.Role) {
		o.log.LogAttrs(ctx, slog.LevelWarn, "oauth: the default role is no longer defined under roles; the request is refused",
			slog.String("role", p.Role), slog.String("label", p.Token))
		return dispatch.Principal{}, &TokenError{Status: http.StatusForbidden,
			Description: "the access token's role is not one this server knows"}
	}
	return p, nil
}

// role is the role a role claim names: a string, or the first string of a
// list that is a defined role.
func (o *OAuth) role(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, v != "" && o.hasRole(v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" && o.hasRole(s) {
				return s, true
			}
		}
	case []string:
		for _, s := range v {
			if s != "" && o.hasRole(s) {
				return s, true
			}
		}
	}
	return "", false
}

// grantedScopes are the scopes a token grants: its scope claim
// (space-delimited, RFC 9068) and its scp claim (a list or a string, as
// some authorization servers write it).
func grantedScopes(tok jwt.Token) map[string]bool {
	out := map[string]bool{}
	for _, name := range []string{"scope", "scp"} {
		var v any
		if tok.Get(name, &v) != nil {
			continue
		}
		switch v := v.(type) {
		case string:
			for _, s := range strings.Fields(v) {
				out[s] = true
			}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out[s] = true
				}
			}
		case []string:
			for _, s := range v {
				out[s] = true
			}
		}
	}
	return out
}

// subjectLabel names an OAuth principal in audit records and rate limits:
// "oauth:" and its sub, or a digest of a sub too long or too odd to show.
// Every subject gets a label of its own, so two users never share a
// bucket, and the label is never the token.
func subjectLabel(sub string) string {
	if plainSubject.MatchString(sub) {
		return OAuthLabelPrefix + sub
	}
	sum := sha256.Sum256([]byte(sub))
	return OAuthLabelPrefix + "sha256:" + hex.EncodeToString(sum[:16])
}

// quote is an RFC 9110 quoted-string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r == '"' || r == '\\' {
			b.WriteByte('\\')
		}
		if r < 0x20 || r == 0x7f {
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}

// bound cuts s to n bytes for a log line.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
