package console

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/dispatch"
)

// Sign-in failures are counted per client address: signinFailures within
// signinWindow, then refused until the window passes. Tokens are far too
// long to guess; the bound keeps a guesser from filling the log.
const (
	signinFailures = 10
	signinWindow   = time.Minute
	// signinAddrs bounds the addresses counted at once; past it the
	// oldest counts are dropped, so a flood of addresses costs bounded
	// memory.
	signinAddrs = 4096
)

// signinRefused is the one answer to every token that does not open the
// console, whichever the reason: a sign-in page tells no one whether a
// token exists.
const signinRefused = "That token does not open the console. It must be a token configured on this host, of scope admin."

type failures struct {
	n     int
	since time.Time
}

// signinLimiter counts sign-in failures per client address.
type signinLimiter struct {
	mu   sync.Mutex
	by   map[string]*failures
	keys []string // in the order first counted, to drop the oldest
}

func newSigninLimiter() *signinLimiter { return &signinLimiter{by: map[string]*failures{}} }

// allowed says whether addr may try to sign in at now.
func (l *signinLimiter) allowed(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.by[addr]
	return f == nil || f.n < signinFailures || now.Sub(f.since) >= signinWindow
}

// failed counts a failure of addr at now.
func (l *signinLimiter) failed(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.by[addr]
	if f == nil {
		if len(l.keys) >= signinAddrs {
			delete(l.by, l.keys[0])
			l.keys = l.keys[1:]
		}
		f = &failures{since: now}
		l.by[addr] = f
		l.keys = append(l.keys, addr)
	}
	if now.Sub(f.since) >= signinWindow {
		f.n, f.since = 0, now
	}
	f.n++
}

// succeeded forgets addr's failures.
func (l *signinLimiter) succeeded(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.by[addr]; !ok {
		return
	}
	delete(l.by, addr)
	for i, k := range l.keys {
		if k == addr {
			l.keys = append(l.keys[:i], l.keys[i+1:]...)
			break
		}
	}
}

// signinView is the sign-in page's data.
type signinView struct {
	Next    string
	Notice  string
	Refused string
}

var endedNotice = map[string]string{
	"expired": "Your session has expired; sign in again.",
	"token":   "Your session ended: its token was removed, given a new secret or another scope.",
	"invalid": "Your session cookie was not valid here; sign in again.",
	"out":     "You are signed out.",
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	if _, err := c.session(r); err == nil {
		c.redirect(w, r, base+"/")
		return
	}
	next := r.URL.Query().Get("next")
	if !safeNext(next) {
		next = ""
	}
	c.render(w, r, http.StatusOK, "signin", view{Title: "Sign in", Data: signinView{Next: next, Notice: endedNotice[r.URL.Query().Get("why")]}})
}

// signin checks a token typed into the form: configured and of scope
// admin, or the one refusal. The token is read from the POST body only,
// hashed at once and never logged; the session holds its label.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.refuseCrossSite(w, r)
		return
	}
	if !c.parseForm(w, r, session{}) {
		return
	}
	next := r.PostForm.Get("next")
	if !safeNext(next) {
		next = base + "/"
	}
	addr, now := remoteIP(r), c.now()
	if !c.limiter.allowed(addr, now) {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: sign-in refused: too many failures from this address", slog.String("remote", r.RemoteAddr))
		w.Header().Set("Retry-After", "60")
		c.render(w, r, http.StatusTooManyRequests, "signin", view{Title: "Sign in",
			Data: signinView{Next: next, Refused: "Too many failed sign-ins from your address; wait a minute and try again."}})
		return
	}
	token := r.PostForm.Get("token")
	acc, why := c.account(token)
	if why != "" {
		c.limiter.failed(addr, now)
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: sign-in refused", slog.String("why", why), slog.String("remote", r.RemoteAddr))
		c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in", Data: signinView{Next: next, Refused: signinRefused}})
		return
	}
	c.limiter.succeeded(addr)
	ss, value := c.sess.issue(acc.Label, acc.TokenSHA256, now)
	c.setCookie(w, r, value, int(ss.Expires.Sub(now)/time.Second))
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed in", slog.String("token", acc.Label),
		slog.Time("expires", ss.Expires), slog.String("remote", r.RemoteAddr))
	c.redirect(w, r, next)
}

// account is the admin account token opens, or why it opens none, for the
// log: the page says the same thing whatever the reason.
func (c *Console) account(token string) (Account, string) {
	if token == "" {
		return Account{}, "no token typed"
	}
	if err := config.CheckToken(token); err != nil {
		return Account{}, "not a well-formed token: " + err.Error()
	}
	acc, ok := c.accounts.ByTokenSHA256(tokenSHA256(token))
	if !ok {
		return Account{}, "no configured token"
	}
	if acc.Scope != dispatch.ScopeAdmin {
		return Account{}, "token " + acc.Label + " is of scope " + string(acc.Scope) + ", not admin"
	}
	return acc, ""
}

// signout ends the session in this browser. A form from another site may
// not sign anyone out either.
func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.refuseCrossSite(w, r)
		return
	}
	ss, err := c.session(r)
	if err == nil {
		if !c.parseForm(w, r, ss) {
			return
		}
		if !ss.checkCSRF(r.PostForm.Get("csrf")) {
			c.render(w, r, http.StatusForbidden, "error", view{Session: &ss, Title: "Form refused",
				Error: "This sign-out form is not one this session showed; you are still signed in. Use the Sign out button."})
			return
		}
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed out", slog.String("token", ss.Label), slog.String("remote", r.RemoteAddr))
	}
	c.clearCookie(w, r)
	c.redirect(w, r, base+"/signin?why=out")
}
