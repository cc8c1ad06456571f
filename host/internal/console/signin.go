package console

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/throttle"
	"github.com/capgate/capgate/internal/dispatch"
)

// Sign-in failures are counted per client (Options.ClientIP) and across
// all clients (see throttle): tokens are far too long to guess, and the
// bounds keep a guesser, rotating addresses or not, from filling the log.
// A client that signed in within a session's lifetime is spared the
// global bound, so a flood does not lock out operators at work.
func newSigninLimiter(sessionTTL time.Duration) *throttle.Failures {
	return throttle.New(throttle.Limits{PerClient: 10, Global: 100, Window: time.Minute, TrustFor: sessionTTL})
}

// signinRefused is the one answer to every token that does not open the
// console, whichever the reason: a sign-in page tells no one whether a
// token exists.
const signinRefused = "That token does not open the console. It must be a token configured on this host, of scope admin."

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
	addr, now := c.clientIP.Key(r), c.now()
	if scope, left := c.limiter.Allow(addr, now); scope != throttle.None {
		msg := "Too many failed sign-ins from your address; wait a minute and try again."
		if scope == throttle.All {
			msg = "Too many failed sign-ins on this host lately: sign-in waits for everyone who has not signed in here lately. Wait a minute and try again."
		}
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: sign-in refused: too many failures", slog.String("budget", string(scope)),
			slog.String("client", addr), slog.String("remote", r.RemoteAddr))
		w.Header().Set("Retry-After", strconv.Itoa(throttle.RetryAfter(left)))
		c.render(w, r, http.StatusTooManyRequests, "signin", view{Title: "Sign in", Data: signinView{Next: next, Refused: msg}})
		return
	}
	token := r.PostForm.Get("token")
	acc, why := c.account(token)
	if why != "" {
		c.limiter.Fail(addr, now)
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: sign-in refused", slog.String("why", why),
			slog.String("client", addr), slog.String("remote", r.RemoteAddr))
		c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in", Data: signinView{Next: next, Refused: signinRefused}})
		return
	}
	c.limiter.Succeed(addr, now)
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

// signout ends the session: recorded as signed out for every replica
// until it would have expired, then its cookie cleared in this browser.
// A form from another site may not sign anyone out either.
func (c *Console) signout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.refuseCrossSite(w, r)
		return
	}
	ss, err := c.session(r)
	if errors.Is(err, errSignoutsUnread) {
		c.ended(w, r, err, "")
		return
	}
	if err == nil {
		if !c.parseForm(w, r, ss) {
			return
		}
		if !ss.checkCSRF(r.PostForm.Get("csrf")) {
			c.render(w, r, http.StatusForbidden, "error", view{Session: &ss, Title: "Form refused",
				Error: "This sign-out form is not one this session showed; you are still signed in. Use the Sign out button."})
			return
		}
		if err := c.signouts.EndSession(r.Context(), ss.id(), ss.Expires); err != nil {
			c.log.LogAttrs(r.Context(), slog.LevelError, "console: recording a sign-out failed", slog.String("token", ss.Label), slog.String("err", err.Error()))
			c.render(w, r, http.StatusServiceUnavailable, "error", view{Session: &ss, Title: "Not signed out",
				Error: "The sign-out could not be recorded, so this session would still open the console; you are still signed in. Try again in a moment."})
			return
		}
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: signed out", slog.String("token", ss.Label), slog.String("remote", r.RemoteAddr))
	}
	c.clearCookie(w, r)
	c.redirect(w, r, base+"/signin?why=out")
}
