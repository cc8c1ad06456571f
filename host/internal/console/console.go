package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/capgate/capgate/host/internal/clientip"
	"github.com/capgate/capgate/host/internal/server"
	"github.com/capgate/capgate/host/internal/throttle"
	"github.com/capgate/capgate/internal/dispatch"
)

//go:embed templates/*.html static/*
var files embed.FS

// Account is a configured token as the console sees it: never its secret,
// only its SHA-256, which the host keeps anyway.
type Account struct {
	Label       string
	Scope       dispatch.Scope
	TokenSHA256 [32]byte
}

// Accounts finds the host's tokens as they stand now, reloads included.
type Accounts interface {
	// ByTokenSHA256 is the token whose secret hashes to sum.
	ByTokenSHA256(sum [32]byte) (Account, bool)
	// ByLabel is the token labelled label.
	ByLabel(label string) (Account, bool)
}

// Options configures a Console.
type Options struct {
	// API is the admin API, authenticating the Authorization values of
	// LabelAuthorization, served in process and never on the network.
	// Required.
	API http.Handler
	// Accounts finds tokens for sign-in and for every request after.
	// Required.
	Accounts Accounts
	// Key signs session cookies; every replica must have the same one.
	// At least MinKeyBytes. Required.
	Key []byte
	// SessionTTL is how long a session lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// Signouts records sign-outs where every replica reads them
	// (approvals.Store); nil keeps them in this process only.
	Signouts Signouts
	// ClientIP says which client a sign-in comes from, for counting its
	// failures; nil counts by the connection's peer.
	ClientIP *clientip.Resolver
	// Version is the host's, shown in the footer.
	Version string
	// Logger gets sign-ins, sign-outs and refusals; nil means
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now. Tests move it.
	Now func() time.Time
}

// Console serves the admin console under server.ConsolePath.
type Console struct {
	api      http.Handler
	accounts Accounts
	sess     *sessions
	version  string
	log      *slog.Logger
	now      func() time.Time
	pages    *pages
	static   *statics
	limiter  *throttle.Failures
	signouts Signouts
	clientIP *clientip.Resolver
	mux      *http.ServeMux
}

// New builds the console.
func New(opts Options) (*Console, error) {
	if opts.API == nil || opts.Accounts == nil {
		return nil, errors.New("console: Options.API and Options.Accounts are required")
	}
	sess, err := newSessions(opts.Key, opts.SessionTTL)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	st, err := loadStatics(files)
	if err != nil {
		return nil, err
	}
	pg, err := loadPages(files, st)
	if err != nil {
		return nil, err
	}
	if opts.Signouts == nil {
		opts.Signouts = newMemSignouts(opts.Now)
	}
	c := &Console{api: opts.API, accounts: opts.Accounts, sess: sess, version: opts.Version, log: opts.Logger,
		now: opts.Now, pages: pg, static: st, limiter: newSigninLimiter(sess.ttl), signouts: opts.Signouts, clientIP: opts.ClientIP}
	c.routes()
	return c, nil
}

const base = server.ConsolePath

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET "+base, func(w http.ResponseWriter, r *http.Request) { c.redirect(w, r, base+"/") })
	m.HandleFunc("GET "+base+"/static/{file}", c.serveStatic)
	m.HandleFunc("GET "+base+"/signin", c.signinPage)
	m.HandleFunc("POST "+base+"/signin", c.signin)
	m.HandleFunc("POST "+base+"/signout", c.signout)
	m.HandleFunc("GET "+base+"/{$}", c.page(c.overview))
	m.HandleFunc("GET "+base+"/capabilities", c.page(c.capabilities))
	m.HandleFunc("GET "+base+"/plugins", c.page(c.plugins))
	m.HandleFunc("GET "+base+"/tokens", c.page(c.tokens))
	m.HandleFunc("GET "+base+"/audit", c.page(c.audit))
	m.HandleFunc("GET "+base+"/audit/tail", c.auditTail)
	m.HandleFunc("GET "+base+"/approvals", c.page(c.approvals))
	m.HandleFunc("GET "+base+"/approvals/{id}", c.page(c.approval))
	m.HandleFunc("POST "+base+"/approvals/{id}/{verb}", c.form(c.decide))
	m.HandleFunc("GET "+base+"/actions", c.page(c.actions))
	m.HandleFunc("POST "+base+"/actions", c.form(c.setActions))
	m.HandleFunc(base+"/", c.notFound)
	c.mux = m
}

