package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/problem"
	"github.com/capgate/capgate/host/internal/rest"
	"github.com/capgate/capgate/internal/dispatch"
)

// The REST adapter's routes (package rest): the list of capabilities, a
// call to one, and the OpenAPI document.
const (
	RESTCapabilitiesPath = rest.CapabilitiesPath
	RESTOpenAPIPath      = rest.OpenAPIPath
)

// routeREST mounts the REST adapter. Its routes sit behind the same
// authentication as the MCP endpoint, so an outsider gets the same 404
// from them, whatever the method, and they count against the same
// http.max_in_flight.
func (s *Server) routeREST(e *echo.Echo) {
	opts := rest.Options{
		RequestTimeout: s.opts.RequestTimeout,
		MaxBodyBytes:   s.opts.MaxBodyBytes,
		AllowedOrigins: s.opts.AllowedOrigins,
		Version:        s.opts.Version,
		Logger:         s.opts.Logger,
	}
	if t := s.opts.Tracing; t != nil && t.Tracer != nil {
		opts.Tracer, opts.Invoke = t.Tracer, t.Invoke
	}
	h := rest.New(s.opts.Dispatcher, opts)
	routes := map[string]func(echo.Context, dispatch.Principal){
		RESTCapabilitiesPath: func(c echo.Context, p dispatch.Principal) { h.ServeList(c.Response(), c.Request(), p) },
		RESTOpenAPIPath:      func(c echo.Context, p dispatch.Principal) { h.ServeOpenAPI(c.Response(), c.Request(), p) },
		RESTCapabilitiesPath + "/:name": func(c echo.Context, p dispatch.Principal) {
			h.ServeCall(c.Response(), c.Request(), p, capabilityParam(c))
		},
	}
	for path, serve := range routes {
		endpoint := s.authenticated(func(c echo.Context, p dispatch.Principal) error {
			if n := s.active.Add(1); n > int64(s.opts.MaxInFlight) {
				s.active.Add(-1)
				s.noteBusy(c)
				problem.Write(c.Response(), problem.New(http.StatusServiceUnavailable, "server busy: "+
					strconv.Itoa(s.opts.MaxInFlight)+" requests in flight (http.max_in_flight); retry shortly"))
				return nil
			}
			defer s.active.Add(-1)
			serve(c, p)
			return nil
		})
		// As for the MCP endpoint: every method reaches the handler, so
		// an outsider learns nothing from the status.
		e.Any(path, endpoint)
		e.RouteNotFound(path, endpoint)
	}
}

// capabilityParam is the capability name of a call's path, unescaped. A
// name that does not unescape is passed on as sent, which no capability
// has.
func capabilityParam(c echo.Context) string {
	raw := c.Param("name")
	if name, err := url.PathUnescape(raw); err == nil {
		return name
	}
	return raw
}
