package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/auth/authtest"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/mcp/mcptest"
)

const (
	oauthResource = "https://capgate.example.com/api/v1/mcp"
	oauthMeta     = "https://capgate.example.com/.well-known/oauth-protected-resource/api/v1/mcp"
	robotID       = "robot"
	robotSecret   = "robot-secret-0001"
)

// oauthFixture is a server running OAuth beside its tokens, trusting a
// real authorization server.
type oauthFixture struct {
	*fixture
	as *authtest.Server
}

func newOAuthFixture(t *testing.T, edit func(*Options)) *oauthFixture {
	t.Helper()
	as := authtest.Start(t, authtest.Options{})
	as.AddClient(authtest.Client{ID: robotID, Secret: robotSecret})
	as.AddClient(authtest.Client{ID: "app", RedirectURIs: []string{"http://127.0.0.1:1/cb"}})
	// alice's subject is the platform's user id: she owns booking b-1.
	as.AddUser(authtest.User{Subject: mcptest.Alice.UserID, Claims: map[string]any{"capgate_role": "customer"}})
	cfg, err := config.Parse([]byte(`
roles: {customer: [], admin: ["*"]}
auth:
  oauth:
    issuer: `+as.Issuer+`
    resource: `+oauthResource+`
    role_claim: capgate_role
`), "")
	if err != nil {
		t.Fatal(err)
	}
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	f := newFixture(t, func(opts *Options) {
		opts.OAuth = o
		opts.Inventory = testInventory()
		if edit != nil {
			edit(opts)
		}
	})
	return &oauthFixture{fixture: f, as: as}
}

