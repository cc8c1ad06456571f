package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/capgate/capgate/internal/dispatch"
)

// Admin API paths that describe the host, each answering GET to
// admin-scope tokens: its capabilities and which roles may call them
// (query pack and role filter them), its packs, its plugins and its
// tokens (never their secrets).
const (
	AdminCapabilitiesPath = "/api/v1/admin/capabilities"
	AdminPacksPath        = "/api/v1/admin/packs"
	AdminPluginsPath      = "/api/v1/admin/plugins"
	AdminTokensPath       = "/api/v1/admin/tokens"
)

// Inventory is what the admin API reports of the host. The host
// implements it; each method reads state kept in memory and calls no
// plugin, and each list comes in a stable order.
type Inventory interface {
	// Capabilities lists every registered capability, in name order,
	// under one policy.
	Capabilities() CapabilityList
	// Packs lists every pack a plugin registers or the configuration
	// names, in name order.
	Packs() []PackInfo
	// Plugins lists the configured plugins in start order.
	Plugins() []PluginInfo
	// Tokens lists the configured tokens in configuration order.
	Tokens() []TokenInfo
}

// CapabilityList is every capability, with the packs and roles known
// under the same policy, against which the filters are checked.
type CapabilityList struct {
	Capabilities []CapabilityInfo
	Packs        []string
	Roles        []string
}

// CapabilityInfo is one capability as the admin API reports it.
type CapabilityInfo struct {
	Name        string `json:"name"`
	Pack        string `json:"pack"`
	PackEnabled bool   `json:"pack_enabled"`
	// Kind is "read" or "action".
	Kind string `json:"kind"`
	// Risk is the level the policy gives the capability now.
	Risk string `json:"risk"`
	// Permission is what a role must hold; empty when none is needed.
	Permission   string `json:"permission"`
	Plugin       string `json:"plugin"`
	OwnerGuarded bool   `json:"owner_guarded"`
	// Roles are the configured roles that may call it, in name order: a
	// principal of the role, bound to a user and with the least scope the
	// kind allows (read for a read, action for an action), passes every
	// step of the gate that does not depend on the arguments
	// (dispatch.Dispatcher.Check) under the policy in force.
	Roles []string `json:"roles"`
}

// PackInfo is one pack as the admin API reports it.
type PackInfo struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	// Capabilities counts the registered capabilities in the pack.
	Capabilities int `json:"capabilities"`
}

