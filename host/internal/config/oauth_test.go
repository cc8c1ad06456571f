package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestOAuthOffByDefault(t *testing.T) {
	for name, yaml := range map[string]string{
		"no section":          "",
		"empty section":       "auth:\n  oauth:\n",
		"empty issuer":        "auth:\n  oauth:\n    issuer: \"\"\n",
		"settings, no issuer": "auth:\n  oauth:\n    role_claim: capgate_role\n    scopes: {read: files:read}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if cfg := mustParse(t, yaml, nil); cfg.Auth.OAuth != nil {
				t.Fatalf("auth.oauth = %+v, want nil (off)", cfg.Auth.OAuth)
			}
		})
	}
}

func TestOAuthDefaults(t *testing.T) {
	cfg := mustParse(t, "roles: {customer: [booking.read]}\ndefault_role: customer\nauth:\n  oauth:\n    issuer: https://auth.example.com/realms/capgate\n", nil)
	want := &OAuth{
		Issuer:                 "https://auth.example.com/realms/capgate",
		Resource:               "http://127.0.0.1:8080/api/v1/mcp",
		Audience:               "http://127.0.0.1:8080/api/v1/mcp",
		Algorithms:             OAuthAlgorithms,
		ClockSkew:              time.Minute,
		JWKSRefreshInterval:    15 * time.Minute,
		JWKSMinRefreshInterval: 30 * time.Second,
		UserClaim:              "sub",
		DefaultRole:            "customer",
		Scopes:                 OAuthScopes{Read: "capgate:read", Action: "capgate:action", Admin: "capgate:admin"},
		ScopesSupported:        []string{"capgate:read", "capgate:action"},
		ResourceName:           "capgate",
	}
	if !reflect.DeepEqual(cfg.Auth.OAuth, want) {
		t.Fatalf("auth.oauth =\n %+v\nwant\n %+v", cfg.Auth.OAuth, want)
	}
}

func TestOAuthFull(t *testing.T) {
	cfg := mustParse(t, `
listen: 0.0.0.0:8080
roles: {customer: [booking.read], staff: ["*"]}
default_role: customer
auth:
  oauth:
    issuer: https://auth.example.com
    resource: https://capgate.example.com/api/v1/mcp
    audience: api://capgate
    jwks_url: https://auth.example.com/keys
    algorithms: [ES256, RS256, ES256]
    clock_skew: 10s
    jwks_refresh_interval: 1h
    jwks_min_refresh_interval: 5s
    user_claim: email
    role_claim: https://capgate.example.com/role
    default_role: staff
    scopes: {read: "files:read", action: "files:write", admin: ""}
    scopes_supported: ["files:read"]
    resource_name: Bookings
`, nil)
	want := &OAuth{
		Issuer:                 "https://auth.example.com",
		Resource:               "https://capgate.example.com/api/v1/mcp",
		Audience:               "api://capgate",
		JWKSURL:                "https://auth.example.com/keys",
		Algorithms:             []string{"ES256", "RS256"},
		ClockSkew:              10 * time.Second,
		JWKSRefreshInterval:    time.Hour,
		JWKSMinRefreshInterval: 5 * time.Second,
		UserClaim:              "email",
		RoleClaim:              "https://capgate.example.com/role",
		DefaultRole:            "staff",
		Scopes:                 OAuthScopes{Read: "files:read", Action: "files:write"},
		ScopesSupported:        []string{"files:read"},
		ResourceName:           "Bookings",
	}
	if !reflect.DeepEqual(cfg.Auth.OAuth, want) {
		t.Fatalf("auth.oauth =\n %+v\nwant\n %+v", cfg.Auth.OAuth, want)
	}
}

func TestOAuthEnv(t *testing.T) {
	cfg := mustParse(t, "listen: \"[::1]:9000\"\n", map[string]string{
		"CAPGATE_AUTH_OAUTH_ISSUER":        "http://127.0.0.1:9999",
		"CAPGATE_AUTH_OAUTH_SCOPES_ACTION": "act",
		"CAPGATE_AUTH_OAUTH_CLOCK_SKEW":    "0s",
	})
	o := cfg.Auth.OAuth
	if o == nil || o.Issuer != "http://127.0.0.1:9999" || o.Resource != "http://[::1]:9000/api/v1/mcp" || o.Scopes.Action != "act" || o.ClockSkew != 0 ||
		!reflect.DeepEqual(o.ScopesSupported, []string{"capgate:read", "act"}) {
		t.Fatalf("auth.oauth = %+v", o)
	}
}

