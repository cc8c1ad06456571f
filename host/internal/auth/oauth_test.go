package auth_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/auth/authtest"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

const (
	resource = "http://127.0.0.1:8080/api/v1/mcp"
	robot    = "robot"
	secret   = "robot-secret-0001"
	public   = "desktop-app"
	redirect = "http://127.0.0.1:3999/callback"
)

// provider is a running authorization server with a confidential client
// (robot) and a public one (desktop-app), and users alice (role customer),
// bob (no role claim) and mallory (a role capgate does not know).
func provider(t *testing.T, opts authtest.Options) *authtest.Server {
	t.Helper()
	as := authtest.Start(t, opts)
	as.AddClient(authtest.Client{ID: robot, Secret: secret})
	as.AddClient(authtest.Client{ID: public, RedirectURIs: []string{redirect}})
	as.AddUser(authtest.User{Subject: "alice", Claims: map[string]any{"capgate_role": "customer", "email": "alice@example.com"}})
	as.AddUser(authtest.User{Subject: "bob"})
	as.AddUser(authtest.User{Subject: "mallory", Claims: map[string]any{"capgate_role": "root"}})
	return as
}

// oauthConfig is the auth.oauth a host trusting as would load.
func oauthConfig(t *testing.T, as *authtest.Server, extra string) config.OAuth {
	t.Helper()
	cfg, err := config.Parse([]byte(`
roles: {customer: [booking.read], staff: ["*"], guest: []}
default_role: guest
auth:
  oauth:
    issuer: `+as.Issuer+`
    resource: `+resource+`
    role_claim: capgate_role
`+extra), "")
	if err != nil {
		t.Fatal(err)
	}
	return *cfg.Auth.OAuth
}

type fixture struct {
	as    *authtest.Server
	oauth *auth.OAuth
	now   time.Time
}

func newOAuth(t *testing.T, as *authtest.Server, cfg config.OAuth, now func() time.Time) *auth.OAuth {
	t.Helper()
	o, _ := newOAuthLog(t, as, cfg, now)
	return o
}

// newOAuthLog is newOAuth with its log.
func newOAuthLog(t *testing.T, as *authtest.Server, cfg config.OAuth, now func() time.Time) (*auth.OAuth, *syncBuffer) {
	t.Helper()
	if cfg.JWKSMinRefreshInterval == 30*time.Second {
		cfg.JWKSMinRefreshInterval = time.Second // the default; tests retry sooner
	}
	var log syncBuffer
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: cfg, Now: now, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		HasRole: func(r string) bool { return r == "customer" || r == "staff" || r == "guest" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o, &log
}

// syncBuffer is a log many goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func robotToken(t *testing.T, as *authtest.Server, scope, res string) string {
	t.Helper()
	tok, err := as.ClientCredentials(ctx(t), robot, secret, scope, res)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func userToken(t *testing.T, as *authtest.Server, user, scope, res string) string {
	t.Helper()
	as.LoginAs(user)
	tok, err := as.AuthorizationCode(ctx(t), public, redirect, scope, res)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// refusal asserts err is a *TokenError with status, code and description.
func refusal(t *testing.T, p dispatch.Principal, err error, status int, code, description string) {
	t.Helper()
	var te *auth.TokenError
	if !errors.As(err, &te) {
		t.Fatalf("got %+v, %v; want a %d refusal %q", p, err, status, description)
	}
	if te.Status != status || te.Code != code || te.Description != description {
		t.Fatalf("refused %d %q %q; want %d %q %q", te.Status, te.Code, te.Description, status, code, description)
	}
}

func TestOAuthAcceptsTokensOfItsIssuerForItsResource(t *testing.T) {
	as := provider(t, authtest.Options{})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	tests := []struct {
		name  string
		token string
		want  dispatch.Principal
	}{
		{"client credentials, action", robotToken(t, as, "capgate:action", resource),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeAction, UserID: robot, Token: "oauth:robot"}},
		{"client credentials, read", robotToken(t, as, "capgate:read", resource),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: robot, Token: "oauth:robot"}},
		// A broader scope implies the narrower ones.
		{"admin beside read", robotToken(t, as, "capgate:read capgate:admin", resource),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeAdmin, UserID: robot, Token: "oauth:robot"}},
		{"authorization code, role from the claim", userToken(t, as, "alice", "openid capgate:action", resource),
			dispatch.Principal{Role: "customer", Scope: dispatch.ScopeAction, UserID: "alice", Token: "oauth:alice"}},
		{"authorization code, no role claim: the default role", userToken(t, as, "bob", "capgate:read", resource),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: "bob", Token: "oauth:bob"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tt.token)
			if err != nil || p != tt.want {
				t.Fatalf("got %+v, %v; want %+v", p, err, tt.want)
			}
		})
	}
}

