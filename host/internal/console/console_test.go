package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

// The tokens of the test host.
const (
	adminToken  = "admin-secret-token-1"
	viewerToken = "viewer-secret-token"  // admin scope, a role without approvals.decide
	shopToken   = "shop-secret-token-22" // action scope
)

// accountBook is the host's tokens, changeable as a reload changes them.
type accountBook struct {
	mu  sync.Mutex
	all []Account
	// roles maps a label to its role, for the API's principals.
	roles map[string]string
	users map[string]string
}

func (b *accountBook) find(match func(Account) bool) (Account, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.all {
		if match(a) {
			return a, true
		}
	}
	return Account{}, false
}

func (b *accountBook) ByTokenSHA256(sum [32]byte) (Account, bool) {
	return b.find(func(a Account) bool { return a.TokenSHA256 == sum })
}

func (b *accountBook) ByLabel(label string) (Account, bool) {
	return b.find(func(a Account) bool { return a.Label == label })
}

// set replaces the token labelled label (adding it when new).
func (b *accountBook) set(a Account) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.all {
		if b.all[i].Label == a.Label {
			b.all[i] = a
			return
		}
	}
	b.all = append(b.all, a)
}

func (b *accountBook) remove(label string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.all {
		if b.all[i].Label == label {
			b.all = append(b.all[:i], b.all[i+1:]...)
			return
		}
	}
}

