// Package metrics is the host's Prometheus metrics and its profiling
// endpoints, served on a listener of their own (metrics.listen), apart
// from the MCP endpoint: an operator opens that port to scrapers and
// profilers knowingly, never to agents.
//
// The gate tells Metrics of each decision (dispatch.Observer) and the MCP
// adapter of each request (mcp.Options.Observe); the rest (plugins, the
// audit writer, held calls) is read when Prometheus scrapes, from
// functions the host gives in Sources. Every label value is bounded:
// capabilities and tools are registered names, methods and protocol
// versions the adapter's own; a name a caller made up is counted as
// unknown.
//
// Names follow OpenTelemetry's MCP conventions where Prometheus allows:
// mcp.server.operation.duration becomes
// mcp_server_operation_duration_seconds, its attributes mcp.method.name,
// mcp.protocol.version, gen_ai.tool.name and error.type the labels
// mcp_method_name, mcp_protocol_version, gen_ai_tool_name and error_type.
// The host's own are capgate_*.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/capgate/capgate/host/internal/mcp"
	"github.com/capgate/capgate/internal/dispatch"
)

// Paths the metrics listener serves.
const (
	MetricsPath = "/metrics"
	PprofPath   = "/debug/pprof/"
)

// PluginStat is one plugin as a scrape sees it.
type PluginStat struct {
	Name     string
	Up       bool
	Restarts int
	InFlight int
}

// AuditStat is the audit writer as a scrape sees it.
type AuditStat struct {
	Queued                     int
	Written, Dropped, Failures int64
}

// Sources are what a scrape reads besides the counts Metrics keeps. A nil
// field reports nothing.
type Sources struct {
	Version string
	Plugins func() []PluginStat
	Audit   func() AuditStat
	// Approvals counts the held calls by status, across every replica
	// sharing the database; ctx bounds the query.
	Approvals func(ctx context.Context) (map[string]int, error)
}

// operationBuckets bound mcp_server_operation_duration_seconds: the
// conventions' advice, from 10 ms, with finer steps below it, where most
// of a gate's calls end.
var operationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// Metrics counts the host's work for Prometheus. It is safe for
// concurrent use.
type Metrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec
	rateLimited *prometheus.CounterVec
	operations  *prometheus.HistogramVec
	log         *slog.Logger
}

var _ dispatch.Observer = (*Metrics)(nil)

// New registers the host's metrics, the Go runtime's and the process's
// in a registry of their own.
func New(src Sources, log *slog.Logger) (*Metrics, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_calls_total",
			Help: "Calls through the gate, by capability (unknown for a name no plugin provides), decision (admitted or refused), refusing step and outcome of an admitted call.",
		}, []string{"capability", "decision", "step", "outcome"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capgate_rate_limit_refusals_total",
			Help: "Calls the gate refused at step rate_limit, by capability.",
		}, []string{"capability"}),
		operations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_operation_duration_seconds",
			Help:    "MCP requests from receipt to answer (OpenTelemetry mcp.server.operation.duration), by method, protocol version, tool and error type (a JSON-RPC error code, or tool_error).",
			Buckets: operationBuckets,
		}, []string{"mcp_method_name", "mcp_protocol_version", "gen_ai_tool_name", "error_type"}),
		log: log,
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "capgate_build_info", Help: "Always 1; the version label names the build."}, []string{"version"})
	build.WithLabelValues(src.Version).Set(1)
	cs := []prometheus.Collector{
		m.calls, m.rateLimited, m.operations, build,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&scraped{src: src, log: log},
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Observe implements dispatch.Observer.
func (m *Metrics) Observe(o dispatch.Observation) {
	capability := "unknown"
	if o.Entry != nil {
		capability = o.Entry.Name
	}
	decision := "admitted"
	if o.Step != "" {
		decision = "refused"
	}
	m.calls.WithLabelValues(capability, decision, string(o.Step), string(o.Outcome)).Inc()
	if o.Step == dispatch.StepRateLimit {
		m.rateLimited.WithLabelValues(capability).Inc()
	}
}

// Operation records one MCP request (mcp.Options.Observe).
func (m *Metrics) Operation(op mcp.Operation) {
	m.operations.WithLabelValues(op.Method, op.ProtocolVersion, op.Tool, op.ErrorType).Observe(op.Duration.Seconds())
}

// Handler serves the metrics and the profiles: /metrics and
// /debug/pprof/.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		// A scrape that fails in part still serves what it could gather.
		ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc(PprofPath, pprof.Index)
	mux.HandleFunc(PprofPath+"cmdline", pprof.Cmdline)
	mux.HandleFunc(PprofPath+"profile", pprof.Profile)
	mux.HandleFunc(PprofPath+"symbol", pprof.Symbol)
	mux.HandleFunc(PprofPath+"trace", pprof.Trace)
	return mux
}