func TestOAuthRefusesTokensForAnotherResource(t *testing.T) {
	as := provider(t, authtest.Options{})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	for name, tok := range map[string]string{
		"another resource":          robotToken(t, as, "capgate:action", "https://other.example.com/mcp"),
		"no resource: the client's": robotToken(t, as, "capgate:action", ""),
		"a user's, for elsewhere":   userToken(t, as, "alice", "capgate:action", "http://127.0.0.1:8080/api/v1/mcp/other"),
	} {
		t.Run(name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tok)
			refusal(t, p, err, 401, "invalid_token", "the access token was issued for another resource")
		})
	}
	// A configured audience replaces the resource as what aud must hold.
	other := newOAuth(t, as, oauthConfig(t, as, "    audience: api://capgate\n"), nil)
	p, err := other.Authenticate(ctx(t), robotToken(t, as, "capgate:read", resource))
	refusal(t, p, err, 401, "invalid_token", "the access token was issued for another resource")
	if p, err := other.Authenticate(ctx(t), robotToken(t, as, "capgate:read", "api://capgate")); err != nil || p.Scope != dispatch.ScopeRead {
		t.Fatalf("token for api://capgate: %+v, %v", p, err)
	}
}

func TestOAuthRefusesExpiredAndFutureTokens(t *testing.T) {
	as := provider(t, authtest.Options{TokenLifetime: 5 * time.Minute})
	tok := robotToken(t, as, "capgate:read", resource)
	cfg := oauthConfig(t, as, "    clock_skew: 30s\n")
	for _, tt := range []struct {
		name        string
		shift       time.Duration
		description string
	}{
		{"expired", 6 * time.Minute, "the access token has expired"},
		{"before it was issued", -2 * time.Minute, "the access token is not valid yet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := newOAuth(t, as, cfg, func() time.Time { return time.Now().Add(tt.shift) })
			p, err := o.Authenticate(ctx(t), tok)
			refusal(t, p, err, 401, "invalid_token", tt.description)
		})
	}
	t.Run("within the skew", func(t *testing.T) {
		o := newOAuth(t, as, cfg, func() time.Time { return time.Now().Add(5*time.Minute + 20*time.Second) })
		if _, err := o.Authenticate(ctx(t), tok); err != nil {
			t.Fatalf("a token 20s past exp with 30s of skew: %v", err)
		}
	})
}

func TestOAuthRefusesAnotherIssuer(t *testing.T) {
	as := provider(t, authtest.Options{})
	// Another authorization server signing with the very same keys: only
	// iss tells its tokens apart.
	key := authtest.NewKey(t, jose.RS256)
	as.Rotate(key, true)
	other := provider(t, authtest.Options{Keys: []*authtest.Key{key}})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	if _, err := o.Authenticate(ctx(t), robotToken(t, as, "capgate:read", resource)); err != nil {
		t.Fatalf("own issuer's token: %v", err)
	}
	p, err := o.Authenticate(ctx(t), robotToken(t, other, "capgate:read", resource))
	refusal(t, p, err, 401, "invalid_token", "the access token was issued by another authorization server")
}

