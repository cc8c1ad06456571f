package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/clientip"
	"github.com/capgate/capgate/host/internal/server"
)

func killSwitchOff(csrf string) url.Values {
	return url.Values{"enabled": {"false"}, "confirm": {"yes"}, "csrf": {csrf}}
}

// TestSignOutEndsTheSessionEverywhere: after a sign-out, the old cookie,
// replayed with its form token, flips no kill switch and opens no page,
// here or on a replica over the same store; signing in again works.
func TestSignOutEndsTheSessionEverywhere(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	csrf := r.csrfOf(ops)
	wantRedirect(t, r.do(req{method: "POST", target: "/admin/signout", form: url.Values{"csrf": {csrf}}, cookie: ops}), "/admin/signin?why=out")

	rec := r.do(req{method: "POST", target: "/admin/actions", form: killSwitchOff(csrf), cookie: ops})
	wantBody(t, rec, http.StatusUnauthorized, "not signed in", "signed out")
	if st := r.sw.Actions(); !st.Enabled {
		t.Fatalf("a signed-out cookie turned actions off: %+v", st)
	}
	wantRedirect(t, r.do(req{target: "/admin/", cookie: ops}), "/admin/signin?why=out")

	replica := r.console(r.key)
	r.h = replica
	wantBody(t, r.do(req{method: "POST", target: "/admin/actions", form: killSwitchOff(csrf), cookie: ops}), http.StatusUnauthorized, "signed out")
	wantRedirect(t, r.do(req{target: "/admin/approvals", cookie: ops}), "/admin/signin?next=%2Fadmin%2Fapprovals&why=out")
	if st := r.sw.Actions(); !st.Enabled {
		t.Fatalf("a signed-out cookie turned actions off on a replica: %+v", st)
	}

	again := r.signIn(adminToken)
	wantRedirect(t, r.do(req{method: "POST", target: "/admin/actions", form: killSwitchOff(r.csrfOf(again)), cookie: again}), "/admin/actions?done=off")
}

// TestSignOutsUnreadable: with the sign-outs out of reach, no session
// opens the console and a sign-out is not pretended: both answer 503 and
// keep the cookie, and nothing changes.
func TestSignOutsUnreadable(t *testing.T) {
	r := newRig(t)
	gone, err := approvals.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), approvals.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	c, err := New(Options{API: server.New(r.apiOpts).Handler(), Accounts: r.book, Key: r.key, Signouts: gone,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Now: func() time.Time { return r.now }})
	if err != nil {
		t.Fatal(err)
	}
	ops := r.signIn(adminToken)
	csrf := r.csrfOf(ops)
	r.h = c
	for _, q := range []req{
		{target: "/admin/", cookie: ops},
		{method: "POST", target: "/admin/actions", form: killSwitchOff(csrf), cookie: ops},
		{method: "POST", target: "/admin/signout", form: url.Values{"csrf": {csrf}}, cookie: ops},
	} {
		rec := r.do(q)
		wantBody(t, rec, http.StatusServiceUnavailable, "cannot be checked now")
		if ck := sessionCookie(rec); ck != nil {
			t.Errorf("%s %s cleared the cookie: %+v", q.method, q.target, ck)
		}
	}
	if st := r.sw.Actions(); !st.Enabled {
		t.Fatalf("actions turned off: %+v", st)
	}
}

// proxied is a console behind the proxy at the rig's peer address
// (192.0.2.7), which writes X-Forwarded-For.
func proxied(r *rig) {
	r.t.Helper()
	c, err := New(Options{API: server.New(r.apiOpts).Handler(), Accounts: r.book, Key: r.key, Signouts: r.store,
		ClientIP: clientip.New("X-Forwarded-For", []netip.Prefix{netip.MustParsePrefix("192.0.2.7/32")}),
		Logger:   slog.New(slog.NewTextHandler(r.logs, nil)), Now: func() time.Time { return r.now }})
	if err != nil {
		r.t.Fatal(err)
	}
	r.c, r.h = c, c
}

func signinFrom(r *rig, client, token string) *req {
	return &req{method: "POST", target: "/admin/signin", form: url.Values{"token": {token}},
		header: map[string]string{"X-Forwarded-For": "203.0.113.250, " + client}}
}

// TestSignInThrottledPerClientBehindAProxy: behind a declared proxy one
// client's failures lock out that client, not the operators sharing the
// proxy; behind one not declared they would lock out everyone.
func TestSignInThrottledPerClientBehindAProxy(t *testing.T) {
	r := newRig(t)
	for i := range 10 {
		wantBody(t, r.do(*signinFrom(r, "198.51.100.1", fmt.Sprintf("wrong-token-%02d", i))), http.StatusUnauthorized)
	}
	// Undeclared, the header is the client's word: ignored, all are one.
	wantBody(t, r.do(*signinFrom(r, "198.51.100.2", adminToken)), http.StatusTooManyRequests, "from your address")

	r = newRig(t)
	proxied(r)
	for i := range 10 {
		wantBody(t, r.do(*signinFrom(r, "198.51.100.1", fmt.Sprintf("wrong-token-%02d", i))), http.StatusUnauthorized)
	}
	wantBody(t, r.do(*signinFrom(r, "198.51.100.1", adminToken)), http.StatusTooManyRequests, "from your address")
	if rec := r.do(*signinFrom(r, "198.51.100.2", adminToken)); rec.Code != http.StatusSeeOther || sessionCookie(rec) == nil {
		t.Fatalf("an operator behind the same proxy: %d %s; want signed in", rec.Code, rec.Body)
	}
}

// TestSignInGlobalBudget: a guesser taking a new address for every try
// is stopped by the budget of all clients together, and so is a newcomer
// meanwhile; an operator who signed in lately still signs in, and the
// window passing lifts it.
func TestSignInGlobalBudget(t *testing.T) {
	r := newRig(t)
	proxied(r)
	if rec := r.do(*signinFrom(r, "198.51.100.9", adminToken)); rec.Code != http.StatusSeeOther {
		t.Fatalf("the operator's first sign-in: %d", rec.Code)
	}
	refused := 0
	for i := range 300 {
		rec := r.do(*signinFrom(r, fmt.Sprintf("2001:db8:%x::1", i), fmt.Sprintf("wrong-token-%03d", i)))
		switch rec.Code {
		case http.StatusTooManyRequests:
			refused++
			wantBody(t, rec, http.StatusTooManyRequests, "on this host lately")
		case http.StatusUnauthorized:
		default:
			t.Fatalf("try %d: %d", i, rec.Code)
		}
	}
	if refused != 200 {
		t.Fatalf("%d of 300 rotating tries refused; want all past the first 100", refused)
	}
	wantBody(t, r.do(*signinFrom(r, "198.51.100.10", adminToken)), http.StatusTooManyRequests, "on this host lately")
	if rec := r.do(*signinFrom(r, "198.51.100.9", adminToken)); rec.Code != http.StatusSeeOther {
		t.Fatalf("the operator who signed in lately: %d %s; want signed in", rec.Code, rec.Body)
	}
	r.now = r.now.Add(time.Minute)
	if rec := r.do(*signinFrom(r, "198.51.100.10", adminToken)); rec.Code != http.StatusSeeOther {
		t.Fatalf("a newcomer after the window: %d; want signed in", rec.Code)
	}
}
