package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/clientip"
)

// adminFrom sends GET AdminActionsPath with token from the client at
// peer, through a proxy when fwd is set.
func adminFrom(srv *Server, peer, fwd, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, AdminActionsPath, nil)
	req.RemoteAddr = peer
	if fwd != "" {
		req.Header.Set("X-Forwarded-For", fwd)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec
}

// stopClock fixes the admin guard's clock at t0, so a test's requests all
// fall in one window however long it takes.
func stopClock(srv *Server, t0 time.Time) *time.Time {
	now := t0
	srv.guard.now = func() time.Time { return now }
	return &now
}

// TestAdminFailedTokensThrottled: 300 bad tokens in a row from one
// client are mostly answered 429 with Retry-After, the same answer for a
// token that exists, so the throttle is no oracle; a good token from
// another client still works; the window passing lifts it.
func TestAdminFailedTokensThrottled(t *testing.T) {
	srv := newFixture(t, func(o *Options) { o.Admin = &switchboard{st: ActionsState{Enabled: true}} }).srv
	now := stopClock(srv, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	statuses := map[int]int{}
	for i := range 300 {
		rec := adminFrom(srv, "198.51.100.1:4000", "", fmt.Sprintf("guess-token-%04d-abcdefgh", i))
		statuses[rec.Code]++
		if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") != "60" {
			t.Fatalf("guess %d: Retry-After %q; want 60", i, rec.Header().Get("Retry-After"))
		}
	}
	if statuses[http.StatusNotFound] != adminFailuresPerClient || statuses[http.StatusTooManyRequests] != 300-adminFailuresPerClient {
		t.Fatalf("answers to 300 bad tokens: %v; want %d not found, the rest 429", statuses, adminFailuresPerClient)
	}
	bad := adminFrom(srv, "198.51.100.1:4000", "", "guess-token-9999-abcdefgh")
	good := adminFrom(srv, "198.51.100.1:4000", "", adminToken)
	problemOf(t, bad, http.StatusTooManyRequests)
	if good.Code != bad.Code || good.Body.String() != bad.Body.String() {
		t.Fatalf("a throttled client told a good token from a bad one: %d %s / %d %s", good.Code, good.Body, bad.Code, bad.Body)
	}
	if rec := adminFrom(srv, "203.0.113.5:4000", "", adminToken); rec.Code != http.StatusOK {
		t.Fatalf("a good token from another client: %d %s", rec.Code, rec.Body)
	}
	*now = now.Add(time.Minute)
	if rec := adminFrom(srv, "198.51.100.1:4000", "", adminToken); rec.Code != http.StatusOK {
		t.Fatalf("a good token after the window: %d %s", rec.Code, rec.Body)
	}
	// No token at all guesses nothing, and is not counted.
	for range 3 * adminFailuresPerClient {
		req := httptest.NewRequest(http.MethodGet, AdminActionsPath, nil)
		req.RemoteAddr = "198.51.100.77:1"
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Fatalf("no token: %d; want 404", rec.Code)
		}
	}
}

// TestAdminGlobalBudget: guesses from rotating clients behind a declared
// proxy are stopped by the budget of all clients together; a client that
// presented a good token before the flood is still heard, a newcomer
// waits for the window.
func TestAdminGlobalBudget(t *testing.T) {
	srv := newFixture(t, func(o *Options) {
		o.Admin = &switchboard{st: ActionsState{Enabled: true}}
		o.ClientIP = clientip.New("X-Forwarded-For", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")})
	}).srv
	stopClock(srv, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if rec := adminFrom(srv, "10.0.0.1:1", "203.0.113.5", adminToken); rec.Code != http.StatusOK {
		t.Fatalf("the operator before the flood: %d", rec.Code)
	}
	throttled := 0
	for i := range 300 {
		// Each guess claims a new address on the left; the proxy's entry
		// on the right is the one believed.
		rec := adminFrom(srv, "10.0.0.1:1", fmt.Sprintf("1.1.1.1, 198.51.%d.%d", i/250, i%250), fmt.Sprintf("guess-token-%04d-abcdefgh", i))
		if rec.Code == http.StatusTooManyRequests {
			throttled++
			if !strings.Contains(rec.Body.String(), "on this host lately") {
				t.Fatalf("guess %d: %s", i, rec.Body)
			}
		}
	}
	if throttled != 300-adminFailuresGlobal {
		t.Fatalf("%d of 300 rotating guesses throttled; want all past the first %d", throttled, adminFailuresGlobal)
	}
	if rec := adminFrom(srv, "10.0.0.1:1", "203.0.113.5", adminToken); rec.Code != http.StatusOK {
		t.Fatalf("the operator during the flood: %d %s", rec.Code, rec.Body)
	}
	if rec := adminFrom(srv, "10.0.0.1:1", "203.0.113.6", adminToken); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("a newcomer during the flood: %d; want 429", rec.Code)
	}
}