func TestOAuthProblems(t *testing.T) {
	const on = "auth:\n  oauth:\n    issuer: https://auth.example.com\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		{"unknown auth key", "auth:\n  ldap: {}\n", nil,
			[]string{"auth.ldap: unknown key; known keys are oauth (line 2)"}},
		{"unknown oauth key", on + "    isuer: x\n", nil,
			[]string{"auth.oauth.isuer: unknown key; known keys are issuer, resource, audience, jwks_url, algorithms, clock_skew, jwks_refresh_interval, jwks_min_refresh_interval, user_claim, role_claim, default_role, scopes, scopes_supported, resource_name (line 4)"}},
		{"unknown scope level", on + "    scopes: {write: x}\n", nil,
			[]string{"auth.oauth.scopes.write: unknown key; known keys are read, action, admin (line 4)"}},
		{"issuer http, not loopback", "auth:\n  oauth:\n    issuer: http://auth.example.com\n", nil,
			[]string{`auth.oauth.issuer: must be https: plain http is accepted for a loopback host only (127.0.0.1, ::1, localhost), as anything on the way could change what it serves; got "http://auth.example.com" (line 3)`}},
		{"issuer not a URL", "auth:\n  oauth:\n    issuer: auth.example.com\n", nil,
			[]string{`auth.oauth.issuer: must be the authorization server's issuer identifier, such as https://auth.example.com/realms/capgate; got "auth.example.com" (line 3)`}},
		{"issuer with a fragment", "auth:\n  oauth:\n    issuer: https://a.example.com/#x\n", nil,
			[]string{`auth.oauth.issuer: must have no fragment, got "https://a.example.com/#x" (line 3)`}},
		{"issuer with credentials", "auth:\n  oauth:\n    issuer: https://u:p@a.example.com\n", nil,
			[]string{`auth.oauth.issuer: must not carry credentials (line 3)`}},
		{"issuer ftp", "auth:\n  oauth:\n    issuer: ftp://a.example.com\n", nil,
			[]string{`auth.oauth.issuer: scheme must be https, got "ftp" (line 3)`}},
		{"issuer from env, http", "", map[string]string{"CAPGATE_AUTH_OAUTH_ISSUER": "http://10.0.0.1"},
			[]string{`auth.oauth.issuer: must be https: plain http is accepted for a loopback host only (127.0.0.1, ::1, localhost), as anything on the way could change what it serves; got "http://10.0.0.1" (from CAPGATE_AUTH_OAUTH_ISSUER)`}},
		{"resource needed off loopback", "listen: 0.0.0.0:8080\n" + on, nil,
			[]string{"auth.oauth.resource: must be set (the URL clients reach the MCP endpoint at, such as https://capgate.example.com/api/v1/mcp): listen (0.0.0.0:8080) is not a loopback address, so it does not say how clients reach capgate"}},
		{"resource needed on port 0", "listen: 127.0.0.1:0\n" + on, nil,
			[]string{"auth.oauth.resource: must be set (the URL clients reach the MCP endpoint at, such as https://capgate.example.com/api/v1/mcp): listen has port 0, chosen when capgate starts"}},
		{"resource with a query", on + "    resource: https://c.example.com/mcp?x=1\n", nil,
			[]string{`auth.oauth.resource: must have no query, got "https://c.example.com/mcp?x=…" (line 4)`}},
		{"jwks_url plain http", on + "    jwks_url: http://auth.example.com/keys\n", nil,
			[]string{`auth.oauth.jwks_url: must be https: plain http is accepted for a loopback host only (127.0.0.1, ::1, localhost), as anything on the way could change what it serves; got "http://auth.example.com/keys" (line 4)`}},
		{"algorithm none", on + "    algorithms: [RS256, none]\n", nil,
			[]string{`auth.oauth.algorithms[1]: "none" accepts unsigned tokens, which anyone can make; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 4)`}},
		{"algorithm HS256", on + "    algorithms: [HS256]\n", nil,
			[]string{"auth.oauth.algorithms[0]: HS256 is a shared-secret algorithm: a verifier holding the secret could make tokens itself, and a published key used as the secret lets anyone; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 4)",
				"auth.oauth.algorithms: must name at least one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 4)"}},
		{"algorithm unknown", on + "    algorithms: [rs256]\n", nil,
			[]string{`auth.oauth.algorithms[0]: must be one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA, got "rs256" (line 4)`,
				"auth.oauth.algorithms: must name at least one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 4)"}},
		{"algorithms empty", on + "    algorithms: []\n", nil,
			[]string{"auth.oauth.algorithms: must name at least one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 4)"}},
		{"clock skew too long", on + "    clock_skew: 10m\n", nil,
			[]string{"auth.oauth.clock_skew: must be from 0s to 5m0s, got 10m0s (line 4)"}},
		{"clock skew negative", on + "    clock_skew: -1s\n", nil,
			[]string{"auth.oauth.clock_skew: must be from 0s to 5m0s, got -1s (line 4)"}},
		{"clock skew not a duration", on + "    clock_skew: soon\n", nil,
			[]string{`auth.oauth.clock_skew: must be a duration such as "30s" or "1m30s", got "soon" (line 4)`}},
		{"refresh too often", on + "    jwks_refresh_interval: 5s\n", nil,
			[]string{"auth.oauth.jwks_refresh_interval: must be from 1m to 24h, got 5s (line 4)"}},
		{"min refresh above refresh", on + "    jwks_refresh_interval: 2m\n    jwks_min_refresh_interval: 3m\n", nil,
			[]string{"auth.oauth.jwks_min_refresh_interval: must be from 1s to auth.oauth.jwks_refresh_interval (2m0s), got 3m0s (line 5)"}},
		{"min refresh too short", on + "    jwks_min_refresh_interval: 10ms\n", nil,
			[]string{"auth.oauth.jwks_min_refresh_interval: must be from 1s to auth.oauth.jwks_refresh_interval (15m0s), got 10ms (line 4)"}},
		{"user claim empty", on + "    user_claim: \"\"\n", nil,
			[]string{"auth.oauth.user_claim: must name a claim, such as sub (line 4)"}},
		{"role claim too long", on + "    role_claim: " + strings.Repeat("r", 129) + "\n", nil,
			[]string{"auth.oauth.role_claim: must be a claim name of at most 128 characters, none a control character (line 4)"}},
		{"default role undefined", "roles: {customer: []}\n" + on + "    default_role: staff\n", nil,
			[]string{`auth.oauth.default_role: role "staff" is not defined under roles (defined: customer) (line 5)`}},
		{"scope with a space", on + "    scopes: {read: \"a b\"}\n", nil,
			[]string{`auth.oauth.scopes.read: must be an OAuth scope: 1 to 128 printable ASCII characters without space, '"' or '\\', got "a b" (line 4)`}},
		{"scope twice", on + "    scopes: {read: x, action: x}\n", nil,
			[]string{"auth.oauth.scopes.action: is also auth.oauth.scopes.read: each capgate scope needs an OAuth scope of its own (line 4)"}},
		{"no scope at all", on + "    scopes: {read: \"\", action: \"\", admin: \"\"}\n", nil,
			[]string{"auth.oauth.scopes: at least one of read, action and admin must name an OAuth scope, or no token could be granted anything"}},
		{"offline_access supported", on + "    scopes_supported: [capgate:read, offline_access]\n", nil,
			[]string{"auth.oauth.scopes_supported[1]: offline_access asks the authorization server for a refresh token; it is not a scope of this resource, and MCP servers do not publish it (line 4)"}},
		{"resource name with a newline", on + "    resource_name: \"a\\nb\"\n", nil,
			[]string{"auth.oauth.resource_name: must be at most 256 characters, none a control character (line 4)"}},
		{"audience with a control character", on + "    audience: \"a\\tb\"\n", nil,
			[]string{"auth.oauth.audience: must be at most 2048 characters, none a control character (line 4)"}},
		// Checked even while OAuth is off, so a mistake shows before the
		// issuer is set.
		{"checked without an issuer", "auth:\n  oauth:\n    algorithms: [none]\n    clock_skew: 1h\n", nil,
			[]string{`auth.oauth.algorithms[0]: "none" accepts unsigned tokens, which anyone can make; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 3)`,
				"auth.oauth.algorithms: must name at least one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 3)",
				"auth.oauth.clock_skew: must be from 0s to 5m0s, got 1h0m0s (line 4)"}},
		{"every problem at once", "listen: 0.0.0.0:1\nauth:\n  oauth:\n    issuer: http://a.example.com\n    algorithms: [HS512]\n    user_claim: \"\"\n", nil,
			[]string{`auth.oauth.issuer: must be https: plain http is accepted for a loopback host only (127.0.0.1, ::1, localhost), as anything on the way could change what it serves; got "http://a.example.com" (line 4)`,
				"auth.oauth.algorithms[0]: HS512 is a shared-secret algorithm: a verifier holding the secret could make tokens itself, and a published key used as the secret lets anyone; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 5)",
				"auth.oauth.algorithms: must name at least one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (line 5)",
				"auth.oauth.user_claim: must name a claim, such as sub (line 6)",
				"auth.oauth.resource: must be set (the URL clients reach the MCP endpoint at, such as https://capgate.example.com/api/v1/mcp): listen (0.0.0.0:1) is not a loopback address, so it does not say how clients reach capgate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, tt.env)
			cfg, err := Parse([]byte(tt.yaml), "")
			if err == nil {
				t.Fatalf("parsed without a problem: auth.oauth = %+v", cfg.Auth.OAuth)
			}
			if got := problemLines(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}
