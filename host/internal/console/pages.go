package console

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/capgate/capgate/host/internal/approvalspack"
	"github.com/capgate/capgate/host/internal/server"
)

// Admin API routes the console calls.
const (
	apiActions      = server.AdminActionsPath
	apiAudit        = server.AdminAuditPath
	apiApprovals    = server.AdminApprovalsPath
	apiCapabilities = server.AdminCapabilitiesPath
	apiPacks        = server.AdminPacksPath
	apiPlugins      = server.AdminPluginsPath
	apiTokens       = server.AdminTokensPath
)

// failed renders the API's refusal as the page's error, with its status:
// the console adds no rule of its own, so it shows the API's words.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, ss session, v view, name string, err error) {
	v.Session = &ss
	status := http.StatusInternalServerError
	var ae *apiError
	if errors.As(err, &ae) {
		status, v.Problem, v.Error = ae.Status, ae, ae.Error()
	} else {
		c.log.LogAttrs(r.Context(), slog.LevelError, "console: a page failed", slog.String("path", r.URL.Path), slog.String("err", err.Error()))
		v.Error = "The page could not be made; the cause is in the host's log."
	}
	c.render(w, r, status, name, v)
}

// unknownParams lists the parameters of q a page does not take, as an
// error naming them, so a mistyped filter never silently shows everything.
func unknownParams(q url.Values, known ...string) error {
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, k) {
			bad = append(bad, strconv.Quote(clip(k)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &apiError{Status: http.StatusBadRequest, Problem: server.NewProblem(http.StatusBadRequest,
		fmt.Sprintf("unknown parameter %s; this page takes %s", strings.Join(bad, ", "), strings.Join(known, ", ")))}
}

func badRequest(format string, args ...any) error {
	return &apiError{Status: http.StatusBadRequest, Problem: server.NewProblem(http.StatusBadRequest, fmt.Sprintf(format, args...))}
}

// --- overview

type overviewView struct {
	Actions      *server.ActionsState
	Pending      int
	PendingMore  bool
	Plugins      []server.PluginInfo
	PluginsUp    int
	Capabilities int
	Packs        []server.PackInfo
	Tokens       int
	Problems     []string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, ss session) {
	var ov overviewView
	note := func(what string, err error) {
		ov.Problems = append(ov.Problems, what+": "+err.Error())
	}
	var act server.ActionsState
	if err := c.call(r, ss, http.MethodGet, apiActions, nil, nil, &act); err != nil {
		note("kill switch", err)
	} else {
		ov.Actions = &act
	}
	var ap struct {
		Approvals []approvalspack.Approval `json:"approvals"`
	}
	if err := c.call(r, ss, http.MethodGet, apiApprovals, url.Values{"status": {"pending"}, "limit": {"500"}}, nil, &ap); err != nil {
		note("held calls", err)
	} else {
		ov.Pending, ov.PendingMore = len(ap.Approvals), len(ap.Approvals) == 500
	}
	var pl struct {
		Plugins []server.PluginInfo `json:"plugins"`
	}
	if err := c.call(r, ss, http.MethodGet, apiPlugins, nil, nil, &pl); err != nil {
		note("plugins", err)
	} else {
		ov.Plugins = pl.Plugins
		for _, p := range pl.Plugins {
			if p.State == "running" {
				ov.PluginsUp++
			}
		}
	}
	var caps struct {
		Capabilities []server.CapabilityInfo `json:"capabilities"`
	}
	if err := c.call(r, ss, http.MethodGet, apiCapabilities, nil, nil, &caps); err != nil {
		note("capabilities", err)
	} else {
		ov.Capabilities = len(caps.Capabilities)
	}
	var packs struct {
		Packs []server.PackInfo `json:"packs"`
	}
	if err := c.call(r, ss, http.MethodGet, apiPacks, nil, nil, &packs); err != nil {
		note("packs", err)
	} else {
		ov.Packs = packs.Packs
	}
	var toks struct {
		Tokens []server.TokenInfo `json:"tokens"`
	}
	if err := c.call(r, ss, http.MethodGet, apiTokens, nil, nil, &toks); err != nil {
		note("tokens", err)
	} else {
		ov.Tokens = len(toks.Tokens)
	}
	c.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Session: &ss, Data: ov})
}

