// Package authtest runs a real OAuth 2.1 / OpenID Connect authorization
// server for tests, on 127.0.0.1: the provider side of github.com/zitadel/oidc
// (its op package) over an in-memory store. It issues JWT access tokens
// signed with keys it publishes at its JWKS, takes RFC 8707 resource
// indicators as the tokens' audience, and serves discovery
// (/.well-known/openid-configuration), authorization code with PKCE, and
// client credentials.
//
// A test plays the user: the authorization endpoint sends the browser to a
// login page that approves the request at once as the user LoginAs names,
// so any HTTP client that follows redirects, or the test itself
// (AuthorizationCode), completes the flow headless.
package authtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Key is a signing key the server may publish and sign with.
type Key struct {
	ID        string
	Algorithm jose.SignatureAlgorithm
	Private   crypto.Signer
}

// NewKey makes a fresh key for alg (RS256 or ES256).
func NewKey(t testing.TB, alg jose.SignatureAlgorithm) *Key {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	switch alg {
	case jose.RS256, jose.PS256:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("authtest: no key for %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Key{ID: "k-" + base64.RawURLEncoding.EncodeToString(id[:]), Algorithm: alg, Private: k}
}

// Client is a registered OAuth client.
type Client struct {
	ID string
	// Secret is empty for a public client (PKCE, no client
	// authentication); set, the client authenticates with it and may use
	// client credentials.
	Secret       string
	RedirectURIs []string
}

// User is someone the login page can sign in as.
type User struct {
	// Subject becomes the tokens' sub.
	Subject string
	// Claims are added to every access token issued for the user (a role
	// claim, an email).
	Claims map[string]any
}

// Options configure a Server.
type Options struct {
	// Keys are the keys published, the first signing; nil makes one
	// RS256 key. Two servers given the same keys sign alike.
	Keys []*Key
	// TokenLifetime is how long an access token lasts; 0 means an hour.
	TokenLifetime time.Duration
}

// Server is a running authorization server.
type Server struct {
	// Issuer is its issuer identifier and base URL, http://127.0.0.1:port.
	Issuer string

	t       testing.TB
	srv     *http.Server
	ln      net.Listener
	st      *store
	fetched atomic.Int64 // GETs of the keys
}

// Start runs a server until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	keys := opts.Keys
	if len(keys) == 0 {
		keys = []*Key{NewKey(t, jose.RS256)}
	}
	lifetime := opts.TokenLifetime
	if lifetime == 0 {
		lifetime = time.Hour
	}
	st := &store{
		keys: slices.Clone(keys), lifetime: lifetime,
		clients: map[string]*client{}, users: map[string]User{},
		requests: map[string]*authRequest{}, codes: map[string]string{},
	}
	provider, err := op.NewOpenIDProvider(issuer, &op.Config{
		CryptoKey: sha256.Sum256([]byte(issuer)), CodeMethodS256: true, AuthMethodPost: true,
		SupportedScopes: []string{oidc.ScopeOpenID},
	}, st, op.WithAllowInsecure(), op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("authtest: %v", err)
	}
	callback := op.AuthCallbackURL(provider)
	mux := http.NewServeMux()
	// The login page approves the request as the current user: the test
	// plays the user who signs in and consents.
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("authRequestID")
		if err := st.approve(id); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	})
	mux.Handle("/", provider)
	s := &Server{Issuer: issuer, t: t, ln: ln, st: st}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			s.fetched.Add(1)
		}
		withResource(mux).ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server: its discovery and keys are unreachable from now.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// KeysFetched is how many times the keys have been fetched.
func (s *Server) KeysFetched() int { return int(s.fetched.Load()) }

// JWKSURL is where the server publishes its keys.
func (s *Server) JWKSURL() string { return s.Issuer + "/keys" }

// AddClient registers a client.
func (s *Server) AddClient(c Client) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.clients[c.ID] = &client{Client: c}
}

// AddUser makes a user the login page may sign in as.
func (s *Server) AddUser(u User) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.users[u.Subject] = u
}

// LoginAs makes the login page approve requests as the user subject.
func (s *Server) LoginAs(subject string) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	s.st.current = subject
}