// Authenticate is the API's side, as the host wires it: a label the
// console sends, looked up as the tokens stand now.
func (b *accountBook) Authenticate(authz string) (dispatch.Principal, bool) {
	label, ok := LabelOf(authz)
	if !ok {
		return dispatch.Principal{}, false
	}
	a, ok := b.ByLabel(label)
	if !ok {
		return dispatch.Principal{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return dispatch.Principal{Token: a.Label, Role: b.roles[a.Label], Scope: a.Scope, UserID: b.users[a.Label]}, true
}

// killSwitch is the shared switch, in memory.
type killSwitch struct {
	mu sync.Mutex
	st server.ActionsState
}

func (k *killSwitch) Actions() server.ActionsState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.st
}

func (k *killSwitch) SetActions(_ context.Context, enabled bool, by string) (server.ActionsState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.st = server.ActionsState{Enabled: enabled, Config: true, Switch: enabled, ChangedBy: by, ChangedAt: time.Now()}
	return k.st, nil
}

type inventory struct{}

func (inventory) Capabilities() server.CapabilityList {
	return server.CapabilityList{
		Capabilities: []server.CapabilityInfo{
			{Name: "booking.cancel", Pack: "booking", PackEnabled: true, Kind: "action", Risk: "dangerous", Permission: "booking.write", Plugin: "booking", OwnerGuarded: true, Roles: []string{"admin", "customer"}},
			{Name: "booking.list", Pack: "booking", PackEnabled: true, Kind: "read", Risk: "safe", Permission: "booking.read", Plugin: "booking", Roles: []string{"admin", "customer", "viewer"}},
			{Name: "search.query", Pack: "search", PackEnabled: true, Kind: "read", Risk: "safe", Plugin: "search", Roles: []string{"admin", "customer", "viewer"}},
		},
		Packs: []string{"booking", "search"},
		Roles: []string{"admin", "customer", "viewer"},
	}
}
func (inventory) Packs() []server.PackInfo {
	return []server.PackInfo{{Name: "booking", Enabled: true, Capabilities: 2}, {Name: "search", Enabled: true, Capabilities: 1}}
}
func (inventory) Plugins() []server.PluginInfo {
	return []server.PluginInfo{{Name: "booking", State: "running", PID: 42, MaxInFlight: 256, Capabilities: 2}}
}
func (inventory) Tokens() []server.TokenInfo {
	return []server.TokenInfo{{Label: "ops", Role: "admin", Scope: "admin", UserID: "ops"}, {Label: "shop", Role: "customer", Scope: "action", UserID: "alice"}}
}

// rig is a console over a real admin API (server.New) on a real
// approvals store and audit trail, with a clock the test moves.
type rig struct {
	t        *testing.T
	c        *Console
	h        http.Handler
	book     *accountBook
	sw       *killSwitch
	store    *approvals.Store
	trail    audit.Store
	now      time.Time
	logs     *bytes.Buffer
	key      []byte
	apiOpts  server.Options
	approval string // a held call of alice's, pending
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := approvals.OpenSQLite(ctx, filepath.Join(dir, "approvals.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	trail, err := audit.OpenSQLite(ctx, filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trail.Close() })
	gate, err := dispatch.New(registry.New(nil), dispatch.Policy{Roles: map[string][]string{
		"admin": {"*"}, "viewer": {"booking.read"}, "customer": {"booking.read", "booking.write"},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	book := &accountBook{
		all: []Account{
			{Label: "ops", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256(adminToken)},
			{Label: "viewer", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256(viewerToken)},
			{Label: "shop", Scope: dispatch.ScopeAction, TokenSHA256: tokenSHA256(shopToken)},
		},
		roles: map[string]string{"ops": "admin", "viewer": "viewer", "shop": "customer"},
		users: map[string]string{"ops": "ops", "viewer": "vera", "shop": "alice"},
	}
	sw := &killSwitch{st: server.ActionsState{Enabled: true, Config: true, Switch: true}}
	key, err := store.SessionKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, book: book, sw: sw, store: store, trail: trail, now: time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC), logs: &bytes.Buffer{}, key: key}
	r.apiOpts = server.Options{Enabled: true, Dispatcher: gate, Auth: book, Admin: sw, Audit: trail, Approvals: store, Inventory: inventory{},
		Logger: slog.New(slog.NewTextHandler(r.logs, nil))}
	r.c = r.console(key)
	r.h = r.c
	a, err := store.Create(ctx, approvals.Request{TokenLabel: "shop", Role: "customer", Scope: "action", UserID: "alice",
		Capability: "booking.cancel", Args: []byte(`{"id":"bk_1"}`), Risk: registry.RiskDangerous, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.approval = a.ID
	if err := trail.Append(ctx, []audit.Record{
		{Time: r.now.Add(-time.Minute), TokenLabel: "shop", UserID: "alice", Capability: "booking.list", Decision: audit.Admitted, Outcome: audit.OutcomeOK, Protocol: "mcp"},
		{Time: r.now.Add(-30 * time.Second), TokenLabel: "shop", UserID: "alice", Capability: "booking.cancel", Decision: audit.Refused, Step: "ownership", Reason: "not hers", Protocol: "mcp"},
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// console is another console over the same host: a replica, when key is
// the shared one.
func (r *rig) console(key []byte) *Console {
	r.t.Helper()
	c, err := New(Options{API: server.New(r.apiOpts).Handler(), Accounts: r.book, Key: key, Version: "test", Signouts: r.store,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Now: func() time.Time { return r.now }})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// req is one request from a browser on the console's own page, unless
// headers say otherwise.
type req struct {
	method, target string
	form           url.Values
	cookie         string
	header         map[string]string
	tls            bool
}

func (r *rig) do(q req) *httptest.ResponseRecorder {
	r.t.Helper()
	var body io.Reader
	if q.form != nil {
		body = strings.NewReader(q.form.Encode())
	}
	if q.method == "" {
		q.method = http.MethodGet
	}
	hr := httptest.NewRequest(q.method, "http://console.test"+q.target, body)
	hr.RemoteAddr = "192.0.2.7:5555"
	if q.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		hr.Header.Set("Origin", "http://console.test")
		hr.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	if q.cookie != "" {
		hr.AddCookie(&http.Cookie{Name: CookieName, Value: q.cookie})
	}
	for k, v := range q.header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	if q.tls {
		hr.TLS = &tls.ConnectionState{}
	}
	rec := httptest.NewRecorder()
	r.h.ServeHTTP(rec, hr)
	return rec
}

// signIn signs in with token and returns the session cookie's value.
func (r *rig) signIn(token string) string {
	r.t.Helper()
	rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {token}}})
	if rec.Code != http.StatusSeeOther {
		r.t.Fatalf("sign-in: %d %s", rec.Code, rec.Body)
	}
	ck := sessionCookie(rec)
	if ck == nil || ck.Value == "" {
		r.t.Fatal("sign-in set no session cookie")
	}
	return ck.Value
}

// csrfOf reads the session's form token from a page it shows.
func (r *rig) csrfOf(cookie string) string {
	r.t.Helper()
	rec := r.do(req{target: "/admin/actions", cookie: cookie})
	const mark = `name="csrf" value="`
	b := rec.Body.String()
	i := strings.Index(b, mark)
	if i < 0 {
		r.t.Fatalf("no form token on the page: %d %s", rec.Code, b)
	}
	b = b[i+len(mark):]
	return b[:strings.IndexByte(b, '"')]
}

func sessionCookie(rec *httptest.ResponseRecorder) *http.Cookie {
	for _, c := range rec.Result().Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	return nil
}

func wantRedirect(t *testing.T, rec *httptest.ResponseRecorder, target string) {
	t.Helper()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != target {
		t.Fatalf("answered %d to %q; want 303 to %q\n%s", rec.Code, rec.Header().Get("Location"), target, rec.Body)
	}
}

func wantBody(t *testing.T, rec *httptest.ResponseRecorder, status int, has ...string) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d\n%s", rec.Code, status, rec.Body)
	}
	for _, s := range has {
		if !strings.Contains(rec.Body.String(), s) {
			t.Fatalf("the page does not say %q:\n%s", s, rec.Body)
		}
	}
}

func TestSignIn(t *testing.T) {
	r := newRig(t)

	t.Run("PagesSendToSignInAndBack", func(t *testing.T) {
		wantRedirect(t, r.do(req{target: "/admin/"}), "/admin/signin")
		wantRedirect(t, r.do(req{target: "/admin/audit?capability=booking.list"}), "/admin/signin?next=%2Fadmin%2Faudit%3Fcapability%3Dbooking.list")
		wantRedirect(t, r.do(req{target: "/admin"}), "/admin/")
	})

	t.Run("OneAnswerForEveryRefusedToken", func(t *testing.T) {
		var first string
		for _, tok := range []string{"", "short", "no such token at all", shopToken, strings.Repeat("x", 600), "bad token with spaces"} {
			rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {tok}}})
			wantBody(t, rec, http.StatusUnauthorized, signinRefused)
			if sessionCookie(rec) != nil {
				t.Fatalf("token %q got a cookie", tok)
			}
			body := strings.ReplaceAll(rec.Body.String(), tok, "")
			if first == "" {
				first = body
			} else if body != first {
				t.Fatalf("token %q got another page than the first refused one: a token oracle", tok)
			}
		}
		for _, secret := range []string{shopToken, "no such token at all"} {
			if strings.Contains(r.logs.String(), secret) {
				t.Fatalf("the log holds a typed token:\n%s", r.logs)
			}
		}
		if !strings.Contains(r.logs.String(), "token shop is of scope action, not admin") {
			t.Fatalf("the log does not say why the shop token was refused:\n%s", r.logs)
		}
		r.c.limiter.Succeed("192.0.2.7", r.now)
	})

	t.Run("AdminTokenSignsIn", func(t *testing.T) {
		rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {adminToken}, "next": {"/admin/audit?capability=booking.list"}}})
		wantRedirect(t, rec, "/admin/audit?capability=booking.list")
		ck := sessionCookie(rec)
		if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/admin" || ck.Secure || ck.MaxAge != int(DefaultSessionTTL/time.Second) {
			t.Fatalf("cookie %+v; want HttpOnly, SameSite=Strict, Path=/admin, not Secure over plain HTTP, for 8 hours", ck)
		}
		if strings.Contains(ck.Value, adminToken) || strings.Contains(string(mustB64(t, strings.Split(ck.Value, ".")[0])), adminToken) {
			t.Fatal("the cookie holds the token")
		}
		wantBody(t, r.do(req{target: "/admin/", cookie: ck.Value}), http.StatusOK, "Overview", ">ops<")
		// Signed in already: the sign-in page sends to the console.
		wantRedirect(t, r.do(req{target: "/admin/signin", cookie: ck.Value}), "/admin/")
		if strings.Contains(r.logs.String(), adminToken) {
			t.Fatal("the log holds the admin token")
		}
	})

	t.Run("SecureOverTLS", func(t *testing.T) {
		for name, q := range map[string]req{
			"tls":   {tls: true},
			"proxy": {header: map[string]string{"X-Forwarded-Proto": "https"}},
		} {
			q.method, q.target, q.form = "POST", "/admin/signin", url.Values{"token": {adminToken}}
			if ck := sessionCookie(r.do(q)); ck == nil || !ck.Secure {
				t.Errorf("%s: cookie %+v; want Secure", name, ck)
			}
		}
	})

	t.Run("NextStaysInTheConsole", func(t *testing.T) {
		for _, next := range []string{"//evil.example/admin/", "https://evil.example/admin/", "/api/v1/admin/actions", "/admin/../api/v1/mcp", "/admin\\..\\x", "javascript:alert(1)"} {
			rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {adminToken}, "next": {next}}})
			wantRedirect(t, rec, "/admin/")
		}
	})

	t.Run("CrossSiteSignInRefused", func(t *testing.T) {
		rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {adminToken}}, header: map[string]string{"Origin": "https://evil.example"}})
		wantBody(t, rec, http.StatusForbidden, "another site")
		if sessionCookie(rec) != nil {
			t.Fatal("a cross-site sign-in got a cookie")
		}
	})
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSignInFailuresAreLimited(t *testing.T) {
	r := newRig(t)
	for i := range 10 {
		rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {"wrong-token-" + string(rune('a'+i))}}})
		wantBody(t, rec, http.StatusUnauthorized)
	}
	// Over the bound even the right token waits: the answer cannot tell
	// a guesser which of their tries was right.
	rec := r.do(req{method: "POST", target: "/admin/signin", form: url.Values{"token": {adminToken}}})
	wantBody(t, rec, http.StatusTooManyRequests, "wait a minute")
	if rec.Header().Get("Retry-After") != "60" || sessionCookie(rec) != nil {
		t.Fatalf("Retry-After %q, cookie %v", rec.Header().Get("Retry-After"), sessionCookie(rec))
	}
	r.now = r.now.Add(time.Minute)
	r.signIn(adminToken)
}

