package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// PluginHealth is one plugin's liveness as GET /healthz sees it.
type PluginHealth struct {
	Name   string
	Alive  bool
	DiedAt time.Time
}

// HealthFunc reports the liveness of every plugin. It is called on every
// probe, so it must be cheap: read state, never call a plugin.
type HealthFunc func() []PluginHealth

// deadPlugin is a dead plugin in the 503 body. The body is unauthenticated,
// so it names the plugin and when it died, nothing more: the pid and exit
// status are in the host's log.
type deadPlugin struct {
	Name   string    `json:"name"`
	Alive  bool      `json:"alive"`
	DiedAt time.Time `json:"died_at"`
}

type healthBody struct {
	Status  string       `json:"status"`
	Plugins []deadPlugin `json:"plugins,omitempty"`
}

var healthOK = []byte(`{"status":"ok"}`)

// health answers 200 {"status":"ok"} while every plugin lives, and 503
// naming the dead ones once any has died: go-plugin does not restart a
// plugin, so the replica cannot serve its capabilities until it restarts,
// and a load balancer or a probe should take it out.
func (s *Server) health(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	if s.opts.Health == nil {
		return c.JSONBlob(http.StatusOK, healthOK)
	}
	var dead []deadPlugin
	for _, p := range s.opts.Health() {
		if !p.Alive {
			dead = append(dead, deadPlugin{Name: p.Name, DiedAt: p.DiedAt.UTC()})
		}
	}
	if len(dead) == 0 {
		return c.JSONBlob(http.StatusOK, healthOK)
	}
	body, err := json.Marshal(healthBody{Status: "unavailable", Plugins: dead})
	if err != nil {
		return err
	}
	return c.JSONBlob(http.StatusServiceUnavailable, body)
}