// --- capabilities

type capabilitiesView struct {
	Pack, Role, Query string
	Packs             []server.PackInfo
	Roles             []string
	Capabilities      []server.CapabilityInfo
	// Total is how many the pack and role filters left, before the name
	// search.
	Total int
}

// maxQuery bounds the name search: capability names are short.
const maxQuery = 128

func (c *Console) capabilities(w http.ResponseWriter, r *http.Request, ss session) {
	q := r.URL.Query()
	cv := capabilitiesView{Pack: q.Get("pack"), Role: q.Get("role"), Query: strings.TrimSpace(q.Get("q"))}
	v := view{Title: "Capabilities", Nav: "capabilities", Data: &cv}
	if err := unknownParams(q, "pack", "role", "q"); err != nil {
		c.failed(w, r, ss, v, "capabilities", err)
		return
	}
	if len(cv.Query) > maxQuery {
		c.failed(w, r, ss, v, "capabilities", badRequest("the search is %d bytes; no capability name is over %d", len(cv.Query), maxQuery))
		return
	}
	var packs struct {
		Packs []server.PackInfo `json:"packs"`
	}
	var toks struct {
		Tokens []server.TokenInfo `json:"tokens"`
	}
	if err := c.call(r, ss, http.MethodGet, apiPacks, nil, nil, &packs); err != nil {
		c.failed(w, r, ss, v, "capabilities", err)
		return
	}
	if err := c.call(r, ss, http.MethodGet, apiTokens, nil, nil, &toks); err != nil {
		c.failed(w, r, ss, v, "capabilities", err)
		return
	}
	cv.Packs = packs.Packs
	roles := map[string]bool{}
	for _, t := range toks.Tokens {
		roles[t.Role] = true
	}
	api := url.Values{}
	if cv.Pack != "" {
		api.Set("pack", cv.Pack)
	}
	if cv.Role != "" {
		api.Set("role", cv.Role)
	}
	var caps struct {
		Capabilities []server.CapabilityInfo `json:"capabilities"`
	}
	err := c.call(r, ss, http.MethodGet, apiCapabilities, api, nil, &caps)
	for _, ci := range caps.Capabilities {
		for _, role := range ci.Roles {
			roles[role] = true
		}
	}
	if cv.Role != "" && err == nil {
		roles[cv.Role] = true
	}
	cv.Roles = slices.Sorted(maps.Keys(roles))
	if err != nil {
		c.failed(w, r, ss, v, "capabilities", err)
		return
	}
	cv.Total = len(caps.Capabilities)
	needle := strings.ToLower(cv.Query)
	for _, ci := range caps.Capabilities {
		if needle == "" || strings.Contains(strings.ToLower(ci.Name), needle) {
			cv.Capabilities = append(cv.Capabilities, ci)
		}
	}
	c.render(w, r, http.StatusOK, "capabilities", v)
}

// --- plugins and tokens

func (c *Console) plugins(w http.ResponseWriter, r *http.Request, ss session) {
	v := view{Title: "Plugins", Nav: "plugins"}
	if err := unknownParams(r.URL.Query()); err != nil {
		c.failed(w, r, ss, v, "plugins", err)
		return
	}
	var pl struct {
		Plugins []server.PluginInfo `json:"plugins"`
	}
	if err := c.call(r, ss, http.MethodGet, apiPlugins, nil, nil, &pl); err != nil {
		c.failed(w, r, ss, v, "plugins", err)
		return
	}
	v.Data = pl.Plugins
	c.render(w, r, http.StatusOK, "plugins", v)
}