func TestSessionEnds(t *testing.T) {
	r := newRig(t)
	good := r.signIn(adminToken)
	other, err := newSessions(bytes.Repeat([]byte{7}, 32), 0)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey := other.issue("ops", tokenSHA256(adminToken), r.now)
	long, _ := newSessions(r.key, 100*time.Hour)
	_, tooLong := long.issue("ops", tokenSHA256(adminToken), r.now)
	enc, sig, _ := strings.Cut(good, ".")
	payload := strings.Replace(string(mustB64(t, enc)), "ops|", "viewer|", 1)
	relabelled := b64([]byte(payload)) + "." + sig

	for name, tc := range map[string]struct {
		cookie string
		why    string
	}{
		"garbage":            {"not-a-session", "invalid"},
		"oversized":          {strings.Repeat("a", maxCookieBytes+1) + "." + sig, "invalid"},
		"unsigned":           {enc + ".", "invalid"},
		"another key's":      {otherKey, "invalid"},
		"relabelled":         {relabelled, "invalid"},
		"longer than issued": {tooLong, "expired"},
	} {
		t.Run(name, func(t *testing.T) {
			rec := r.do(req{target: "/admin/tokens", cookie: tc.cookie})
			wantRedirect(t, rec, "/admin/signin?next=%2Fadmin%2Ftokens&why="+tc.why)
			if ck := sessionCookie(rec); ck == nil || ck.MaxAge >= 0 {
				t.Fatalf("the bad cookie is not cleared: %+v", ck)
			}
		})
	}

	t.Run("ValidOnAReplica", func(t *testing.T) {
		r.h = r.console(r.key)
		defer func() { r.h = r.c }()
		wantBody(t, r.do(req{target: "/admin/tokens", cookie: good}), http.StatusOK, "Tokens")
	})

	t.Run("Expired", func(t *testing.T) {
		defer func(at time.Time) { r.now = at }(r.now)
		r.now = r.now.Add(DefaultSessionTTL - time.Second)
		wantBody(t, r.do(req{target: "/admin/", cookie: good}), http.StatusOK)
		r.now = r.now.Add(time.Second)
		wantRedirect(t, r.do(req{target: "/admin/", cookie: good}), "/admin/signin?why=expired")
	})

	t.Run("TokenRekeyed", func(t *testing.T) {
		defer r.book.set(Account{Label: "ops", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256(adminToken)})
		r.book.set(Account{Label: "ops", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256("a-new-secret-for-ops")})
		wantRedirect(t, r.do(req{target: "/admin/", cookie: good}), "/admin/signin?why=token")
	})

	t.Run("TokenNoLongerAdmin", func(t *testing.T) {
		defer r.book.set(Account{Label: "ops", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256(adminToken)})
		r.book.set(Account{Label: "ops", Scope: dispatch.ScopeAction, TokenSHA256: tokenSHA256(adminToken)})
		wantRedirect(t, r.do(req{target: "/admin/", cookie: good}), "/admin/signin?why=token")
	})

	t.Run("TokenRemoved", func(t *testing.T) {
		r.book.remove("ops")
		wantRedirect(t, r.do(req{target: "/admin/", cookie: good}), "/admin/signin?why=token")
		rec := r.do(req{target: "/admin/audit/tail?after=0", cookie: good})
		wantBody(t, rec, http.StatusUnauthorized, "signed out")
	})

	t.Run("SignInPageSaysWhy", func(t *testing.T) {
		wantBody(t, r.do(req{target: "/admin/signin?why=token"}), http.StatusOK, "its token was removed")
		wantBody(t, r.do(req{target: "/admin/signin?why=expired"}), http.StatusOK, "expired")
	})
}