// PluginInfo is one plugin as the admin API reports it.
type PluginInfo struct {
	Name string `json:"name"`
	// State is running, restarting, failed or stopped.
	State string    `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// PID is the serving process's id; 0 while none runs.
	PID      int `json:"pid"`
	Restarts int `json:"restarts"`
	// Version is what the plugin said it is when it started.
	Version string `json:"version"`
	// SHA256 is the digest the configuration pins the binary to, checked
	// at every start; empty when it pins none.
	SHA256       string `json:"sha256"`
	InFlight     int    `json:"in_flight"`
	MaxInFlight  int    `json:"max_in_flight"`
	Capabilities int    `json:"capabilities"`
	// DiedAt and DiedReason describe the last death, when there was one.
	DiedAt     time.Time `json:"died_at,omitzero"`
	DiedReason string    `json:"died_reason,omitempty"`
	// Detail says why a failed plugin stays down.
	Detail string `json:"detail,omitempty"`
}

// TokenInfo is one token as the admin API reports it: never the token or
// its hash.
type TokenInfo struct {
	Label  string `json:"label"`
	Role   string `json:"role"`
	Scope  string `json:"scope"`
	UserID string `json:"user_id"`
}

// maxFilterBytes bounds a filter value: pack and role names are short.
const maxFilterBytes = 128

// routeInventory adds the routes describing the host.
func (s *Server) routeInventory(e *echo.Echo) {
	present := s.opts.Inventory != nil
	e.GET(AdminCapabilitiesPath, s.inventoryRoute(present, s.getCapabilities))
	e.GET(AdminPacksPath, s.inventoryRoute(present, func(c echo.Context, _ dispatch.Principal) error {
		return s.listOf(c, "packs", func() any { return s.opts.Inventory.Packs() })
	}))
	e.GET(AdminPluginsPath, s.inventoryRoute(present, func(c echo.Context, _ dispatch.Principal) error {
		return s.listOf(c, "plugins", func() any { return s.opts.Inventory.Plugins() })
	}))
	e.GET(AdminTokensPath, s.inventoryRoute(present, func(c echo.Context, _ dispatch.Principal) error {
		return s.listOf(c, "tokens", func() any { return s.opts.Inventory.Tokens() })
	}))
}

// inventoryRoute serves a route as the rest of the admin API: without an
// inventory, or without a known token, the answer is the MCP endpoint's
// 404; a token not of admin scope gets 403.
func (s *Server) inventoryRoute(present bool, next principalHandler) echo.HandlerFunc {
	inner := s.adminAuthenticated(func(c echo.Context, p dispatch.Principal) error {
		if p.Scope != dispatch.ScopeAdmin {
			return s.scopeRefused(c, p)
		}
		return next(c, p)
	})
	return func(c echo.Context) error {
		if !present {
			return echo.ErrNotFound
		}
		return inner(c)
	}
}

// listOf answers {"<name>": list()} to a request without parameters.
func (s *Server) listOf(c echo.Context, name string, list func() any) error {
	if q := c.QueryParams(); len(q) > 0 {
		var items []ProblemItem
		for _, k := range slices.Sorted(maps.Keys(q)) {
			items = append(items, ProblemItem{Parameter: clipParam(k), Detail: fmt.Sprintf("unknown parameter %q; this route takes none", clipParam(k))})
		}
		return s.badRequest(c, items)
	}
	return c.JSON(http.StatusOK, map[string]any{name: list()})
}

func (s *Server) getCapabilities(c echo.Context, _ dispatch.Principal) error {
	q := c.QueryParams()
	var items []ProblemItem
	bad := func(param, format string, args ...any) {
		items = append(items, ProblemItem{Parameter: param, Detail: fmt.Sprintf(format, args...)})
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case k != "pack" && k != "role":
			bad(clipParam(k), "unknown parameter %q; known: pack, role", clipParam(k))
		case len(q[k]) > 1:
			bad(k, "parameter %s is given %d times; give it once", k, len(q[k]))
		case q[k][0] == "":
			bad(k, "parameter %s is empty; name a %s or leave it out", k, k)
		case len(q[k][0]) > maxFilterBytes:
			bad(k, "parameter %s is %d bytes; no %s name is over %d", k, len(q[k][0]), k, maxFilterBytes)
		}
	}
	if len(items) > 0 {
		return s.badRequest(c, items)
	}
	list := s.opts.Inventory.Capabilities()
	pack, role := q.Get("pack"), q.Get("role")
	if pack != "" && !slices.Contains(list.Packs, pack) {
		bad("pack", "pack %q is not known here; known: %s", clipParam(pack), names(list.Packs))
	}
	if role != "" && !slices.Contains(list.Roles, role) {
		bad("role", "role %q is not configured; configured: %s", clipParam(role), names(list.Roles))
	}
	if len(items) > 0 {
		return s.badRequest(c, items)
	}
	out := make([]CapabilityInfo, 0, len(list.Capabilities))
	for _, ci := range list.Capabilities {
		if (pack == "" || ci.Pack == pack) && (role == "" || slices.Contains(ci.Roles, role)) {
			if ci.Roles == nil {
				ci.Roles = []string{}
			}
			out = append(out, ci)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"capabilities": out})
}

// maxProblemItems bounds the problems one answer lists: a request can
// carry thousands of parameters.
const maxProblemItems = 10

// badRequest answers 400 listing items, its detail the one problem or all
// of them.
func (s *Server) badRequest(c echo.Context, items []ProblemItem) error {
	total, more := len(items), ""
	if total > maxProblemItems {
		more = fmt.Sprintf("; and %d more", total-maxProblemItems)
		items = items[:maxProblemItems]
	}
	if total == 1 {
		return s.problem(c, http.StatusBadRequest, items[0].Detail, items...)
	}
	details := make([]string, len(items))
	for i, it := range items {
		details[i] = it.Detail
	}
	return s.problem(c, http.StatusBadRequest, strconv.Itoa(total)+" problems: "+strings.Join(details, "; ")+more, items...)
}

// names lists known names in an error, bounded: a host may configure many
// roles.
func names(all []string) string {
	const most = 20
	if len(all) == 0 {
		return "none"
	}
	if len(all) > most {
		return strings.Join(all[:most], ", ") + fmt.Sprintf(", and %d more", len(all)-most)
	}
	return strings.Join(all, ", ")
}