// ServeHTTP serves the console, every answer with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No script but the console's own file, no style but its own sheet,
	// no frame around it, no form posting elsewhere, no referrer leaving.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: both keep the console's URLs from
	// every other site, but under no-referrer the browser sends the
	// console's own forms with Origin: null, blinding the origin check.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, base+"/static/") {
		// Pages show live state and who is signed in: never from a cache.
		h.Set("Cache-Control", "no-store")
	}
	c.mux.ServeHTTP(w, r)
}

// session is the request's session, its token checked as it stands now:
// still configured, still of scope admin, still with the secret it was
// signed in with; and the session not signed out, on any replica.
func (c *Console) session(r *http.Request) (session, error) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return session{}, errNoSession
	}
	ss, err := c.sess.open(ck.Value, c.now())
	if err != nil {
		return session{}, err
	}
	acc, ok := c.accounts.ByLabel(ss.Label)
	if !ok || acc.Scope != dispatch.ScopeAdmin {
		return session{}, errTokenGone
	}
	if c.sess.fingerprint(acc.TokenSHA256) != ss.fingerprint {
		return session{}, errTokenRekeys
	}
	if err := c.checkSignedOut(r, ss); err != nil {
		return session{}, err
	}
	return ss, nil
}

// pageFunc renders one page for a signed-in session.
type pageFunc func(w http.ResponseWriter, r *http.Request, ss session)

// page serves a GET page to a session, sending anyone else to sign in
// and back.
func (c *Console) page(next pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, err := c.session(r)
		if err != nil {
			c.ended(w, r, err, r.URL.RequestURI())
			return
		}
		next(w, withSession(r, ss), ss)
	}
}

// sessionKey carries a request's session to render, so every page shows
// who is signed in without each handler passing it.
type sessionKey struct{}

func withSession(r *http.Request, ss session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, &ss))
}

// maxFormBytes bounds a form's body: the largest holds a reason of
// approvals.MaxReason bytes.
const maxFormBytes = 8 << 10

// form serves a POST that changes something: a session, a request from
// this console's own origin, and the session's form token, or nothing
// happens.
func (c *Console) form(next pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			c.refuseCrossSite(w, r)
			return
		}
		ss, err := c.session(r)
		if err != nil {
			c.ended(w, r, err, "")
			return
		}
		if !c.parseForm(w, r, ss) {
			return
		}
		if !ss.checkCSRF(r.PostForm.Get("csrf")) {
			c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: a form without this session's form token refused",
				slog.String("path", r.URL.Path), slog.String("token", ss.Label), slog.String("remote", r.RemoteAddr))
			c.render(w, r, http.StatusForbidden, "error", view{Session: &ss, Title: "Form refused",
				Error: "This form is not one this session showed (its form token is missing or another session's). Nothing changed; go back, reload the page and try again."})
			return
		}
		next(w, withSession(r, ss), ss)
	}
}

// parseForm reads a bounded form body; false when it answered already.
func (c *Console) parseForm(w http.ResponseWriter, r *http.Request, ss session) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		status, msg := http.StatusBadRequest, "The form could not be read: "+err.Error()
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			status, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is over %d KiB; nothing changed.", maxFormBytes>>10)
		}
		var sp *session
		if ss.Label != "" {
			sp = &ss
		}
		c.render(w, r, status, "error", view{Session: sp, Title: "Form refused", Error: msg})
		return false
	}
	return true
}