// Rotate makes key the signing key, published first; the keys published
// before stay published unless retire is set, when key is the only one.
func (s *Server) Rotate(key *Key, retire bool) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if retire {
		s.st.keys = []*Key{key}
		return
	}
	s.st.keys = append([]*Key{key}, s.st.keys...)
}

// ClientCredentials gets an access token for the confidential client id
// with the scopes and the resource (empty: none) asked for.
func (s *Server) ClientCredentials(ctx context.Context, id, secret, scope, resource string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}
	if resource != "" {
		form.Set("resource", resource)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return tokenResponse(http.DefaultClient.Do(req))
}

// AuthorizationCode runs the authorization code flow with PKCE as the
// public client id, signed in as the LoginAs user, and returns the access
// token: the authorization request, the login page's approval, the
// redirect to redirectURI (not followed: the code is read from it) and the
// token request, each over HTTP.
func (s *Server) AuthorizationCode(ctx context.Context, id, redirectURI, scope, resource string) (string, error) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	verifier := base64.RawURLEncoding.EncodeToString(raw[:])
	challenge := oidc.NewSHACodeChallenge(verifier)
	q := url.Values{
		"response_type": {"code"}, "client_id": {id}, "redirect_uri": {redirectURI}, "scope": {scope},
		"state": {"s-1"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	if resource != "" {
		q.Set("resource", resource)
	}
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), redirectURI) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Issuer+"/authorize?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	_ = res.Body.Close()
	loc, err := res.Location()
	if err != nil || res.StatusCode != http.StatusFound {
		return "", fmt.Errorf("authtest: the authorization request ended at %d, not a redirect to %s", res.StatusCode, redirectURI)
	}
	code := loc.Query().Get("code")
	if code == "" {
		return "", fmt.Errorf("authtest: redirected without a code: %s", loc.Query().Get("error"))
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI},
		"client_id": {id}, "code_verifier": {verifier}}
	if resource != "" {
		form.Set("resource", resource)
	}
	treq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	treq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return tokenResponse(http.DefaultClient.Do(treq))
}

func tokenResponse(res *http.Response, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &out); err != nil || res.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", fmt.Errorf("authtest: token endpoint answered %d: %s %s", res.StatusCode, out.Error, out.Description)
	}
	return out.AccessToken, nil
}

// resourceKey carries a request's RFC 8707 resource indicator to the
// store, which op does not pass on itself.
type resourceKey struct{}

// withResource reads the resource parameter of authorization and token
// requests into the request's context.
func withResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/authorize" || r.URL.Path == "/oauth/token" {
			if err := r.ParseForm(); err == nil {
				if res := r.Form["resource"]; len(res) > 0 {
					r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

func resourceOf(ctx context.Context) []string {
	v, _ := ctx.Value(resourceKey{}).([]string)
	return v
}

// store is the server's in-memory state: op.Storage and
// op.ClientCredentialsStorage.
type store struct {
	mu       sync.Mutex
	keys     []*Key
	lifetime time.Duration
	clients  map[string]*client
	users    map[string]User
	current  string
	requests map[string]*authRequest
	codes    map[string]string // code -> request id
	seq      int
}

var (
	_ op.Storage                        = (*store)(nil)
	_ op.ClientCredentialsStorage       = (*store)(nil)
	_ op.CanGetPrivateClaimsFromRequest = (*store)(nil)
)

type authRequest struct {
	id       string
	req      oidc.AuthRequest
	resource []string
	subject  string
	done     bool
	authTime time.Time
}

func (a *authRequest) GetID() string         { return a.id }
func (a *authRequest) GetACR() string        { return "" }
func (a *authRequest) GetAMR() []string      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string { return audience(a.resource, a.req.ClientID) }
func (a *authRequest) GetAuthTime() time.Time {
	return a.authTime
}
func (a *authRequest) GetClientID() string { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }

// audience is what a token is for: the resources asked for (RFC 8707),
// else the client itself.
func audience(resource []string, clientID string) []string {
	if len(resource) > 0 {
		return slices.Clone(resource)
	}
	return []string{clientID}
}

// tokenRequest is a client credentials grant's request.
type tokenRequest struct {
	subject  string
	audience []string
	scopes   []string
}

func (r *tokenRequest) GetSubject() string    { return r.subject }
func (r *tokenRequest) GetAudience() []string { return r.audience }
func (r *tokenRequest) GetScopes() []string   { return r.scopes }

func (s *store) approve(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.requests[id]
	if !ok {
		return errors.New("no such authorization request")
	}
	if _, ok := s.users[s.current]; !ok {
		return fmt.Errorf("no user %q to sign in as (AddUser, LoginAs)", s.current)
	}
	a.subject, a.done, a.authTime = s.current, true, time.Now()
	return nil
}

func (s *store) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	a := &authRequest{id: fmt.Sprintf("ar-%d", s.seq), req: *req, resource: resourceOf(ctx)}
	s.requests[a.id] = a
	return a, nil
}

func (s *store) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[id]; ok {
		return a, nil
	}
	return nil, errors.New("no such authorization request")
}

