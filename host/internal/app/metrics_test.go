package app_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/capgate/capgate/host/internal/app"
	"github.com/capgate/capgate/host/internal/config"
)

// scrape reads the metrics at addr as Prometheus would.
func scrape(t *testing.T, addr string) map[string]*struct {
	series []map[string]string
	values []float64
} {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	out := map[string]*struct {
		series []map[string]string
		values []float64
	}{}
	for name, f := range families {
		e := &struct {
			series []map[string]string
			values []float64
		}{}
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			v := 0.0
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			}
			e.series, e.values = append(e.series, labels), append(e.values, v)
		}
		out[name] = e
	}
	return out
}

// sample is the value of the series of family name whose labels include
// want, or -1 when there is none.
func sample(fams map[string]*struct {
	series []map[string]string
	values []float64
}, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for i, labels := range f.series {
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		return f.values[i]
	}
	return -1
}

// TestMetrics: with metrics.listen set, every decision and request is
// counted with bounded labels, the plugins, the audit writer and the held
// calls are read at the scrape, and the profiles answer on the same port.
func TestMetrics(t *testing.T) {
	dir := t.TempDir()
	cfg := approvalsConfig(t, dir, "")
	cfg.Metrics = config.Metrics{Listen: "127.0.0.1:0"}
	a, addr, _ := serveApp(t, cfg, nil)
	maddr := a.MetricsAddr().String()

	mine := aliceBooking(t, addr, "govern-token-1")
	if out, msg := mcpTool(t, addr, "govern-token-1", "booking.cancel", mine); msg != "" || out["status"] != "pending_approval" {
		t.Fatalf("held call: %v %q", out, msg)
	}
	for range 3 {
		if _, msg := mcpTool(t, addr, "govern-token-1", "booking.list", map[string]any{}); msg != "" {
			t.Fatal(msg)
		}
	}
	// A tool error, a refusal at permission, an unknown tool.
	mcpTool(t, addr, "govern-token-1", "booking.get", map[string]any{"id": "bk_nope"})
	mcpTool(t, addr, "govern-token-1", "booking.add_resource", map[string]any{"id": "x"})
	mcpTool(t, addr, "govern-token-1", "no.such-tool-"+strings.Repeat("x", 40), map[string]any{})

	fams := scrape(t, maddr)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"capgate_calls_total", map[string]string{"capability": "booking.list", "decision": "admitted", "step": "", "outcome": "ok"}, 3 + 1},
		{"capgate_calls_total", map[string]string{"capability": "booking.cancel", "outcome": "held"}, 1},
		{"capgate_calls_total", map[string]string{"capability": "booking.get", "outcome": "tool_error"}, 1},
		{"capgate_calls_total", map[string]string{"capability": "booking.add_resource", "decision": "refused", "step": "permission"}, 1},
		{"capgate_calls_total", map[string]string{"capability": "unknown", "decision": "refused", "step": "unknown_capability"}, 1},
		{"mcp_server_operation_duration_seconds", map[string]string{"mcp_method_name": "tools/call", "gen_ai_tool_name": "booking.list", "error_type": "", "mcp_protocol_version": "2025-11-25"}, 3 + 1},
		{"mcp_server_operation_duration_seconds", map[string]string{"gen_ai_tool_name": "booking.get", "error_type": "tool_error"}, 1},
		{"mcp_server_operation_duration_seconds", map[string]string{"gen_ai_tool_name": "booking.add_resource", "error_type": "-32003"}, 1},
		{"mcp_server_operation_duration_seconds", map[string]string{"gen_ai_tool_name": "", "error_type": "-32602"}, 1},
		{"capgate_plugin_up", map[string]string{"plugin": "booking"}, 1},
		{"capgate_plugin_restarts_total", map[string]string{"plugin": "booking"}, 0},
		{"capgate_plugin_calls_in_flight", map[string]string{"plugin": "booking"}, 0},
		{"capgate_approvals", map[string]string{"status": "pending"}, 1},
		{"capgate_approvals", map[string]string{"status": "done"}, 0},
		{"capgate_approvals_scrape_success", nil, 1},
		{"capgate_audit_records_dropped_total", nil, 0},
	} {
		if got := sample(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v; want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"capgate_audit_queue_records", "capgate_audit_records_written_total", "go_goroutines", "process_resident_memory_bytes", "capgate_build_info"} {
		if fams[name] == nil {
			t.Errorf("%s missing from the scrape", name)
		}
	}
	// A name the caller made up never becomes a label.
	for name, f := range fams {
		for _, labels := range f.series {
			for k, v := range labels {
				if strings.Contains(v, "no.such-tool") {
					t.Errorf("%s{%s=%q}: a caller's name became a label value", name, k, v)
				}
			}
		}
	}
	resp, err := http.Get("http://" + maddr + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("pprof index: %d", resp.StatusCode)
	}
	// The MCP listener serves neither.
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		r, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the MCP listener: %d; want 404", path, r.StatusCode)
		}
	}
}

// TestMetricsPortTaken: a metrics.listen already in use stops start-up
// naming the setting.
func TestMetricsPortTaken(t *testing.T) {
	dir := t.TempDir()
	first := approvalsConfig(t, filepath.Join(dir, "a"), "")
	first.Metrics = config.Metrics{Listen: "127.0.0.1:0"}
	a, _, _ := serveApp(t, first, nil)
	second := approvalsConfig(t, filepath.Join(dir, "b"), "")
	second.Metrics = config.Metrics{Listen: a.MetricsAddr().String()}
	b, err := app.New(context.Background(), second, quiet())
	if err == nil {
		b.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Fatalf("a second host on %s: %v; want an error naming metrics.listen", a.MetricsAddr(), err)
	}
}