func TestNewRefusesAShortKey(t *testing.T) {
	_, err := New(Options{API: http.NotFoundHandler(), Accounts: &accountBook{}, Key: make([]byte, MinKeyBytes-1)})
	if err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("a 31-byte key: %v", err)
	}
	if _, err := New(Options{Accounts: &accountBook{}, Key: make([]byte, MinKeyBytes)}); err == nil {
		t.Fatal("no API: no error")
	}
}

// TestFormsAreThisSessions: a change needs this console's origin and this
// session's form token; every refusal leaves the switch as it was.
func TestFormsAreThisSessions(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	csrf := r.csrfOf(ops)
	viewer := r.signIn(viewerToken)
	viewerCSRF := r.csrfOf(viewer)
	if csrf == viewerCSRF || csrf == "" {
		t.Fatalf("two sessions share a form token %q", csrf)
	}
	off := func(token string) url.Values {
		return url.Values{"enabled": {"false"}, "confirm": {"yes"}, "csrf": {token}}
	}
	for name, tc := range map[string]struct {
		q      req
		status int
		says   string
	}{
		"no form token":            {req{form: url.Values{"enabled": {"false"}, "confirm": {"yes"}}, cookie: ops}, http.StatusForbidden, "form token"},
		"another session's token":  {req{form: off(viewerCSRF), cookie: ops}, http.StatusForbidden, "form token"},
		"another site's origin":    {req{form: off(csrf), cookie: ops, header: map[string]string{"Origin": "https://evil.example"}}, http.StatusForbidden, "another site"},
		"a look-alike origin":      {req{form: off(csrf), cookie: ops, header: map[string]string{"Origin": "http://console.test.evil.example"}}, http.StatusForbidden, "another site"},
		"an opaque origin":         {req{form: off(csrf), cookie: ops, header: map[string]string{"Origin": "null", "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden, "another site"},
		"a cross-site fetch":       {req{form: off(csrf), cookie: ops, header: map[string]string{"Origin": "", "Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden, "another site"},
		"no session":               {req{form: off(csrf)}, http.StatusUnauthorized, "not signed in"},
		"a body over the bound":    {req{form: url.Values{"csrf": {csrf}, "reason": {strings.Repeat("x", maxFormBytes)}}, cookie: ops}, http.StatusRequestEntityTooLarge, "over 8 KiB"},
		"not a switch value":       {req{form: url.Values{"enabled": {"maybe"}, "confirm": {"yes"}, "csrf": {csrf}}, cookie: ops}, http.StatusBadRequest, "true or false"},
		"no confirmation yet":      {req{form: url.Values{"enabled": {"false"}, "csrf": {csrf}}, cookie: ops}, http.StatusOK, "Yes, switch actions off"},
		"a sign-in form's session": {req{form: off(csrf), cookie: "forged"}, http.StatusUnauthorized, "not signed in"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.q.method, tc.q.target = "POST", "/admin/actions"
			wantBody(t, r.do(tc.q), tc.status, tc.says)
			if !r.sw.Actions().Enabled {
				t.Fatal("the switch was thrown")
			}
		})
	}

	t.Run("ConfirmedFromTheConsole", func(t *testing.T) {
		// An opaque origin the browser vouches is this site passes too.
		rec := r.do(req{method: "POST", target: "/admin/actions", form: off(csrf), cookie: ops, header: map[string]string{"Origin": "null"}})
		wantRedirect(t, rec, "/admin/actions?done=off")
		if st := r.sw.Actions(); st.Enabled || st.ChangedBy != "ops" {
			t.Fatalf("switch %+v; want off, by the session's token label", st)
		}
		wantBody(t, r.do(req{target: "/admin/actions?done=off", cookie: ops}), http.StatusOK, "Actions are off on every replica", `data-enabled="false"`, "set by ops at 20")
	})
}

func TestSignOut(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	csrf := r.csrfOf(ops)
	wantBody(t, r.do(req{method: "POST", target: "/admin/signout", form: url.Values{}, cookie: ops}), http.StatusForbidden, "still signed in")
	wantBody(t, r.do(req{method: "POST", target: "/admin/signout", form: url.Values{"csrf": {csrf}}, cookie: ops, header: map[string]string{"Origin": "https://evil.example"}}),
		http.StatusForbidden, "another site")
	rec := r.do(req{method: "POST", target: "/admin/signout", form: url.Values{"csrf": {csrf}}, cookie: ops})
	wantRedirect(t, rec, "/admin/signin?why=out")
	if ck := sessionCookie(rec); ck == nil || ck.MaxAge >= 0 || ck.Value != "" {
		t.Fatalf("sign-out left the cookie: %+v", ck)
	}
	wantBody(t, r.do(req{target: "/admin/signin?why=out"}), http.StatusOK, "You are signed out.")
}

// TestSecurityHeaders: every answer, page, file or error, carries them.
func TestSecurityHeaders(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	css := strings.TrimPrefix(r.c.static.urls["console.css"], "")
	for _, q := range []req{
		{target: "/admin/signin"}, {target: "/admin/", cookie: ops}, {target: "/admin/no-such-page", cookie: ops},
		{target: "/admin/no-such-page"}, {target: css}, {target: "/admin/static/nope.js"},
		{method: "POST", target: "/admin/signin", form: url.Values{"token": {"nope-nope-nope"}}},
		{method: "DELETE", target: "/admin/actions", cookie: ops},
	} {
		rec := r.do(q)
		h := rec.Header()
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: CSP %q lacks %s", q.method, q.target, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code: %q", q.target, csp)
		}
		for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
			if h.Get(k) != v {
				t.Errorf("%s %s: %s %q, want %q", q.method, q.target, k, h.Get(k), v)
			}
		}
		if !strings.HasPrefix(q.target, "/admin/static/") && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q; a page must not be cached", q.target, h.Get("Cache-Control"))
		}
	}
	rec := r.do(req{target: css})
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/css") || rec.Header().Get("ETag") == "" {
		t.Fatalf("the stylesheet: %d %q", rec.Code, rec.Header())
	}
	if again := r.do(req{target: css, header: map[string]string{"If-None-Match": rec.Header().Get("ETag")}}); again.Code != http.StatusNotModified {
		t.Fatalf("a stylesheet the browser has: %d, want 304", again.Code)
	}
	// No page loads anything from elsewhere, nor has inline script.
	for _, page := range []string{"/admin/", "/admin/capabilities", "/admin/plugins", "/admin/tokens", "/admin/audit", "/admin/approvals", "/admin/actions", "/admin/approvals/" + r.approval} {
		b := r.do(req{target: page, cookie: ops}).Body.String()
		for _, bad := range []string{"http://", "https://", "<script>", " style=", " onclick=", " onload="} {
			if strings.Contains(b, bad) {
				t.Errorf("%s holds %q", page, bad)
			}
		}
	}
}

