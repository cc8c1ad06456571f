package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Plugin states as /healthz reports them.
const (
	PluginRunning    = "running"
	PluginRestarting = "restarting"
	PluginFailed     = "failed"
)

// PluginHealth is one plugin's state as the health routes see it.
type PluginHealth struct {
	Name string
	// State is PluginRunning, PluginRestarting, PluginFailed, or another
	// word for a plugin that does not serve ("stopped").
	State string
	// Since is when the plugin entered State.
	Since time.Time
	// Restarts counts the times the plugin was restarted.
	Restarts int
	// RetryAt is the next restart attempt, while restarting.
	RetryAt time.Time
}

// HealthFunc reports the state of every plugin. It is called on every
// probe, so it must be cheap: read state, never call a plugin.
type HealthFunc func() []PluginHealth

// pluginEntry is a plugin that does not serve, in a 503 body. The body is
// unauthenticated, so it says what state the plugin is in and since when,
// nothing more: how it died and why it stays down are in the host's log.
type pluginEntry struct {
	Name     string     `json:"name"`
	State    string     `json:"state"`
	Since    time.Time  `json:"since"`
	Restarts int        `json:"restarts"`
	RetryAt  *time.Time `json:"retry_at,omitempty"`
}

type healthBody struct {
	Status  string        `json:"status"`
	Plugins []pluginEntry `json:"plugins,omitempty"`
}

var healthOK = []byte(`{"status":"ok"}`)

// health answers GET /healthz, the readiness of the replica: 200
// {"status":"ok"} while every plugin runs; 503 naming the others while any
// does not: "restarting" while every one down is being restarted (their
// capabilities fail meanwhile, so a load balancer should send calls
// elsewhere for a moment), "unavailable" once any has failed for good.
func (s *Server) health(c echo.Context) error {
	return s.healthAnswer(c, func(p PluginHealth) bool { return p.State != PluginRunning })
}

// live answers GET /livez, the liveness of the replica: 503 only once a
// plugin has failed for good, which only a restart of capgate mends; a
// plugin being restarted is no reason to restart the replica.
func (s *Server) live(c echo.Context) error {
	return s.healthAnswer(c, func(p PluginHealth) bool { return p.State == PluginFailed })
}

func (s *Server) healthAnswer(c echo.Context, down func(PluginHealth) bool) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	if s.opts.Health == nil {
		return c.JSONBlob(http.StatusOK, healthOK)
	}
	body := healthBody{Status: "restarting"}
	for _, p := range s.opts.Health() {
		if !down(p) {
			continue
		}
		e := pluginEntry{Name: p.Name, State: p.State, Since: p.Since.UTC(), Restarts: p.Restarts}
		if p.State == PluginRestarting && !p.RetryAt.IsZero() {
			at := p.RetryAt.UTC()
			e.RetryAt = &at
		}
		if p.State != PluginRestarting {
			body.Status = "unavailable"
		}
		body.Plugins = append(body.Plugins, e)
	}
	if len(body.Plugins) == 0 {
		return c.JSONBlob(http.StatusOK, healthOK)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusServiceUnavailable, b)
}