func (c *Console) tokens(w http.ResponseWriter, r *http.Request, ss session) {
	v := view{Title: "Tokens", Nav: "tokens"}
	if err := unknownParams(r.URL.Query()); err != nil {
		c.failed(w, r, ss, v, "tokens", err)
		return
	}
	var toks struct {
		Tokens []server.TokenInfo `json:"tokens"`
	}
	if err := c.call(r, ss, http.MethodGet, apiTokens, nil, nil, &toks); err != nil {
		c.failed(w, r, ss, v, "tokens", err)
		return
	}
	v.Data = toks.Tokens
	c.render(w, r, http.StatusOK, "tokens", v)
}

// --- audit trail

// auditFields are the audit page's filters, passed on to the API as
// they are, but for since and until, which also take a time ago.
var auditFields = []string{"capability", "token", "user", "decision", "step", "approval", "request", "since", "until"}

// auditLimits are the page sizes offered; the API takes any up to its
// maximum.
var auditLimits = []int{25, 50, 100, 200}

const defaultAuditLimit = 50

type auditView struct {
	Filter  map[string]string
	Limit   int
	Limits  []int
	After   string
	Records []server.AuditRecord
	Next    int64
	More    bool
	// Cursor is where the live tail starts: the newest record shown.
	Cursor int64
	// Query is the filters as a query string, for the paging links and
	// the tail.
	Query string
}

// auditQuery turns the page's parameters into the API's, keeping the
// filters for the form. A time ago (30m, 2h, 7d) becomes the RFC 3339
// time it names, so the form takes what capgate audit -since takes.
func (c *Console) auditQuery(q url.Values, extra ...string) (url.Values, map[string]string, error) {
	if err := unknownParams(q, append(append([]string{}, auditFields...), extra...)...); err != nil {
		return nil, nil, err
	}
	api, filter := url.Values{}, map[string]string{}
	for _, k := range auditFields {
		vs := q[k]
		if len(vs) > 1 {
			return nil, nil, badRequest("parameter %s is given %d times; give it once", k, len(vs))
		}
		if len(vs) == 0 || strings.TrimSpace(vs[0]) == "" {
			continue
		}
		val := strings.TrimSpace(vs[0])
		filter[k] = val
		if k == "since" || k == "until" {
			t, err := c.when(val)
			if err != nil {
				return nil, nil, badRequest("%s %q: %v", k, clip(val), err)
			}
			val = t.UTC().Format(time.RFC3339Nano)
		}
		api.Set(k, val)
	}
	return api, filter, nil
}

// maxAgo bounds a time ago: the trail keeps far less.
const maxAgo = 10 * 365 * 24 * time.Hour

// when reads an RFC 3339 time or a time ago: a Go duration, or whole days
// with d (7d, 1d12h).
func (c *Console) when(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var days int
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return time.Time{}, errors.New("not an RFC 3339 time (2030-01-07T09:00:00Z) nor a time ago (30m, 2h, 7d)")
		}
		days, rest = n, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return time.Time{}, errors.New("not an RFC 3339 time (2030-01-07T09:00:00Z) nor a time ago (30m, 2h, 7d)")
		}
	}
	if days > int(maxAgo/(24*time.Hour)) || d > maxAgo {
		return time.Time{}, errors.New("a time ago of over ten years")
	}
	return c.now().Add(-(time.Duration(days)*24*time.Hour + d)), nil
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, ss session) {
	q := r.URL.Query()
	av := auditView{Limit: defaultAuditLimit, Limits: auditLimits, Filter: map[string]string{}}
	v := view{Title: "Audit trail", Nav: "audit", Data: &av}
	api, filter, err := c.auditQuery(q, "limit", "after")
	if err != nil {
		c.failed(w, r, ss, v, "audit", err)
		return
	}
	av.Filter, av.Query = filter, encodeFilter(filter)
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 1000 {
			c.failed(w, r, ss, v, "audit", badRequest("limit %q is not a number from 1 to 1000", clip(l)))
			return
		}
		av.Limit = n
	}
	api.Set("limit", strconv.Itoa(av.Limit))
	if a := q.Get("after"); a != "" {
		av.After = a
		api.Set("after", a)
	}
	var page server.AuditPage
	if err := c.call(r, ss, http.MethodGet, apiAudit, api, nil, &page); err != nil {
		c.failed(w, r, ss, v, "audit", err)
		return
	}
	av.Records, av.Next, av.More = page.Records, page.Next, page.More
	if len(page.Records) > 0 {
		av.Cursor = page.Records[0].Seq
	}
	c.render(w, r, http.StatusOK, "audit", v)
}