// TestPagesShowTheAPI: pages show what the API answers, and its refusals
// in its own words and status.
func TestPagesShowTheAPI(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	for _, tc := range []struct {
		target string
		status int
		says   []string
	}{
		{"/admin/", 200, []string{"Waiting for approval", `<p class="big warn">1</p>`, "1/1", "booking"}},
		{"/admin/capabilities", 200, []string{`data-capability="booking.cancel"`, `data-capability="search.query"`, "3 of 3 capabilities"}},
		{"/admin/capabilities?pack=booking&q=CANCEL", 200, []string{`data-capability="booking.cancel"`, "1 of 2 capabilities"}},
		{"/admin/capabilities?role=viewer", 200, []string{`data-capability="booking.list"`, "2 of 2"}},
		{"/admin/capabilities?pack=nope", 400, []string{`pack &#34;nope&#34; is not known here`}},
		{"/admin/capabilities?sort=name", 400, []string{`unknown parameter &#34;sort&#34;`}},
		{"/admin/capabilities?q=" + strings.Repeat("x", maxQuery+1), 400, []string{"no capability name is over 128"}},
		{"/admin/plugins", 200, []string{`data-plugin="booking"`, "running"}},
		{"/admin/tokens", 200, []string{`data-token="ops"`, `data-token="shop"`, "••••"}},
		{"/admin/audit", 200, []string{`data-capability="booking.list"`, "refused at ownership", "not hers"}},
		{"/admin/audit?decision=refused", 200, []string{"refused at ownership"}},
		{"/admin/audit?decision=maybe", 400, []string{"parameter decision &#34;maybe&#34; is not admitted or refused"}},
		{"/admin/audit?since=2h", 200, []string{"refused at ownership"}},
		{"/admin/audit?since=soon", 400, []string{"nor a time ago"}},
		{"/admin/audit?limit=1", 200, []string{"Older →", "after="}},
		{"/admin/audit?limit=5000", 400, []string{"from 1 to 1000"}},
		{"/admin/audit?color=red", 400, []string{"unknown parameter"}},
		{"/admin/approvals", 200, []string{`data-approval="` + r.approval + `"`, "Approve"}},
		{"/admin/approvals?status=done", 200, []string{"No held call is done"}},
		{"/admin/approvals?status=lost", 400, []string{"none of pending"}},
		{"/admin/approvals/" + r.approval, 200, []string{"booking.cancel", `&#34;id&#34;: &#34;bk_1&#34;`}},
		{"/admin/approvals/ap_nope", 404, []string{"no such approval request"}},
		{"/admin/actions", 200, []string{"Actions are on", "Switch actions off"}},
	} {
		t.Run(tc.target, func(t *testing.T) {
			wantBody(t, r.do(req{target: tc.target, cookie: ops}), tc.status, tc.says...)
		})
	}
	if b := r.do(req{target: "/admin/actions", cookie: ops}).Body.String(); strings.Contains(b, " at  UTC") || strings.Contains(b, "at UTC") {
		t.Error("the switch, never thrown, is said to have been set at no time")
	}
	if !strings.Contains(r.do(req{target: "/admin/tokens", cookie: ops}).Body.String(), `<span class="badge you">you</span>`) {
		t.Error("the tokens page does not mark the signed-in token")
	}
}