func TestOAuthRefusesBadSignatures(t *testing.T) {
	as := provider(t, authtest.Options{})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	tok := robotToken(t, as, "capgate:action", resource)
	parts := strings.Split(tok, ".")

	// The payload changed: scope raised to admin, signature kept.
	var claims map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["scope"] = "capgate:admin"
	raised, _ := json.Marshal(claims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(raised) + "." + parts[2]

	// The signature's bytes changed.
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[10] ^= 0xff
	flipped := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)

	// Signed with a key of the same kid that the issuer never published.
	var hdr struct {
		Kid string `json:"kid"`
	}
	rawHdr, _ := base64.RawURLEncoding.DecodeString(parts[0])
	_ = json.Unmarshal(rawHdr, &hdr)
	impostor := authtest.NewKey(t, jose.RS256)
	impostor.ID = hdr.Kid
	forged := sign(t, impostor, nil, validClaims(as, "capgate:admin"))

	for name, tok := range map[string]string{"payload changed": tampered, "signature changed": flipped, "another key, same kid": forged} {
		t.Run(name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tok)
			refusal(t, p, err, 401, "invalid_token", "the access token's signature does not verify")
		})
	}
}

// validClaims are the claims of a token as issues it, for tokens a test
// signs itself.
func validClaims(as *authtest.Server, scope string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": as.Issuer, "aud": resource, "sub": "carol", "scope": scope,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// sign makes a JWS with key over claims, headers added to the protected
// header.
func sign(t testing.TB, key *authtest.Key, headers map[string]any, claims map[string]any) string {
	t.Helper()
	jk, err := jwk.Import(key.Private)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	_ = h.Set(jws.KeyIDKey, key.ID)
	for k, v := range headers {
		if v == nil {
			_ = h.Remove(k)
			continue
		}
		_ = h.Set(k, v)
	}
	payload, _ := json.Marshal(claims)
	alg, _ := jwa.LookupSignatureAlgorithm(string(key.Algorithm))
	out, err := jws.Sign(payload, jws.WithKey(alg, jk, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestOAuthChecksTheTokenItself(t *testing.T) {
	key := authtest.NewKey(t, jose.RS256)
	as := provider(t, authtest.Options{Keys: []*authtest.Key{key}})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	with := func(change func(map[string]any)) map[string]any {
		c := validClaims(as, "capgate:read")
		change(c)
		return c
	}
	if p, err := o.Authenticate(ctx(t), sign(t, key, nil, validClaims(as, "capgate:read"))); err != nil || p.Token != "oauth:carol" {
		t.Fatalf("a well-made token: %+v, %v", p, err)
	}
	if p, err := o.Authenticate(ctx(t), sign(t, key, map[string]any{"typ": "at+jwt"}, validClaims(as, "capgate:read"))); err != nil || p.Token != "oauth:carol" {
		t.Fatalf("typ at+jwt (RFC 9068): %+v, %v", p, err)
	}
	// The issuer publishes one key: a token naming none is checked with it.
	if _, err := o.Authenticate(ctx(t), sign(t, key, map[string]any{jws.KeyIDKey: nil}, validClaims(as, "capgate:read"))); err != nil {
		t.Fatalf("no kid, one published key: %v", err)
	}

	// "none" and HMAC signed with the published key as the secret: the
	// classic forgeries, refused before any key is looked at.
	pubDER, _ := x509.MarshalPKIXPublicKey(key.Private.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacTok, err := jwt.Sign(must(jwt.NewBuilder().Issuer(as.Issuer).Audience([]string{resource}).Subject("eve").
		Expiration(time.Now().Add(time.Hour)).Claim("scope", "capgate:admin").Build()), jwt.WithKey(jwa.HS256(), pubPEM))
	if err != nil {
		t.Fatal(err)
	}
	unsigned := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
		base64.RawURLEncoding.EncodeToString(must(json.Marshal(validClaims(as, "capgate:admin")))) + "."

	tests := []struct {
		name, token, description string
	}{
		{"HS256 with the public key as secret", string(hmacTok), "the access token is signed with an algorithm this server does not accept"},
		{"alg none", unsigned, "the access token is malformed"},
		{"not a JWT", "cg_" + strings.Repeat("x", 43), "the access token is malformed"},
		{"two parts", "eyJhbGciOiJSUzI1NiJ9.e30", "the access token is malformed"},
		{"garbage header", "eyJ!.e30.sig", "the access token is malformed"},
		{"too long", "eyJ" + strings.Repeat("a", auth.MaxJWTLength) + ".e30.c2ln", "the access token is malformed"},
		{"an ID token's type", sign(t, key, map[string]any{"typ": "id_token+jwt"}, validClaims(as, "capgate:read")), "the token is not an access token"},
		{"a logout token", sign(t, key, map[string]any{"typ": "logout+jwt"}, validClaims(as, "capgate:read")), "the token is not an access token"},
		{"no exp", sign(t, key, nil, with(func(c map[string]any) { delete(c, "exp") })), "the access token lacks a required claim (exp, sub)"},
		{"no sub", sign(t, key, nil, with(func(c map[string]any) { delete(c, "sub") })), "the access token lacks a required claim (exp, sub)"},
		{"no iss", sign(t, key, nil, with(func(c map[string]any) { delete(c, "iss") })), "the access token was issued by another authorization server"},
		{"no aud", sign(t, key, nil, with(func(c map[string]any) { delete(c, "aud") })), "the access token was issued for another resource"},
		{"aud of others only", sign(t, key, nil, with(func(c map[string]any) { c["aud"] = []string{"a", "b"} })), "the access token was issued for another resource"},
		{"nbf ahead", sign(t, key, nil, with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })), "the access token is not valid yet"},
		{"sender-constrained", sign(t, key, nil, with(func(c map[string]any) { c["cnf"] = map[string]any{"jkt": "abc"} })), "sender-constrained tokens are not accepted here"},
		{"sub too long", sign(t, key, nil, with(func(c map[string]any) { c["sub"] = strings.Repeat("s", 256) })), "the access token's sub is empty or too long"},
		{"unknown kid", sign(t, key, map[string]any{jws.KeyIDKey: "not-published"}, validClaims(as, "capgate:read")), "the access token is signed with a key the issuer does not publish"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tt.token)
			refusal(t, p, err, 401, "invalid_token", tt.description)
		})
	}

	t.Run("aud among others", func(t *testing.T) {
		tok := sign(t, key, nil, with(func(c map[string]any) { c["aud"] = []string{"https://other.example.com", resource} }))
		if _, err := o.Authenticate(ctx(t), tok); err != nil {
			t.Fatalf("a token for this resource and another: %v", err)
		}
	})
	t.Run("an algorithm not configured", func(t *testing.T) {
		es := newOAuth(t, as, oauthConfig(t, as, "    algorithms: [ES256]\n"), nil)
		p, err := es.Authenticate(ctx(t), sign(t, key, nil, validClaims(as, "capgate:read")))
		refusal(t, p, err, 401, "invalid_token", "the access token is signed with an algorithm this server does not accept")
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestOAuthMapsClaims(t *testing.T) {
	key := authtest.NewKey(t, jose.ES256)
	as := provider(t, authtest.Options{Keys: []*authtest.Key{key}})
	o, log := newOAuthLog(t, as, oauthConfig(t, as, "    user_claim: email\n    scopes: {read: files:read, action: files:write, admin: \"\"}\n"), nil)
	claims := func(change func(map[string]any)) string {
		c := validClaims(as, "files:read")
		c["email"] = "carol@example.com"
		change(c)
		return sign(t, key, nil, c)
	}
	long := strings.Repeat("x", 100)
	tests := []struct {
		name  string
		token string
		want  dispatch.Principal
	}{
		{"user from the named claim", claims(func(map[string]any) {}),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: "carol@example.com", Token: "oauth:carol"}},
		{"no user claim: bound to no user", claims(func(c map[string]any) { delete(c, "email") }),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, Token: "oauth:carol"}},
		{"scp as a list", claims(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"openid", "files:write"} }),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeAction, UserID: "carol@example.com", Token: "oauth:carol"}},
		{"scp as a string", claims(func(c map[string]any) { delete(c, "scope"); c["scp"] = "files:write" }),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeAction, UserID: "carol@example.com", Token: "oauth:carol"}},
		{"role as a string", claims(func(c map[string]any) { c["capgate_role"] = "staff" }),
			dispatch.Principal{Role: "staff", Scope: dispatch.ScopeRead, UserID: "carol@example.com", Token: "oauth:carol"}},
		{"role list: the first defined role", claims(func(c map[string]any) { c["capgate_role"] = []string{"offline", "customer", "staff"} }),
			dispatch.Principal{Role: "customer", Scope: dispatch.ScopeRead, UserID: "carol@example.com", Token: "oauth:carol"}},
		{"a long sub: a digest names it", claims(func(c map[string]any) { c["sub"] = long }),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: "carol@example.com", Token: "oauth:sha256:" + auth.HashToken(long)[:32]}},
		{"a sub with a space: a digest names it", claims(func(c map[string]any) { c["sub"] = "carol smith" }),
			dispatch.Principal{Role: "guest", Scope: dispatch.ScopeRead, UserID: "carol@example.com", Token: "oauth:sha256:" + auth.HashToken("carol smith")[:32]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tt.token)
			if err != nil || p != tt.want {
				t.Fatalf("got %+v, %v; want %+v", p, err, tt.want)
			}
		})
	}
	refused := []struct {
		name, token string
		status      int
		code, desc  string
	}{
		{"a role not defined", claims(func(c map[string]any) { c["capgate_role"] = "root" }), 403, "", "the access token's role is not one this server knows"},
		{"no role of the list defined", claims(func(c map[string]any) { c["capgate_role"] = []string{"root", "sudo"} }), 403, "", "the access token's role is not one this server knows"},
		{"role not a string", claims(func(c map[string]any) { c["capgate_role"] = 7 }), 403, "", "the access token's role is not one this server knows"},
		{"user claim not a string", claims(func(c map[string]any) { c["email"] = []string{"a"} }), 403, "", "the access token's user claim is not a user id this server accepts"},
		{"user claim empty", claims(func(c map[string]any) { c["email"] = "" }), 403, "", "the access token's user claim is not a user id this server accepts"},
		{"no scope of this server", claims(func(c map[string]any) { c["scope"] = "openid profile" }), 403, "insufficient_scope", "the access token grants none of this server's scopes"},
		// admin maps to no OAuth scope here: capgate:admin grants nothing.
		{"admin scope off", claims(func(c map[string]any) { c["scope"] = "capgate:admin" }), 403, "insufficient_scope", "the access token grants none of this server's scopes"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			p, err := o.Authenticate(ctx(t), tt.token)
			refusal(t, p, err, tt.status, tt.code, tt.desc)
		})
	}
	// The operator learns why a role was refused, and from whom; never the
	// token.
	for _, line := range []string{
		`level=WARN msg="oauth: a token's role is not defined under roles; the request is refused" claim=capgate_role role=root label=oauth:carol`,
		`level=WARN msg="oauth: a token's user claim is not a user id; check auth.oauth.user_claim" claim=email label=oauth:carol`,
		`level=DEBUG msg="oauth: access token refused" status=403 error=insufficient_scope reason="no mapped scope"`,
	} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log lacks %s\n%s", line, log.String())
		}
	}
	if strings.Contains(log.String(), "eyJ") {
		t.Errorf("a token reached the log:\n%s", log.String())
	}
}

