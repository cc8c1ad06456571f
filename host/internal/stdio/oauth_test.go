package stdio

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/auth"
	"github.com/capgate/capgate/host/internal/auth/authtest"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/server"
)

// TestOAuth runs the bridge against capgate as an OAuth resource server,
// trusting a real authorization server: an access token in CAPGATE_TOKEN
// works like a configured token, and each way capgate refuses one (a
// token it cannot use, one for another resource, one without this
// server's scopes) is said in capgate's own terms, from its challenge.
func TestOAuth(t *testing.T) {
	const resource = "https://capgate.example.com/api/v1/mcp"
	as := authtest.Start(t, authtest.Options{})
	as.AddClient(authtest.Client{ID: "robot", Secret: "robot-secret-0001"})
	cfg, err := config.Parse([]byte("roles: {user: [demo.run]}\nauth:\n  oauth:\n    issuer: "+as.Issuer+"\n    resource: "+resource+"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	o, err := auth.NewOAuth(auth.OAuthOptions{Config: *cfg.Auth.OAuth, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	c := startCapgate(t, func(opts *server.Options) { opts.OAuth = o })
	token := func(scope, aud string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tok, err := as.ClientCredentials(ctx, "robot", "robot-secret-0001", scope, aud)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	t.Run("access token", func(t *testing.T) {
		b, err := New(Options{URL: c.url, Token: token("capgate:read", resource)})
		if err != nil {
			t.Fatal(err)
		}
		if s, err := b.Check(context.Background()); err != nil || s.Name != "capgate" {
			t.Fatalf("Check with an access token = %+v, %v", s, err)
		}
		s := bridge(t, Options{URL: c.url, Token: token("capgate:read", resource)})
		if got := s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result":{"tools":[`) {
			t.Errorf("tools/list with an access token: %s", got)
		}
	})

	for _, tc := range []struct {
		name, token string
		says        []string
	}{
		{"not a token of the issuer's", "not-a-jwt-at-all", []string{"refused the token in CAPGATE_TOKEN (401 invalid_token", "get a new access token from the authorization server https://capgate.example.com/.well-known/oauth-protected-resource/api/v1/mcp names"}},
		{"another resource", token("capgate:action", "https://other.example.com/mcp"), []string{"(401 invalid_token: the access token was issued for another resource)"}},
		{"no scope of this server", token("profile", resource), []string{"403 insufficient_scope", "capgate:read capgate:action", "get one that carries it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Options{URL: c.url, Token: tc.token})
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Check(context.Background())
			var p *Problem
			if !errors.As(err, &p) || p.Kind != TokenRefused {
				t.Fatalf("Check = %v, want the token refused", err)
			}
			for _, s := range tc.says {
				if !strings.Contains(p.Message, s) {
					t.Errorf("Check says %q, want it to say %q", p.Message, s)
				}
			}
			if strings.Contains(p.Message, tc.token) {
				t.Errorf("the message holds the token")
			}
		})
	}
}
