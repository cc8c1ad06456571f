package server

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/throttle"
	"github.com/capgate/capgate/internal/dispatch"
)

// adminGuard throttles failed bearer tokens on the admin API: per client
// (Options.ClientIP) and across all clients, past which only clients
// that presented a good token within the last day are heard (see
// throttle). The MCP and REST endpoints are not throttled here: their
// callers are agents, held by the gate's own rate limits.
type adminGuard struct {
	failures *throttle.Failures
	now      func() time.Time
	// refused counts throttled requests since logged (unix nanoseconds),
	// when the last line saying so was written: a flood of guesses must
	// not become a flood of log lines.
	refused atomic.Int64
	logged  atomic.Int64
}

// Admin API failure budgets: a client, and all clients together, per
// minute. A person retyping a token stays far below either.
const (
	adminFailuresPerClient = 10
	adminFailuresGlobal    = 100
	throttledLogEvery      = 10 * time.Second
)

func newAdminGuard() *adminGuard {
	return &adminGuard{now: time.Now, failures: throttle.New(throttle.Limits{
		PerClient: adminFailuresPerClient, Global: adminFailuresGlobal, Window: time.Minute})}
}

// adminAuthenticated is authenticated for the admin API, with failed
// tokens counted. A throttled client gets 429 with Retry-After before its
// token is looked at, so the answer is the same whether the token exists
// or not, and a guesser learns nothing more until the window passes.
func (s *Server) adminAuthenticated(next principalHandler) echo.HandlerFunc {
	auth := s.authenticated
	return func(c echo.Context) error {
		if !s.opts.Enabled {
			return echo.ErrNotFound
		}
		r := c.Request()
		client, now := s.opts.ClientIP.Key(r), s.guard.now()
		if scope, left := s.guard.failures.Allow(client, now); scope != throttle.None {
			s.noteThrottled(c, client, scope)
			c.Response().Header().Set("Retry-After", strconv.Itoa(throttle.RetryAfter(left)))
			msg := "too many failed tokens from your address; retry later"
			if scope == throttle.All {
				msg = "too many failed tokens on this host lately; retry later"
			}
			return s.problem(c, http.StatusTooManyRequests, msg)
		}
		admitted := false
		err := auth(func(c echo.Context, p dispatch.Principal) error {
			admitted = true
			s.guard.failures.Succeed(client, now)
			return next(c, p)
		})(c)
		// A request with no token guesses nothing; one the host could not
		// check (the OAuth issuer unreachable) is not the caller's failure.
		res := c.Response()
		if !admitted && r.Header.Get(echo.HeaderAuthorization) != "" && !(res.Committed && res.Status >= 500) {
			s.guard.failures.Fail(client, now)
		}
		return err
	}
}

// noteThrottled counts and now and then logs throttled requests.
func (s *Server) noteThrottled(c echo.Context, client string, scope throttle.Scope) {
	n := s.guard.refused.Add(1)
	now := time.Now().UnixNano()
	if last := s.guard.logged.Load(); now-last >= int64(throttledLogEvery) && s.guard.logged.CompareAndSwap(last, now) {
		s.guard.refused.Add(-n)
		s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "admin: requests refused: too many failed tokens",
			slog.Int64("refused", n), slog.String("budget", string(scope)), slog.String("client", client),
			slog.String("remote", c.Request().RemoteAddr))
	}
}