// Two users never share a label, and so never a rate-limit bucket.
func TestOAuthLabelsAreDistinct(t *testing.T) {
	key := authtest.NewKey(t, jose.RS256)
	as := provider(t, authtest.Options{Keys: []*authtest.Key{key}})
	o := newOAuth(t, as, oauthConfig(t, as, ""), nil)
	seen := map[string]string{}
	for _, sub := range []string{"a", "A", "a ", strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("a", 66), "oauth:a", "ä", "sha256:x"} {
		c := validClaims(as, "capgate:read")
		c["sub"] = sub
		p, err := o.Authenticate(ctx(t), sign(t, key, nil, c))
		if err != nil {
			t.Fatalf("sub %q: %v", sub, err)
		}
		if other, dup := seen[p.Token]; dup {
			t.Fatalf("subs %q and %q share label %q", sub, other, p.Token)
		}
		if len(p.Token) > 80 || !strings.HasPrefix(p.Token, auth.OAuthLabelPrefix) {
			t.Fatalf("sub %q: label %q", sub, p.Token)
		}
		seen[p.Token] = sub
	}
}

func TestOAuthKeyRotation(t *testing.T) {
	first := authtest.NewKey(t, jose.RS256)
	as := provider(t, authtest.Options{Keys: []*authtest.Key{first}})
	o := newOAuth(t, as, oauthConfig(t, as, "    jwks_refresh_interval: 2h\n    jwks_min_refresh_interval: 1h\n"), nil)
	old := robotToken(t, as, "capgate:read", resource)
	if _, err := o.Authenticate(ctx(t), old); err != nil {
		t.Fatalf("first key: %v", err)
	}
	fetched := as.KeysFetched()

	// The issuer rotates to a new key and retires the old one: the first
	// token naming the new key fetches the keys again.
	second := authtest.NewKey(t, jose.ES256)
	as.Rotate(second, true)
	if _, err := o.Authenticate(ctx(t), robotToken(t, as, "capgate:read", resource)); err != nil {
		t.Fatalf("token signed with the rotated key: %v", err)
	}
	if got := as.KeysFetched(); got != fetched+1 {
		t.Fatalf("keys fetched %d times for the new kid, want once", got-fetched)
	}
	// The old key is gone from the set, so its tokens are refused.
	p, err := o.Authenticate(ctx(t), old)
	refusal(t, p, err, 401, "invalid_token", "the access token is signed with a key the issuer does not publish")

	// Tokens naming made-up keys do not fetch again within the minimum
	// interval, however many.
	for i := range 20 {
		tok := sign(t, second, map[string]any{jws.KeyIDKey: "made-up-" + string(rune('a'+i))}, validClaims(as, "capgate:read"))
		p, err := o.Authenticate(ctx(t), tok)
		refusal(t, p, err, 401, "invalid_token", "the access token is signed with a key the issuer does not publish")
	}
	if got := as.KeysFetched(); got != fetched+1 {
		t.Fatalf("keys fetched %d more times for made-up kids, want none", got-fetched-1)
	}
}