func (s *store) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errors.New("no such code")
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *store) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *store) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for c, r := range s.codes {
		if r == id {
			delete(s.codes, c)
		}
	}
	return nil
}

func (s *store) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("at-%d", s.seq), time.Now().Add(s.lifetime), nil
}

func (s *store) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("authtest issues no refresh tokens")
}

func (s *store) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *store) TerminateSession(context.Context, string, string) error { return nil }

func (s *store) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *store) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct{ k *Key }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.k.Algorithm }
func (k signingKey) Key() any {
	return jose.JSONWebKey{Key: k.k.Private, KeyID: k.k.ID, Algorithm: string(k.k.Algorithm)}
}
func (k signingKey) ID() string { return k.k.ID }

type publicKey struct{ k *Key }

func (k publicKey) ID() string                         { return k.k.ID }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return k.k.Algorithm }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.k.Private.Public() }

func (s *store) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return signingKey{s.keys[0]}, nil
}

func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []jose.SignatureAlgorithm{s.keys[0].Algorithm}, nil
}

func (s *store) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]op.Key, len(s.keys))
	for i, k := range s.keys {
		out[i] = publicKey{k}
	}
	return out, nil
}

func (s *store) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return nil, errors.New("no such client")
}

func (s *store) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[id]; ok && c.Secret != "" && c.Secret == secret {
		return nil
	}
	return errors.New("client authentication failed")
}

func (s *store) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.GetClientByClientID(ctx, id)
}

func (s *store) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	return &tokenRequest{subject: id, audience: audience(resourceOf(ctx), id), scopes: scopes}, nil
}

// GetPrivateClaimsFromRequest puts the granted scopes in the access token
// (op leaves them out of JWT access tokens), with the user's claims.
func (s *store) GetPrivateClaimsFromRequest(_ context.Context, req op.TokenRequest, scopes []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	claims := map[string]any{}
	for k, v := range s.users[req.GetSubject()].Claims {
		claims[k] = v
	}
	var granted []string
	for _, sc := range req.GetScopes() {
		if sc != oidc.ScopeOpenID {
			granted = append(granted, sc)
		}
	}
	if len(granted) > 0 {
		claims["scope"] = strings.Join(granted, " ")
	}
	_ = scopes
	return claims, nil
}

func (s *store) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *store) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}

func (s *store) SetIntrospectionFromToken(_ context.Context, r *oidc.IntrospectionResponse, _, subject, clientID string) error {
	r.Active, r.Subject, r.ClientID = true, subject, clientID
	return nil
}

func (s *store) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *store) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("authtest accepts no JWT profile grants")
}

func (s *store) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *store) Health(context.Context) error { return nil }

// client is a registered client as op sees it. Every client gets JWT
// access tokens.
type client struct{ Client }

func (c *client) GetID() string                    { return c.ID }
func (c *client) RedirectURIs() []string           { return c.Client.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) ApplicationType() op.ApplicationType {
	if c.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}
func (c *client) AuthMethod() oidc.AuthMethod {
	if c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	if c.Secret == "" {
		return []oidc.GrantType{oidc.GrantTypeCode}
	}
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeClientCredentials}
}
func (c *client) LoginURL(id string) string           { return "/login?authRequestID=" + url.QueryEscape(id) }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration      { return time.Hour }
func (c *client) DevMode() bool                       { return true }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
