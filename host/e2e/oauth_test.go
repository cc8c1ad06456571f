package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/auth/authtest"
)

// TestTypeScriptClientOAuth: the official TypeScript SDK client signs
// alice in to the real binary through a real authorization server
// (authtest, on zitadel/oidc's provider), headless, with authorization
// code and PKCE: capgate's 401 sends it to the protected resource
// metadata, it asks for a token for capgate's resource, and with that
// token it lists alice's tools and cancels her booking, which the audit
// trail then shows under her OAuth label. The demo tokens keep working
// beside it.
func TestTypeScriptClientOAuth(t *testing.T) {
	needE2E(t)
	nodeBin(t)
	const redirect = "http://127.0.0.1:1/callback" // never served: the code is read from the redirect
	as := authtest.Start(t, authtest.Options{})
	as.AddClient(authtest.Client{ID: "ts-agent", RedirectURIs: []string{redirect}})
	as.AddUser(authtest.User{Subject: "alice", Claims: map[string]any{"capgate_role": "customer"}})
	as.LoginAs("alice")
	h := startHostWith(t, t.TempDir(), "{seed: demo}", func(cfg string) string {
		return cfg + "auth:\n  oauth:\n    issuer: " + as.Issuer + "\n    role_claim: capgate_role\n"
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stdout, err := runNode(t, ctx, "oauth.mjs", "--url", h.url(), "--client-id", "ts-agent", "--redirect", redirect)
	if err != nil {
		t.Fatalf("oauth.mjs: %v; stdout:\n%s", err, stdout)
	}
	t.Logf("oauth.mjs:\n%s", stdout)
	var out struct {
		ConnectedWithoutSignIn bool `json:"connectedWithoutSignIn"`
		Authorization          struct {
			Endpoint, Resource, Scope, CodeChallengeMethod, ClientID string
			HasCodeChallenge                                         bool
		} `json:"authorization"`
		TokenType    string `json:"tokenType"`
		TokenRequest *struct {
			Resource    string `json:"resource"`
			HasVerifier bool   `json:"hasVerifier"`
		} `json:"tokenRequest"`
		Tools    []string `json:"tools"`
		Bookings []booking
		Cancel   *struct {
			ID      string `json:"id"`
			IsError bool   `json:"isError"`
		} `json:"cancel"`
		Challenges []string `json:"challenges"`
		Statuses   []int    `json:"statuses"`
	}
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("oauth.mjs output: %v", err)
	}

	if out.ConnectedWithoutSignIn {
		t.Error("the client connected without a token")
	}
	wantChallenge := `Bearer resource_metadata="` + h.base + `/.well-known/oauth-protected-resource/api/v1/mcp", scope="capgate:read capgate:action"`
	if len(out.Challenges) == 0 || out.Challenges[0] != wantChallenge || out.Statuses[0] != http.StatusUnauthorized {
		t.Errorf("first answer %v %q; want 401 with %s", out.Statuses, out.Challenges, wantChallenge)
	}
	a := out.Authorization
	if a.Endpoint != as.Issuer+"/authorize" || a.Resource != h.url() || a.Scope != "capgate:read capgate:action" ||
		a.CodeChallengeMethod != "S256" || !a.HasCodeChallenge || a.ClientID != "ts-agent" {
		t.Errorf("authorization request %+v; want the issuer's, for resource %s, the challenge's scopes, PKCE S256", a, h.url())
	}
	if tr := out.TokenRequest; tr == nil || tr.Resource != h.url() || !tr.HasVerifier {
		t.Errorf("token request %+v; want the resource and the PKCE verifier", tr)
	}
	if !strings.EqualFold(out.TokenType, "bearer") {
		t.Errorf("token type %q", out.TokenType)
	}
	if !slices.Contains(out.Tools, "booking.cancel") || !slices.Contains(out.Tools, "booking.list") {
		t.Errorf("alice's tools %q", out.Tools)
	}
	if len(out.Bookings) != 2 {
		t.Errorf("alice's bookings %+v; want her 2 seeded", out.Bookings)
	}
	if out.Cancel == nil || out.Cancel.IsError {
		t.Fatalf("booking.cancel with the access token: %+v", out.Cancel)
	}

	// From outside: the booking is cancelled, by alice, under her OAuth
	// label, and the demo tokens are untouched.
	if got := bookingStatus(t, h, tokenAlice, out.Cancel.ID); got != "cancelled" {
		t.Errorf("booking %s is %q after the cancel; want cancelled", out.Cancel.ID, got)
	}
	var trail struct {
		Records []struct {
			TokenLabel string `json:"token_label"`
			UserID     string `json:"user_id"`
			Capability string `json:"capability"`
			Decision   string `json:"decision"`
		} `json:"records"`
	}
	// The trail is written behind the calls.
	for deadline := time.Now().Add(10 * time.Second); len(trail.Records) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		adminJSON(t, h, "/api/v1/admin/audit?token=oauth:alice&capability=booking.cancel", &trail)
	}
	if len(trail.Records) != 1 || trail.Records[0].UserID != "alice" {
		t.Errorf("audit of alice's cancel: %+v", trail.Records)
	}
	if strings.Contains(h.fullLog(), "eyJ") {
		t.Error("an access token reached the host's log")
	}
}

// bookingStatus is the status booking.get gives for id, as token (a
// configured one), over the Go SDK client.
func bookingStatus(t *testing.T, h *host, token, id string) string {
	t.Helper()
	s := connect(t, h, token, protocolVersions[0])
	res := callTool(t, s, "booking.get", map[string]any{"id": id})
	var b booking
	if err := json.Unmarshal(res.data, &b); err != nil {
		t.Fatalf("booking.get %s: %v (%+v)", id, err, res)
	}
	return b.Status
}