func encodeFilter(f map[string]string) string {
	q := url.Values{}
	for k, v := range f {
		q.Set(k, v)
	}
	return q.Encode()
}

// tailBatch bounds the records one poll of the tail brings.
const tailBatch = 100

// auditTail answers the live tail's poll: the rows of the records past
// the cursor, newest first, and the new cursor in X-Tail-Next.
func (c *Console) auditTail(w http.ResponseWriter, r *http.Request) {
	ss, err := c.session(r)
	if err != nil {
		if !errors.Is(err, errNoSession) {
			c.clearCookie(w, r)
		}
		http.Error(w, "signed out: "+err.Error(), http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	api, _, err := c.auditQuery(q, "after")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	after, err := strconv.ParseInt(q.Get("after"), 10, 64)
	if err != nil || after < 0 {
		http.Error(w, "parameter after must be the cursor the page gave", http.StatusBadRequest)
		return
	}
	api.Set("after", strconv.FormatInt(after, 10))
	api.Set("order", "oldest")
	api.Set("limit", strconv.Itoa(tailBatch))
	var page server.AuditPage
	if err := c.call(r, ss, http.MethodGet, apiAudit, api, nil, &page); err != nil {
		status := http.StatusBadGateway
		var ae *apiError
		if errors.As(err, &ae) {
			status = ae.Status
		}
		http.Error(w, err.Error(), status)
		return
	}
	next := after
	for _, rec := range page.Records {
		next = max(next, rec.Seq)
	}
	slices.Reverse(page.Records)
	w.Header().Set("X-Tail-Next", strconv.FormatInt(next, 10))
	c.fragment(w, r, "audit", "audit-rows", page.Records)
}

// --- held calls

// approvalStatuses are the states the list filters by; "any" is all.
var approvalStatuses = []string{"pending", "approved", "running", "done", "rejected", "expired", "any"}

type approvalsView struct {
	Status, User string
	Statuses     []string
	Approvals    []approvalspack.Approval
}

const approvalsPage = 200

func (c *Console) approvals(w http.ResponseWriter, r *http.Request, ss session) {
	q := r.URL.Query()
	av := approvalsView{Status: q.Get("status"), User: strings.TrimSpace(q.Get("user")), Statuses: approvalStatuses}
	v := view{Title: "Approvals", Nav: "approvals", Data: &av}
	if err := unknownParams(q, "status", "user"); err != nil {
		c.failed(w, r, ss, v, "approvals", err)
		return
	}
	if av.Status == "" {
		av.Status = "pending"
	}
	api := url.Values{"limit": {strconv.Itoa(approvalsPage)}}
	if av.Status != "any" {
		api.Set("status", av.Status)
	}
	if av.User != "" {
		api.Set("user", av.User)
	}
	var list struct {
		Approvals []approvalspack.Approval `json:"approvals"`
	}
	if err := c.call(r, ss, http.MethodGet, apiApprovals, api, nil, &list); err != nil {
		c.failed(w, r, ss, v, "approvals", err)
		return
	}
	av.Approvals = list.Approvals
	c.render(w, r, http.StatusOK, "approvals", v)
}

// decided says what a form did, from the fixed words of a code, so no
// caller's text reaches the page through the URL.
var decided = map[string]string{
	"approved": "Approved. The call runs once, within a second, as the token that asked for it; its outcome appears below.",
	"rejected": "Rejected. The call will not run.",
	"off":      "Actions are off on every replica: every action is refused at the kill switch; reads go on.",
	"on":       "Actions are on again.",
}

type approvalView struct {
	Approval approvalspack.Approval
	// Trail is the audit page of this call's records.
	Trail string
}

func (c *Console) approval(w http.ResponseWriter, r *http.Request, ss session) {
	id := r.PathValue("id")
	v := view{Title: "Held call", Nav: "approvals"}
	if err := unknownParams(r.URL.Query(), "done"); err != nil {
		c.failed(w, r, ss, v, "approval", err)
		return
	}
	var a approvalspack.Approval
	if err := c.call(r, ss, http.MethodGet, apiApprovals+"/"+url.PathEscape(id), nil, nil, &a); err != nil {
		c.failed(w, r, ss, v, "approval", err)
		return
	}
	v.Flash = decided[r.URL.Query().Get("done")]
	v.Data = approvalView{Approval: a, Trail: base + "/audit?" + url.Values{"approval": {a.ApprovalID}}.Encode()}
	c.render(w, r, http.StatusOK, "approval", v)
}

// decide approves or rejects a held call through the API, which checks
// the permission, four eyes and the call's state, and records the
// decision with this session's token.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, ss session) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	if verb != "approve" && verb != "reject" {
		c.notFound(w, r)
		return
	}
	var body any
	if reason := strings.TrimSpace(r.PostForm.Get("reason")); reason != "" {
		body = map[string]string{"reason": reason}
	}
	path := apiApprovals + "/" + url.PathEscape(id)
	var a approvalspack.Approval
	if err := c.call(r, ss, http.MethodPost, path+"/"+verb, nil, body, &a); err != nil {
		v := view{Title: "Held call", Nav: "approvals"}
		var cur approvalspack.Approval
		if c.call(r, ss, http.MethodGet, path, nil, nil, &cur) == nil {
			v.Data = approvalView{Approval: cur, Trail: base + "/audit?" + url.Values{"approval": {cur.ApprovalID}}.Encode()}
		}
		c.failed(w, r, ss, v, "approval", err)
		return
	}
	done := "approved"
	if verb == "reject" {
		done = "rejected"
	}
	c.redirect(w, r, base+"/approvals/"+url.PathEscape(a.ApprovalID)+"?done="+done)
}