// ended answers a request without a session: pages go to sign-in (and
// come back to back), forms and the tail say so. A cookie that stopped
// being a session is cleared, and why is logged.
func (c *Console) ended(w http.ResponseWriter, r *http.Request, err error, back string) {
	if errors.Is(err, errSignoutsUnread) {
		// The session may well be good: keep the cookie, change nothing.
		w.Header().Set("Retry-After", "5")
		c.render(w, r, http.StatusServiceUnavailable, "error", view{Title: "Try again",
			Error: "Whether your session is still open cannot be checked now; nothing changed. Try again in a moment."})
		return
	}
	why := ""
	if !errors.Is(err, errNoSession) {
		c.clearCookie(w, r)
		switch {
		case errors.Is(err, errExpired):
			why = "expired"
		case errors.Is(err, errTokenGone), errors.Is(err, errTokenRekeys):
			why = "token"
		case errors.Is(err, errSignedOut):
			why = "out"
		default:
			why = "invalid"
		}
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: session ended", slog.String("why", err.Error()),
			slog.String("remote", r.RemoteAddr))
	}
	q := url.Values{}
	if why != "" {
		q.Set("why", why)
	}
	if back != "" && back != base+"/" && safeNext(back) {
		q.Set("next", back)
	}
	target := base + "/signin"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	if r.Method == http.MethodGet {
		c.redirect(w, r, target)
		return
	}
	c.render(w, r, http.StatusUnauthorized, "error", view{Title: "Signed out",
		Error: "You are not signed in (" + err.Error() + "); nothing changed. Sign in and try again.", Link: target})
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	var sp *session
	if ss, err := c.session(r); err == nil {
		sp = &ss
	}
	c.render(w, r, http.StatusNotFound, "error", view{Session: sp, Title: "Not found", Error: "The console has no page " + clip(r.URL.Path) + "."})
}

// redirect answers 303 See Other: after a form, the page to GET.
func (c *Console) redirect(w http.ResponseWriter, r *http.Request, target string) {
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// secure says whether the browser reached the console over TLS, here or
// at a proxy that says so: the cookie is then sent over TLS only.
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: base, MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request) { c.setCookie(w, r, "", -1) }

// sameOrigin says whether a state-changing request may be this console's
// own: a browser names the page's origin (Origin) or at least whether it
// is this site (Sec-Fetch-Site) on every POST, and neither may be
// another's. The origin's host must be the one the request was sent to;
// its scheme may differ behind a TLS-terminating proxy. A client that is
// no browser sends neither, and still needs the session's form token.
func sameOrigin(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	if o := r.Header.Get("Origin"); o == "null" {
		// An opaque origin (a sandboxed frame, a page under no-referrer):
		// only the browser's own word that it is this site will do.
		return site == "same-origin"
	} else if o != "" {
		u, err := url.Parse(o)
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && strings.EqualFold(u.Host, r.Host)
	}
	switch site {
	case "", "same-origin", "none":
		return true
	}
	return false
}

func (c *Console) refuseCrossSite(w http.ResponseWriter, r *http.Request) {
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: a cross-site form refused",
		slog.String("path", r.URL.Path), slog.String("origin", clip(r.Header.Get("Origin"))), slog.String("remote", r.RemoteAddr))
	c.render(w, r, http.StatusForbidden, "error", view{Title: "Form refused",
		Error: "This form was sent from another site than the console; nothing changed."})
}

// safeNext says whether a page to return to after sign-in is one of the
// console's own: a path under it, never another host.
func safeNext(next string) bool {
	if len(next) > 1024 || !strings.HasPrefix(next, base+"/") || strings.ContainsAny(next, "\\\r\n") {
		return false
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return false
	}
	// No dot segments: the redirect would resolve them out of the console.
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	return clean == u.Path && strings.HasPrefix(clean, base+"/")
}

// clip bounds caller input quoted back in a page or a log line.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	n := most
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// tokenSHA256 is the digest the host keeps of a token.
func tokenSHA256(token string) [32]byte { return sha256.Sum256([]byte(token)) }
