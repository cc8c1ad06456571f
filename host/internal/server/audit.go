package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/dispatch"
)

// AdminAuditPath reads the audit trail: GET with the filters of
// audit.Filter as query parameters, a page of records newest first.
const AdminAuditPath = "/api/v1/admin/audit"

// AuditReader reads the audit trail; audit.Store is one.
type AuditReader interface {
	Query(ctx context.Context, f audit.Filter) (audit.Page, error)
}

// AuditRecord is an audit record as the admin API and `capgate audit
// -json` write it. The names are part of the interface: every field is
// always present, empty when the record has no value for it.
type AuditRecord struct {
	// Seq is the trail's cursor (the after parameter).
	Seq      int64  `json:"seq"`
	ID       string `json:"id"`
	ParentID string `json:"parent_id"`
	// Time is RFC 3339 in UTC, to the microsecond.
	Time            time.Time `json:"time"`
	RequestID       string    `json:"request_id"`
	Protocol        string    `json:"protocol"`
	ProtocolVersion string    `json:"protocol_version"`
	TokenLabel      string    `json:"token_label"`
	Role            string    `json:"role"`
	Scope           string    `json:"scope"`
	UserID          string    `json:"user_id"`
	Capability      string    `json:"capability"`
	Plugin          string    `json:"plugin"`
	// Args are the call's arguments as recorded, sensitive fields
	// redacted; null when the call had none.
	Args json.RawMessage `json:"args"`
	// Decision is "admitted" or "refused"; Step and Reason say why a
	// refused call was.
	Decision string `json:"decision"`
	Step     string `json:"step"`
	Reason   string `json:"reason"`
	// Outcome is "ok", "tool_error" or "internal_error" for an admitted
	// call, with ErrorCode or ErrorRef; empty for a refused one.
	Outcome   string `json:"outcome"`
	ErrorCode string `json:"error_code"`
	ErrorRef  string `json:"error_ref"`
	LatencyNS int64  `json:"latency_ns"`
	// ApprovalID links the records of a call held for a human: the held
	// call, the decisions on it and its run.
	ApprovalID string `json:"approval_id,omitempty"`
}

// NewAuditRecord is r as the admin API writes it.
func NewAuditRecord(r audit.Record) AuditRecord {
	args := r.Args
	switch {
	case len(args) == 0:
		args = nil
	case !json.Valid(args):
		// The store keeps valid JSON; a damaged row must not make the
		// whole page unwritable.
		args = json.RawMessage(`{"$audit":"unreadable","bytes":` + strconv.Itoa(len(args)) + `}`)
	}
	return AuditRecord{
		Seq: r.Seq, ID: r.ID, ParentID: r.ParentID, Time: r.Time.UTC(),
		RequestID: r.RequestID, Protocol: r.Protocol, ProtocolVersion: r.ProtocolVersion,
		TokenLabel: r.TokenLabel, Role: r.Role, Scope: r.Scope, UserID: r.UserID,
		Capability: r.Capability, Plugin: r.Plugin, Args: args,
		Decision: string(r.Decision), Step: r.Step, Reason: r.Reason,
		Outcome: string(r.Outcome), ErrorCode: r.ErrorCode, ErrorRef: r.ErrorRef,
		LatencyNS: int64(r.Latency), ApprovalID: r.ApprovalID,
	}
}

// AuditPage is the admin API's answer: Next is the cursor of the next
// page (the after parameter) and More says whether it holds anything.
type AuditPage struct {
	Records []AuditRecord `json:"records"`
	Next    int64         `json:"next"`
	More    bool          `json:"more"`
}

// auditOnly serves the audit route as adminOnly serves the admin API —
// 404 without a known token, 403 for a token not of admin scope — but
// depends on Options.Audit, not Options.Admin: without an audit store the
// route answers exactly as an absent one.
func (s *Server) auditOnly(next func(echo.Context, dispatch.Principal) error) echo.HandlerFunc {
	inner := s.adminAuthenticated(func(c echo.Context, p dispatch.Principal) error {
		if p.Scope != dispatch.ScopeAdmin {
			return s.scopeRefused(c, p)
		}
		return next(c, p)
	})
	return func(c echo.Context) error {
		if s.opts.Audit == nil {
			return echo.ErrNotFound
		}
		return inner(c)
	}
}