func (f *oauthFixture) robot(t *testing.T, scope, resource string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := f.as.ClientCredentials(ctx, robotID, robotSecret, scope, resource)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *oauthFixture) alice(t *testing.T, scope string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.as.LoginAs(mcptest.Alice.UserID)
	tok, err := f.as.AuthorizationCode(ctx, "app", "http://127.0.0.1:1/cb", scope, oauthResource)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *oauthFixture) do(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, r)
	return rec
}

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// Without a token, or with one neither the tokens nor OAuth accept, the
// answer says where to get one (RFC 9728, RFC 6750) instead of hiding the
// endpoint.
func TestOAuthChallenges(t *testing.T) {
	f := newOAuthFixture(t, nil)
	general := `Bearer resource_metadata="` + oauthMeta + `", scope="capgate:read capgate:action"`
	tests := []struct {
		name, authz string
		status      int
		challenge   string
		body        string
	}{
		{"no token", "", 401, general, ""},
		{"another scheme", "Basic YWxpY2U6cw==", 401, general, ""},
		{"scheme only", "Bearer ", 401, general, ""},
		{"an unknown token", "Bearer not-a-configured-token", 401,
			general + `, error="invalid_token", error_description="the access token is malformed"`,
			`{"error":"invalid_token","error_description":"the access token is malformed"}`},
		{"a token for another resource", "Bearer " + f.robot(t, "capgate:action", "https://other.example.com/mcp"), 401,
			general + `, error="invalid_token", error_description="the access token was issued for another resource"`,
			`{"error":"invalid_token","error_description":"the access token was issued for another resource"}`},
		{"a token granting no scope of this server", "Bearer " + f.robot(t, "profile", oauthResource), 403,
			`Bearer resource_metadata="` + oauthMeta + `", scope="capgate:read capgate:action", error="insufficient_scope", error_description="the access token grants none of this server's scopes"`,
			`{"error":"insufficient_scope","error_description":"the access token grants none of this server's scopes","scope":"capgate:read capgate:action"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				rec := f.do(t, mcpRequest(t, method, MCPPath, tt.authz, listBody))
				if rec.Code != tt.status || rec.Header().Get("WWW-Authenticate") != tt.challenge || rec.Body.String() != tt.body {
					t.Fatalf("%s: %d %q %q\nwant %d %q %q", method, rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body, tt.status, tt.challenge, tt.body)
				}
			}
		})
	}
	// The admin API answers alike: the same resource, the same tokens.
	rec := f.do(t, httptest.NewRequest(http.MethodGet, AdminCapabilitiesPath, nil))
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != general {
		t.Fatalf("admin API without a token: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

// Configured tokens keep working beside OAuth, and OAuth principals go
// through the same gate.
func TestOAuthBesideTokens(t *testing.T) {
	f := newOAuthFixture(t, nil)
	call := func(authz, body string) string {
		rec := f.do(t, mcpRequest(t, http.MethodPost, MCPPath, authz, body))
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if got := call("Bearer "+aliceToken, callBody(mcptest.BookingGet, `{"id":"b-1"}`)); !strings.Contains(got, "Dentist") {
		t.Fatalf("configured token: %s", got)
	}
	alice := "Bearer " + f.alice(t, "openid capgate:action")
	if got := call(alice, callBody(mcptest.BookingGet, `{"id":"b-1"}`)); !strings.Contains(got, "Dentist") {
		t.Fatalf("alice's access token, her booking: %s", got)
	}
	if got := call(alice, callBody(mcptest.Rename, `{"id":"b-1","title":"Dentist, moved"}`)); strings.Contains(got, `"error"`) {
		t.Fatalf("alice's action token renames her booking: %s", got)
	}
	// A read token is refused an action by the gate, at step scope, as a
	// configured read token is.
	reader := "Bearer " + f.alice(t, "capgate:read")
	if got := call(reader, callBody(mcptest.Rename, `{"id":"b-1","title":"x"}`)); !strings.Contains(got, `"step":"scope"`) {
		t.Fatalf("read token, an action: %s", got)
	}
	// The robot has no role claim and there is no default role: it holds
	// no permission.
	if got := call("Bearer "+f.robot(t, "capgate:read", oauthResource), callBody(mcptest.BookingGet, `{"id":"b-1"}`)); !strings.Contains(got, `"step":"permission"`) {
		t.Fatalf("robot: %s", got)
	}
}

// The admin API needs admin scope: an OAuth principal without it is asked
// to step up; a configured token, whose scope no client can change, gets
// the plain 403.
func TestOAuthAdminStepUp(t *testing.T) {
	f := newOAuthFixture(t, nil)
	rec := adminGet(t, f.srv, http.MethodGet, AdminCapabilitiesPath, f.alice(t, "capgate:action"), "")
	problemOf(t, rec, http.StatusForbidden)
	want := `Bearer resource_metadata="` + oauthMeta + `", scope="capgate:admin", error="insufficient_scope", error_description="this request needs the capgate:admin scope"`
	if got := rec.Header().Get("WWW-Authenticate"); got != want {
		t.Fatalf("challenge %q\nwant      %q", got, want)
	}
	rec = adminGet(t, f.srv, http.MethodGet, AdminCapabilitiesPath, aliceToken, "")
	problemOf(t, rec, http.StatusForbidden)
	if got := rec.Header().Get("WWW-Authenticate"); got != "" {
		t.Fatalf("a configured token is asked to step up: %q", got)
	}
	if rec := adminGet(t, f.srv, http.MethodGet, AdminCapabilitiesPath, f.alice(t, "capgate:admin"), ""); rec.Code != http.StatusOK {
		t.Fatalf("admin scope: %d %s", rec.Code, rec.Body)
	}
}

func TestOAuthMetadataRoutes(t *testing.T) {
	f := newOAuthFixture(t, nil)
	base := f.serve(t)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/api/v1/mcp"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var meta struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &meta) != nil ||
			res.Header.Get("Access-Control-Allow-Origin") != "*" ||
			meta.Resource != oauthResource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != f.as.Issuer ||
			len(meta.BearerMethods) != 1 || meta.BearerMethods[0] != "header" {
			t.Fatalf("GET %s: %d %s %s", path, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	}
	if res, err := http.Get(base + "/.well-known/oauth-protected-resource/other"); err != nil || res.StatusCode != 404 {
		t.Fatalf("another path: %v %v", res, err)
	}

	// Off, or on a host switched off: no metadata, and the endpoint hides.
	for name, edit := range map[string]func(*Options){
		"no OAuth":      func(o *Options) { o.OAuth = nil },
		"host disabled": func(o *Options) { o.Enabled = false },
	} {
		t.Run(name, func(t *testing.T) {
			g := newOAuthFixture(t, edit)
			for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/api/v1/mcp"} {
				if rec := g.do(t, httptest.NewRequest(http.MethodGet, path, nil)); rec.Code != 404 {
					t.Fatalf("GET %s: %d", path, rec.Code)
				}
			}
			rec := g.do(t, mcpRequest(t, http.MethodPost, MCPPath, "", listBody))
			if rec.Code != 404 || rec.Header().Get("WWW-Authenticate") != "" {
				t.Fatalf("no token: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// The issuer unreachable before any key was fetched: no token can be
// checked, which is the server's trouble (503), not the token's.
func TestOAuthKeysUnavailable(t *testing.T) {
	f := newOAuthFixture(t, nil)
	tok := f.robot(t, "capgate:read", oauthResource)
	cfg := *mustOAuthConfig(t, f.as.Issuer)
	f.as.Stop()
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	g := newFixture(t, func(opts *Options) { opts.OAuth = o })
	rec := httptest.NewRecorder()
	g.srv.Handler().ServeHTTP(rec, mcpRequest(t, http.MethodPost, MCPPath, "Bearer "+tok, listBody))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "5" || rec.Header().Get("WWW-Authenticate") != "" ||
		rec.Body.String() != `{"error_description":"the authorization server's keys cannot be fetched right now; retry shortly"}` {
		t.Fatalf("%d %q %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("WWW-Authenticate"), rec.Body)
	}
	// A configured token does not need the issuer.
	rec = httptest.NewRecorder()
	g.srv.Handler().ServeHTTP(rec, mcpRequest(t, http.MethodPost, MCPPath, "Bearer "+aliceToken, listBody))
	if rec.Code != 200 {
		t.Fatalf("configured token while the issuer is down: %d", rec.Code)
	}
}

func mustOAuthConfig(t *testing.T, issuer string) *config.OAuth {
	t.Helper()
	cfg, err := config.Parse([]byte("auth:\n  oauth:\n    issuer: "+issuer+"\n    resource: "+oauthResource+"\n    jwks_min_refresh_interval: 1s\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Auth.OAuth
}