// TestDecide: the console decides through the API, whose rules hold:
// the permission, four eyes, a call decided once.
func TestDecide(t *testing.T) {
	r := newRig(t)
	viewer := r.signIn(viewerToken)
	path := "/admin/approvals/" + r.approval
	wantBody(t, r.do(req{method: "POST", target: path + "/approve", form: url.Values{"csrf": {r.csrfOf(viewer)}}, cookie: viewer}),
		http.StatusForbidden, "needs a role holding permission approvals.decide")

	// alice's own admin token may not approve her call (four eyes).
	r.book.set(Account{Label: "alice-admin", Scope: dispatch.ScopeAdmin, TokenSHA256: tokenSHA256("alice-admin-token")})
	r.book.mu.Lock()
	r.book.roles["alice-admin"], r.book.users["alice-admin"] = "admin", "alice"
	r.book.mu.Unlock()
	alice := r.signIn("alice-admin-token")
	wantBody(t, r.do(req{method: "POST", target: path + "/approve", form: url.Values{"csrf": {r.csrfOf(alice)}}, cookie: alice}),
		http.StatusForbidden, "may not be decided by the user who made it")

	ops := r.signIn(adminToken)
	csrf := r.csrfOf(ops)
	wantBody(t, r.do(req{method: "POST", target: path + "/ignore", form: url.Values{"csrf": {csrf}}, cookie: ops}), http.StatusNotFound)
	rec := r.do(req{method: "POST", target: path + "/approve", form: url.Values{"csrf": {csrf}, "reason": {"  refund agreed "}}, cookie: ops})
	wantRedirect(t, rec, path+"?done=approved")
	a, err := r.store.Get(context.Background(), r.approval)
	if err != nil || a.Status != approvals.Approved || a.DecidedBy != "ops" || a.Reason != "refund agreed" {
		t.Fatalf("the held call after the console approved it: %+v %v", a, err)
	}
	wantBody(t, r.do(req{target: path + "?done=approved", cookie: ops}), http.StatusOK, "Approved. The call runs once", "by", "refund agreed")
	wantBody(t, r.do(req{method: "POST", target: path + "/reject", form: url.Values{"csrf": {csrf}}, cookie: ops}),
		http.StatusConflict, "already decided")
}

