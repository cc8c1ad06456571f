package server

import "github.com/labstack/echo/v4"

// ConsolePath is where the admin console is served: its pages, its
// sign-in and its static files all live under it.
const ConsolePath = "/admin"

// routeConsole mounts the admin console when one is given and the host is
// enabled. Unlike the admin API the console shows itself to anyone (it
// must show its sign-in page), so a host switched off (enabled: false)
// does not serve it at all.
func (s *Server) routeConsole(e *echo.Echo) {
	if s.opts.Console == nil || !s.opts.Enabled {
		return
	}
	h := echo.WrapHandler(s.opts.Console)
	e.Any(ConsolePath, h)
	e.Any(ConsolePath+"/*", h)
}