// TestOAuthCheckedTokens: a token checked once is taken again without
// its signature being checked, but never past its expiry, and its claims
// are mapped anew each time.
func TestOAuthCheckedTokens(t *testing.T) {
	key := authtest.NewKey(t, jose.RS256)
	as := provider(t, authtest.Options{Keys: []*authtest.Key{key}})
	now := time.Now()
	roles := map[string]bool{"customer": true, "guest": true}
	var mu sync.Mutex
	cfg := oauthConfig(t, as, "")
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Now:     func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		HasRole: func(r string) bool { mu.Lock(); defer mu.Unlock(); return roles[r] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	claims := validClaims(as, "capgate:read")
	claims["exp"] = now.Add(2 * time.Minute).Unix()
	claims["capgate_role"] = "customer"
	tok := sign(t, key, nil, claims)
	for range 3 {
		if p, err := o.Authenticate(ctx(t), tok); err != nil || p.Role != "customer" {
			t.Fatalf("checked token: %+v, %v", p, err)
		}
	}
	// The role is removed from the config: the token is refused at once,
	// though its signature is not checked again.
	mu.Lock()
	delete(roles, "customer")
	mu.Unlock()
	p, err := o.Authenticate(ctx(t), tok)
	refusal(t, p, err, 403, "", "the access token's role is not one this server knows")
	mu.Lock()
	roles["customer"] = true
	// Past its expiry and the clock skew the check allows.
	now = now.Add(2*time.Minute + cfg.ClockSkew + time.Second)
	mu.Unlock()
	p, err = o.Authenticate(ctx(t), tok)
	refusal(t, p, err, 401, "invalid_token", "the access token has expired")
}

func TestOAuthIssuerUnreachable(t *testing.T) {
	as := provider(t, authtest.Options{})
	tok := robotToken(t, as, "capgate:read", resource)
	if _, err := newOAuth(t, as, oauthConfig(t, as, ""), nil).Authenticate(ctx(t), tok); err != nil {
		t.Fatal(err)
	}

	down := provider(t, authtest.Options{})
	downTok := robotToken(t, down, "capgate:read", resource)
	cfg := oauthConfig(t, down, "")
	held := newOAuth(t, down, cfg, nil)
	if _, err := held.Authenticate(ctx(t), downTok); err != nil {
		t.Fatal(err)
	}
	down.Stop()
	t.Run("keys held go on working", func(t *testing.T) {
		if _, err := held.Authenticate(ctx(t), downTok); err != nil {
			t.Fatalf("a token signed with a held key, issuer down: %v", err)
		}
	})
	t.Run("no keys yet: 503, not the token's fault", func(t *testing.T) {
		o := newOAuth(t, down, cfg, nil)
		p, err := o.Authenticate(ctx(t), downTok)
		refusal(t, p, err, 503, "", "the authorization server's keys cannot be fetched right now; retry shortly")
	})
	t.Run("a new kid while the issuer is down: 503", func(t *testing.T) {
		tok := sign(t, authtest.NewKey(t, jose.RS256), nil, validClaims(down, "capgate:read"))
		p, err := held.Authenticate(ctx(t), tok)
		refusal(t, p, err, 503, "", "the authorization server's keys cannot be fetched right now; retry shortly")
	})
}

// jwks_url empty: the keys are found through the issuer's metadata; set,
// it is used as is.
func TestOAuthDiscovery(t *testing.T) {
	as := provider(t, authtest.Options{})
	tok := robotToken(t, as, "capgate:read", resource)
	for name, extra := range map[string]string{
		"discovered": "",
		"configured": "    jwks_url: " + as.JWKSURL() + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			o := newOAuth(t, as, oauthConfig(t, as, extra), nil)
			if _, err := o.Authenticate(ctx(t), tok); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("a wrong jwks_url", func(t *testing.T) {
		o := newOAuth(t, as, oauthConfig(t, as, "    jwks_url: "+as.Issuer+"/nothing-here\n"), nil)
		p, err := o.Authenticate(ctx(t), tok)
		refusal(t, p, err, 503, "", "the authorization server's keys cannot be fetched right now; retry shortly")
	})
}

func TestOAuthMetadataAndChallenges(t *testing.T) {
	as := provider(t, authtest.Options{})
	o := newOAuth(t, as, oauthConfig(t, as, "    resource_name: Bookings\n"), nil)
	var meta map[string]any
	if err := json.Unmarshal(o.Metadata(), &meta); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource": resource, "authorization_servers": []any{as.Issuer}, "scopes_supported": []any{"capgate:read", "capgate:action"},
		"bearer_methods_supported": []any{"header"}, "resource_name": "Bookings",
	}
	if got, _ := json.Marshal(meta); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("metadata = %s\nwant       %s", got, must(json.Marshal(want)))
	}
	if got := o.MetadataPaths(); len(got) != 2 || got[0] != "/.well-known/oauth-protected-resource" || got[1] != "/.well-known/oauth-protected-resource/api/v1/mcp" {
		t.Errorf("metadata paths = %q", got)
	}
	const meta1 = `Bearer resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/api/v1/mcp"`
	if got, want := o.Challenge(nil), meta1+`, scope="capgate:read capgate:action"`; got != want {
		t.Errorf("no token: %s\nwant       %s", got, want)
	}
	_, err := o.Authenticate(ctx(t), "eyJh.e30.c2ln")
	if got, want := o.Challenge(err), meta1+`, scope="capgate:read capgate:action", error="invalid_token", error_description="the access token is malformed"`; got != want {
		t.Errorf("bad token: %s\nwant        %s", got, want)
	}
	if got, want := o.Challenge(o.InsufficientScope(dispatch.ScopeAdmin)), meta1+`, scope="capgate:admin", error="insufficient_scope", error_description="this request needs the capgate:admin scope"`; got != want {
		t.Errorf("step up: %s\nwant      %s", got, want)
	}
	if o.InsufficientScope(dispatch.ScopeAdmin).Status != http.StatusForbidden {
		t.Error("insufficient scope is not a 403")
	}
	noAdmin := newOAuth(t, as, oauthConfig(t, as, "    scopes: {admin: \"\"}\n"), nil)
	if te := noAdmin.InsufficientScope(dispatch.ScopeAdmin); te != nil {
		t.Errorf("admin maps to no scope, yet the step up asks for %q", te.Scope)
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for tok, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln": true,
		"a.b.c":                 true,
		"a.b":                   false,
		"a.b.c.d":               false,
		".b.c":                  false,
		"a..c":                  false,
		"a.b.":                  false,
		"a.b.c=":                false,
		"a.b+c.d":               false,
		"cg_abcdefghijklmnopqr": false,
		"":                      false,
	} {
		if got := auth.LooksLikeJWT(tok); got != want {
			t.Errorf("LooksLikeJWT(%q) = %v, want %v", tok, got, want)
		}
	}
}