// TestAuditTail: the tail brings the records past its cursor, newest
// first, filtered as the page is, and says where to go on from.
func TestAuditTail(t *testing.T) {
	r := newRig(t)
	ops := r.signIn(adminToken)
	page := r.do(req{target: "/admin/audit", cookie: ops}).Body.String()
	const mark = `data-cursor="`
	i := strings.Index(page, mark)
	if i < 0 {
		t.Fatalf("no tail on the audit page:\n%s", page)
	}
	cursor := page[i+len(mark) : i+len(mark)+strings.IndexByte(page[i+len(mark):], '"')]

	empty := r.do(req{target: "/admin/audit/tail?after=" + cursor, cookie: ops})
	if empty.Code != 200 || strings.TrimSpace(empty.Body.String()) != "" || empty.Header().Get("X-Tail-Next") != cursor {
		t.Fatalf("a tail with nothing new: %d %q next %q", empty.Code, empty.Body, empty.Header().Get("X-Tail-Next"))
	}
	if err := r.trail.Append(context.Background(), []audit.Record{
		{Time: r.now, TokenLabel: "shop", UserID: "alice", Capability: "booking.cancel", Decision: audit.Refused, Step: "kill_switch", Reason: "off", Protocol: "mcp"},
		{Time: r.now, TokenLabel: "shop", UserID: "alice", Capability: "booking.list", Decision: audit.Admitted, Outcome: audit.OutcomeOK, Protocol: "mcp"},
	}); err != nil {
		t.Fatal(err)
	}
	rec := r.do(req{target: "/admin/audit/tail?decision=refused&after=" + cursor, cookie: ops})
	body := rec.Body.String()
	if rec.Code != 200 || strings.Count(body, "<tr") != 1 || !strings.Contains(body, `data-step="kill_switch"`) {
		t.Fatalf("the tail of refusals: %d\n%s", rec.Code, body)
	}
	all := r.do(req{target: "/admin/audit/tail?after=" + cursor, cookie: ops}).Body.String()
	if strings.Index(all, "booking.list") > strings.Index(all, "booking.cancel") {
		t.Fatalf("the tail is not newest first:\n%s", all)
	}
	if next := rec.Header().Get("X-Tail-Next"); next == cursor || next == "" {
		t.Fatalf("the cursor did not move: %q", next)
	}
	for target, status := range map[string]int{
		"/admin/audit/tail":                        http.StatusBadRequest,
		"/admin/audit/tail?after=-1":               http.StatusBadRequest,
		"/admin/audit/tail?after=0&decision=maybe": http.StatusBadRequest,
		"/admin/audit/tail?after=0&color=red":      http.StatusBadRequest,
	} {
		if rec := r.do(req{target: target, cookie: ops}); rec.Code != status {
			t.Errorf("%s: %d, want %d", target, rec.Code, status)
		}
	}
	if rec := r.do(req{target: "/admin/audit/tail?after=0"}); rec.Code != http.StatusUnauthorized {
		t.Errorf("a tail without a session: %d", rec.Code)
	}
}

func TestLabelAuthorization(t *testing.T) {
	if l, ok := LabelOf(LabelAuthorization("ops")); !ok || l != "ops" {
		t.Fatalf("round trip: %q %v", l, ok)
	}
	for _, v := range []string{"", "Label ", "Bearer ops", "label ops"} {
		if _, ok := LabelOf(v); ok {
			t.Errorf("LabelOf(%q) took it", v)
		}
	}
}

func TestWhen(t *testing.T) {
	c := &Console{now: func() time.Time { return time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC) }}
	for in, want := range map[string]string{
		"2030-01-01T00:00:00Z": "2030-01-01T00:00:00Z",
		"30m":                  "2030-01-07T08:30:00Z",
		"7d":                   "2029-12-31T09:00:00Z",
		"1d12h":                "2030-01-05T21:00:00Z",
	} {
		got, err := c.when(in)
		if err != nil || got.UTC().Format(time.RFC3339) != want {
			t.Errorf("when(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"soon", "-5m", "d", "xd", "99999d", "1d-2h"} {
		if _, err := c.when(in); err == nil {
			t.Errorf("when(%q) took it", in)
		}
	}
}
