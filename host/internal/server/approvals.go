package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/internal/dispatch"
)

// Admin API paths of the calls held for a human: GET lists them (query
// status, user, limit), GET .../{id} shows one, POST .../{id}/approve and
// .../{id}/reject decide one, with an optional body {"reason": "..."}.
const (
	AdminApprovalsPath = "/api/v1/admin/approvals"
	adminApprovalPath  = AdminApprovalsPath + "/:id"
)

// PermissionDecide is what a role must hold to approve or reject a call.
const PermissionDecide = "approvals.decide"

// Approvals is the store of held calls the admin API reads and decides.
// The host implements it: a decision also wakes its runner.
type Approvals interface {
	List(ctx context.Context, f approvals.Filter) ([]approvals.Approval, error)
	Get(ctx context.Context, id string) (approvals.Approval, error)
	Decide(ctx context.Context, id string, d approvals.Decision) (approvals.Approval, error)
}

// approvalsOnly answers a request about held calls: admin scope, and to
// decide, a role holding PermissionDecide. Without a store, or without a
// known token, the answer is the MCP endpoint's 404.
func (s *Server) approvalsOnly(decide bool, next func(echo.Context, dispatch.Principal) error) echo.HandlerFunc {
	inner := s.adminAuthenticated(func(c echo.Context, p dispatch.Principal) error {
		if p.Scope != dispatch.ScopeAdmin {
			return s.scopeRefused(c, p)
		}
		if decide && !s.opts.Dispatcher.Holds(p, PermissionDecide) {
			return s.problem(c, http.StatusForbidden, "deciding a held call needs a role holding permission "+PermissionDecide)
		}
		return next(c, p)
	})
	return func(c echo.Context) error {
		if s.opts.Approvals == nil {
			return echo.ErrNotFound
		}
		return inner(c)
	}
}

func (s *Server) listApprovals(c echo.Context, _ dispatch.Principal) error {
	q := c.QueryParams()
	for k := range q {
		if k != "status" && k != "user" && k != "limit" {
			return s.problem(c, http.StatusBadRequest, "unknown query parameter "+strconv.Quote(clipParam(k))+"; known: status, user, limit")
		}
	}
	f := approvals.Filter{Status: approvals.Status(q.Get("status")), UserID: q.Get("user")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return s.problem(c, http.StatusBadRequest, "limit must be a whole number")
		}
		f.Limit = n
	}
	list, err := s.opts.Approvals.List(c.Request().Context(), f)
	if err != nil {
		return s.approvalError(c, err)
	}
	out := struct {
		Approvals []approvalspack.Approval `json:"approvals"`
	}{Approvals: make([]approvalspack.Approval, 0, len(list))}
	for _, a := range list {
		out.Approvals = append(out.Approvals, approvalspack.View(a))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getApproval(c echo.Context, _ dispatch.Principal) error {
	a, err := s.opts.Approvals.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return s.approvalError(c, err)
	}
	return c.JSON(http.StatusOK, approvalspack.View(a))
}

func (s *Server) decideApproval(c echo.Context, p dispatch.Principal) error {
	var body struct {
		Reason string `json:"reason"`
	}
	raw, err := io.ReadAll(io.LimitReader(c.Request().Body, maxAdminBody+1))
	if err != nil || len(raw) > maxAdminBody {
		return s.problem(c, http.StatusBadRequest, "want an empty body or a JSON object {\"reason\": \"...\"} of at most 4 KiB")
	}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil || dec.More() {
			return s.problem(c, http.StatusBadRequest, "want an empty body or a JSON object {\"reason\": \"...\"}")
		}
	}
	approve := c.Param("verb") == "approve"
	a, err := s.opts.Approvals.Decide(c.Request().Context(), c.Param("id"),
		approvals.Decision{Approve: approve, By: p.Token, ByUser: p.UserID, Reason: body.Reason})
	if err != nil {
		return s.approvalError(c, err)
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelWarn, "admin: held call decided",
		slog.String("approval_id", a.ID), slog.String("status", string(a.Status)), slog.String("by", p.Token))
	return c.JSON(http.StatusOK, approvalspack.View(a))
}

// approvalError answers a store error with the status its kind calls for.
func (s *Server) approvalError(c echo.Context, err error) error {
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, approvals.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, approvals.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, approvals.ErrSelfApproval), errors.Is(err, approvals.ErrUnboundDecider):
		status = http.StatusForbidden
	case errors.Is(err, approvals.ErrDecided):
		status = http.StatusConflict
	default:
		s.log.LogAttrs(c.Request().Context(), slog.LevelError, "admin: approvals store failed", slog.String("err", err.Error()))
		return s.problem(c, status, "the approvals store could not be reached; nothing changed")
	}
	return s.problem(c, status, err.Error())
}