// BenchmarkOAuthAuthenticate measures one access token's check, keys
// held: "first", a token not seen before (parsing, the RS256 or ES256
// signature, the claims and the principal); "again", a token already
// checked, as a client's every later request is (its hash, a lookup and
// the principal). A configured token beside it costs one hash
// (BenchmarkAuthenticate).
func BenchmarkOAuthAuthenticate(b *testing.B) {
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		b.Run(string(alg)+"/first", func(b *testing.B) {
			key := authtest.NewKey(b, alg)
			as := authtest.Start(b, authtest.Options{Keys: []*authtest.Key{key}})
			cfg, err := config.Parse([]byte("auth:\n  oauth:\n    issuer: "+as.Issuer+"\n    resource: "+resource+"\n"), "")
			if err != nil {
				b.Fatal(err)
			}
			o, err := auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close()
			// Tokens differing in their jti, each checked once.
			toks := make([]string, 2000)
			for i := range toks {
				claims := validClaims(as, "capgate:action")
				claims["jti"] = strconv.Itoa(i)
				toks[i] = sign(b, key, nil, claims)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(toks) {
					b.StopTimer()
					o.Close()
					if o, err = auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, Logger: slog.New(slog.DiscardHandler)}); err != nil {
						b.Fatal(err)
					}
					if _, err := o.Authenticate(context.Background(), toks[0]); err != nil {
						b.Fatal(err)
					}
					i = 1
					b.StartTimer()
				}
				if _, err := o.Authenticate(context.Background(), toks[i]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(string(alg)+"/again", func(b *testing.B) {
			key := authtest.NewKey(b, alg)
			as := authtest.Start(b, authtest.Options{Keys: []*authtest.Key{key}})
			as.AddClient(authtest.Client{ID: robot, Secret: secret})
			tok, err := as.ClientCredentials(context.Background(), robot, secret, "capgate:action", resource)
			if err != nil {
				b.Fatal(err)
			}
			cfg, err := config.Parse([]byte("auth:\n  oauth:\n    issuer: "+as.Issuer+"\n    resource: "+resource+"\n"), "")
			if err != nil {
				b.Fatal(err)
			}
			o, err := auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			defer o.Close()
			if _, err := o.Authenticate(context.Background(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := o.Authenticate(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
