package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/internal/dispatch"
)

// AdminActionsPath is the kill switch of the admin API: GET reads it, PUT
// {"enabled": false} stops every action on every replica.
const AdminActionsPath = "/api/v1/admin/actions"

// maxAdminBody bounds an admin request's body: they are a few fields.
const maxAdminBody = 4 << 10

// ActionsState is the kill switch as the admin API reports it.
type ActionsState struct {
	// Enabled says whether actions are admitted: both switches are on.
	Enabled bool `json:"enabled"`
	// Config is actions_enabled in the configuration file.
	Config bool `json:"config_enabled"`
	// Switch is the switch shared through the database, which the admin
	// API and `capgate actions` set.
	Switch    bool      `json:"switch_enabled"`
	ChangedAt time.Time `json:"changed_at,omitzero"`
	ChangedBy string    `json:"changed_by,omitempty"`
}

// Admin is what the admin API changes. The host implements it.
type Admin interface {
	Actions() ActionsState
	// SetActions sets the shared switch; by names who did (a token label).
	SetActions(ctx context.Context, enabled bool, by string) (ActionsState, error)
}

// adminOnly answers a request to the admin API: the caller needs a token
// of admin scope. Any other token gets 403 with a reason, as problem
// details; no token, or an unknown one, gets the same 404 as the MCP
// endpoint.
func (s *Server) adminOnly(next func(echo.Context, dispatch.Principal) error) echo.HandlerFunc {
	return s.adminAuthenticated(func(c echo.Context, p dispatch.Principal) error {
		if s.opts.Admin == nil {
			return echo.ErrNotFound
		}
		if p.Scope != dispatch.ScopeAdmin {
			return s.scopeRefused(c, p)
		}
		return next(c, p)
	})
}

func (s *Server) getActions(c echo.Context, _ dispatch.Principal) error {
	return c.JSON(http.StatusOK, s.opts.Admin.Actions())
}

func (s *Server) putActions(c echo.Context, p dispatch.Principal) error {
	var body struct {
		Enabled *bool `json:"enabled"`
	}
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, maxAdminBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.Enabled == nil || dec.More() {
		msg := `want a JSON object {"enabled": true|false}`
		if err != nil && strings.Contains(err.Error(), "unknown field") {
			msg += "; " + err.Error()
		}
		return s.problem(c, http.StatusBadRequest, msg)
	}
	by := p.Token
	if by == "" {
		by = "admin api"
	}
	st, err := s.opts.Admin.SetActions(c.Request().Context(), *body.Enabled, by)
	if err != nil {
		s.log.LogAttrs(c.Request().Context(), slog.LevelError, "admin: setting the kill switch failed", slog.String("err", err.Error()))
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return s.problem(c, http.StatusServiceUnavailable, "the switch could not be saved in time; nothing changed")
		}
		return s.problem(c, http.StatusServiceUnavailable, "the switch could not be saved; nothing changed")
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "admin: kill switch set",
		slog.Bool("actions_enabled", *body.Enabled), slog.String("by", by))
	return c.JSON(http.StatusOK, st)
}
