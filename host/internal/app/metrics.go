package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/capgate/capgate/host/internal/approvals"
	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/host/internal/metrics"
	"github.com/capgate/capgate/host/internal/pluginhost"
)

// openMetrics builds the host's metrics and takes metrics.listen, so that
// a port already taken stops start-up with that setting's name rather
// than failing later; nil, nil when metrics are off.
func openMetrics(cfg *config.Config, version string, plugins *pluginhost.Host, aud *auditor, appr *approvals.Store, log *slog.Logger) (*metrics.Metrics, net.Listener, error) {
	if cfg.Metrics.Listen == "" {
		return nil, nil, nil
	}
	src := metrics.Sources{
		Version: version,
		Plugins: func() []metrics.PluginStat {
			ps := plugins.Plugins()
			out := make([]metrics.PluginStat, len(ps))
			for i, p := range ps {
				h := p.Health()
				out[i] = metrics.PluginStat{Name: p.Name(), Up: h.Alive(), Restarts: h.Restarts, InFlight: p.InFlight()}
			}
			return out
		},
		Approvals: appr.CountByStatus,
	}
	if cfg.Audit.Enabled {
		src.Audit = func() metrics.AuditStat {
			st := aud.w.Stats()
			return metrics.AuditStat{Queued: st.Queued, Written: st.Written, Dropped: st.Dropped, Failures: st.Failures}
		}
	}
	m, err := metrics.New(src, log)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics.listen: %w", err)
	}
	return m, ln, nil
}

// serveMetrics serves the metrics listener until ctx ends; a listener
// that fails is logged, and the MCP endpoint carries on.
func (a *App) serveMetrics(ctx context.Context) {
	if a.metrics == nil {
		return
	}
	a.log.Info("metrics and profiles serving", "metrics", "http://"+a.metricsLn.Addr().String()+metrics.MetricsPath,
		"pprof", "http://"+a.metricsLn.Addr().String()+metrics.PprofPath)
	if err := a.metrics.Serve(ctx, a.metricsLn); err != nil {
		a.log.Error("metrics listener stopped", "err", err)
	}
}

// MetricsAddr is where metrics.listen serves; nil when metrics are off.
func (a *App) MetricsAddr() net.Addr {
	if a.metricsLn == nil {
		return nil
	}
	return a.metricsLn.Addr()
}