// --- kill switch

type actionsView struct {
	State server.ActionsState
	// Confirm is the change awaiting confirmation: "on" or "off".
	Confirm string
}

func (c *Console) actions(w http.ResponseWriter, r *http.Request, ss session) {
	v := view{Title: "Kill switch", Nav: "actions"}
	if err := unknownParams(r.URL.Query(), "done"); err != nil {
		c.failed(w, r, ss, v, "actions", err)
		return
	}
	var st server.ActionsState
	if err := c.call(r, ss, http.MethodGet, apiActions, nil, nil, &st); err != nil {
		c.failed(w, r, ss, v, "actions", err)
		return
	}
	v.Flash = decided[r.URL.Query().Get("done")]
	v.Data = actionsView{State: st}
	c.render(w, r, http.StatusOK, "actions", v)
}

// setActions throws the kill switch in two steps: the first form asks,
// the second, sent from the confirmation, does it through the API.
func (c *Console) setActions(w http.ResponseWriter, r *http.Request, ss session) {
	v := view{Title: "Kill switch", Nav: "actions"}
	var enabled bool
	switch r.PostForm.Get("enabled") {
	case "true":
		enabled = true
	case "false":
	default:
		c.failed(w, r, ss, v, "actions", badRequest("enabled must be true or false, not %q", clip(r.PostForm.Get("enabled"))))
		return
	}
	want := "off"
	if enabled {
		want = "on"
	}
	if r.PostForm.Get("confirm") != "yes" {
		var st server.ActionsState
		if err := c.call(r, ss, http.MethodGet, apiActions, nil, nil, &st); err != nil {
			c.failed(w, r, ss, v, "actions", err)
			return
		}
		v.Data = actionsView{State: st, Confirm: want}
		c.render(w, r, http.StatusOK, "actions", v)
		return
	}
	var st server.ActionsState
	if err := c.call(r, ss, http.MethodPut, apiActions, nil, map[string]bool{"enabled": enabled}, &st); err != nil {
		c.failed(w, r, ss, v, "actions", err)
		return
	}
	c.redirect(w, r, base+"/actions?done="+want)
}