// auditParams are the query parameters getAudit takes.
var auditParams = map[string]bool{
	"since": true, "until": true, "token": true, "user": true, "capability": true,
	"decision": true, "step": true, "request": true, "approval": true, "after": true, "order": true, "limit": true,
}

func (s *Server) getAudit(c echo.Context, p dispatch.Principal) error {
	f, err := auditFilter(c.QueryParams())
	if err != nil {
		return s.problem(c, http.StatusBadRequest, err.Error())
	}
	ctx := c.Request().Context()
	page, err := s.opts.Audit.Query(ctx, f)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "admin: reading the audit trail failed",
			slog.String("token", p.Token), slog.String("err", err.Error()))
		return s.problem(c, http.StatusServiceUnavailable, "the audit trail cannot be read now; try again later")
	}
	out := AuditPage{Records: make([]AuditRecord, len(page.Records)), Next: page.Next, More: page.More}
	for i, r := range page.Records {
		out.Records[i] = NewAuditRecord(r)
	}
	return c.JSON(http.StatusOK, out)
}

// auditFilter reads the query parameters into a filter. Every error names
// its parameter; unknown and repeated parameters are errors too, so a
// misspelt filter never widens the answer to the whole trail.
func auditFilter(q map[string][]string) (audit.Filter, error) {
	var f audit.Filter
	for _, name := range slices.Sorted(maps.Keys(q)) {
		vs := q[name]
		if !auditParams[name] {
			return f, fmt.Errorf("unknown parameter %q; known: since, until, token, user, capability, decision, step, request, after, order, limit", clipParam(name))
		}
		if len(vs) > 1 {
			return f, fmt.Errorf("parameter %s is given %d times; give it once", name, len(vs))
		}
	}
	get := func(name string) string {
		if vs := q[name]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	var err error
	if f.Since, err = auditTime("since", get("since")); err != nil {
		return f, err
	}
	if f.Until, err = auditTime("until", get("until")); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
		return f, fmt.Errorf("parameter until must be after since")
	}
	for _, v := range []struct {
		name string
		dst  *string
		max  int
	}{
		{"token", &f.TokenLabel, audit.MaxLabelLen},
		{"user", &f.UserID, audit.MaxNameLen},
		{"capability", &f.Capability, audit.MaxNameLen},
		{"step", &f.Step, audit.MaxProtocolLen},
		{"approval", &f.ApprovalID, audit.MaxIDLen},
		{"request", &f.RequestID, audit.MaxRequestIDLen},
	} {
		s := get(v.name)
		if len(s) > v.max {
			return f, fmt.Errorf("parameter %s is %d bytes; no record holds more than %d", v.name, len(s), v.max)
		}
		*v.dst = s
	}
	switch d := get("decision"); d {
	case "", string(audit.Admitted), string(audit.Refused):
		f.Decision = audit.Decision(d)
	default:
		return f, fmt.Errorf("parameter decision %q is not admitted or refused", clipParam(d))
	}
	switch o := get("order"); o {
	case "", string(audit.NewestFirst), string(audit.OldestFirst):
		f.Order = audit.Order(o)
	default:
		return f, fmt.Errorf("parameter order %q is not newest or oldest", clipParam(o))
	}
	if a := get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return f, fmt.Errorf("parameter after %q is not a cursor (the next of a previous page)", clipParam(a))
		}
		f.After = n
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return f, fmt.Errorf("parameter limit %q is not a number from 1 to %d", clipParam(l), audit.MaxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

// auditTime parses an RFC 3339 time parameter; empty is no bound.
func auditTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("parameter %s %q is not an RFC 3339 time such as 2030-01-07T09:00:00Z", name, clipParam(v))
	}
	return t, nil
}

// clipParam bounds caller input quoted back in an error.
func clipParam(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