// Serve serves Handler on ln until ctx ends, then shuts down within a
// few seconds: a profile in progress is cut off. It answers requests for
// an IP address, localhost, or one of hosts (metrics.allowed_hosts) and
// refuses any other Host (see HostGuard).
func (m *Metrics) Serve(ctx context.Context, ln net.Listener, hosts ...string) error {
	srv := &http.Server{
		Handler:           HostGuard(m.Handler(), m.log, hosts...),
		ReadHeaderTimeout: 10 * time.Second,
		// A CPU profile or trace runs for as long as it asks (up to a
		// minute is usual), so writes are not bounded here.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics listener: %w", err)
	}
	return nil
}

// scraped is what a scrape reads from Sources.
type scraped struct {
	src Sources
	log *slog.Logger
}

var (
	descPluginUp       = prometheus.NewDesc("capgate_plugin_up", "1 while a process serves the plugin's calls, 0 while it restarts or has failed.", []string{"plugin"}, nil)
	descPluginRestarts = prometheus.NewDesc("capgate_plugin_restarts_total", "Times the host restarted the plugin's process.", []string{"plugin"}, nil)
	descPluginInFlight = prometheus.NewDesc("capgate_plugin_calls_in_flight", "Calls the plugin is serving now.", []string{"plugin"}, nil)
	descAuditQueued    = prometheus.NewDesc("capgate_audit_queue_records", "Audit records waiting to be written.", nil, nil)
	descAuditWritten   = prometheus.NewDesc("capgate_audit_records_written_total", "Audit records the store has committed.", nil, nil)
	descAuditDropped   = prometheus.NewDesc("capgate_audit_records_dropped_total", "Audit records refused because the queue was full.", nil, nil)
	descAuditFailures  = prometheus.NewDesc("capgate_audit_write_failures_total", "Batches of audit records the store refused (each is retried).", nil, nil)
	descApprovals      = prometheus.NewDesc("capgate_approvals", "Calls held for a human, by status, in the database every replica shares.", []string{"status"}, nil)
	descApprovalsUp    = prometheus.NewDesc("capgate_approvals_scrape_success", "1 when the held calls could be counted at this scrape.", nil, nil)
)

// approvalStatuses are reported even at zero, so an alert on pending
// calls sees 0 rather than no series.
var approvalStatuses = []string{"pending", "approved", "running", "done", "rejected", "expired"}

func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPluginUp, descPluginRestarts, descPluginInFlight, descAuditQueued, descAuditWritten, descAuditDropped, descAuditFailures, descApprovals, descApprovalsUp} {
		ch <- d
	}
}

func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	if s.src.Plugins != nil {
		for _, p := range s.src.Plugins() {
			up := 0.0
			if p.Up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(descPluginUp, prometheus.GaugeValue, up, p.Name)
			ch <- prometheus.MustNewConstMetric(descPluginRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
			ch <- prometheus.MustNewConstMetric(descPluginInFlight, prometheus.GaugeValue, float64(p.InFlight), p.Name)
		}
	}
	if s.src.Audit != nil {
		a := s.src.Audit()
		ch <- prometheus.MustNewConstMetric(descAuditQueued, prometheus.GaugeValue, float64(a.Queued))
		ch <- prometheus.MustNewConstMetric(descAuditWritten, prometheus.CounterValue, float64(a.Written))
		ch <- prometheus.MustNewConstMetric(descAuditDropped, prometheus.CounterValue, float64(a.Dropped))
		ch <- prometheus.MustNewConstMetric(descAuditFailures, prometheus.CounterValue, float64(a.Failures))
	}
	if s.src.Approvals != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		counts, err := s.src.Approvals(ctx)
		if err != nil {
			// The rest of the scrape still counts; the failure says so.
			s.log.Warn("metrics: counting held calls failed", "err", err)
			ch <- prometheus.MustNewConstMetric(descApprovalsUp, prometheus.GaugeValue, 0)
			return
		}
		ch <- prometheus.MustNewConstMetric(descApprovalsUp, prometheus.GaugeValue, 1)
		for _, st := range approvalStatuses {
			ch <- prometheus.MustNewConstMetric(descApprovals, prometheus.GaugeValue, float64(counts[st]), st)
		}
	}
}
