package config

import (
	"slices"
	"strings"
	"testing"
)

// TestTrustedProxies: the proxies and their header are read together,
// the header from the environment too, and either alone, a proxy
// trusting everyone or a header that is no name, is a problem.
func TestTrustedProxies(t *testing.T) {
	cfg := mustParse(t, "http:\n  trusted_proxies: [10.0.0.0/8, 192.0.2.7, 10.1.0.0/16]\n  trusted_proxy_header: x-forwarded-for\n", nil)
	var got []string
	for _, p := range cfg.HTTP.TrustedProxies {
		got = append(got, p.String())
	}
	if !slices.Equal(got, []string{"10.0.0.0/8", "192.0.2.7/32", "10.1.0.0/16"}) || cfg.HTTP.TrustedProxyHeader != "X-Forwarded-For" {
		t.Fatalf("proxies %v, header %q", got, cfg.HTTP.TrustedProxyHeader)
	}
	cfg = mustParse(t, "http: {trusted_proxies: [\"::1\"]}\n", map[string]string{"CAPGATE_HTTP_TRUSTED_PROXY_HEADER": "X-Real-IP"})
	if cfg.HTTP.TrustedProxyHeader != "X-Real-Ip" || len(cfg.HTTP.TrustedProxies) != 1 {
		t.Fatalf("from the environment: %+v", cfg.HTTP)
	}
	if cfg := mustParse(t, "", nil); cfg.HTTP.TrustedProxyHeader != "" || cfg.HTTP.TrustedProxies != nil {
		t.Fatalf("by default: %+v", cfg.HTTP)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"http: {trusted_proxies: [10.0.0.1]}", "http.trusted_proxies: names proxies but http.trusted_proxy_header names no header"},
		{"http: {trusted_proxy_header: X-Forwarded-For}", "http.trusted_proxy_header: names a header but http.trusted_proxies names no proxy"},
		{"http: {trusted_proxies: [0.0.0.0/0], trusted_proxy_header: X-Forwarded-For}", "trusts every address"},
		{"http: {trusted_proxies: [proxy.example], trusted_proxy_header: X-Forwarded-For}", `must be an address or a CIDR such as 10.0.0.0/8 or 192.0.2.7, got "proxy.example"`},
		{"http: {trusted_proxies: [10.0.0.1], trusted_proxy_header: \"X Forwarded\"}", "must be a header name"},
		{"http: {trusted_proxies: [10.0.0.1], trusted_proxy_header: forwarded}", "Forwarded (RFC 7239) is not read"},
	} {
		isolateEnv(t, nil)
		_, err := Parse([]byte(tc.yaml+"\n"), "/etc/capgate")
		if err == nil {
			t.Errorf("%s: accepted", tc.yaml)
			continue
		}
		if lines := problemLines(t, err); len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%s:\n%v\nwant one problem with %q", tc.yaml, err, tc.want)
		}
	}
}

// TestMetricsAllowedHosts: metrics.allowed_hosts are host names, lower
// case, without a port or a trailing dot.
func TestMetricsAllowedHosts(t *testing.T) {
	cfg := mustParse(t, "metrics: {listen: \"127.0.0.1:9464\", allowed_hosts: [Scrape.Internal., capgate-metrics]}\n", nil)
	if !slices.Equal(cfg.Metrics.AllowedHosts, []string{"scrape.internal", "capgate-metrics"}) || cfg.Metrics.Listen != "127.0.0.1:9464" {
		t.Fatalf("metrics %+v", cfg.Metrics)
	}
	for _, bad := range []string{"host:9464", "-a.example", "a..b", "*.example"} {
		isolateEnv(t, nil)
		_, err := Parse([]byte("metrics: {allowed_hosts: [\""+bad+"\"]}\n"), "/etc/capgate")
		if err == nil || !strings.Contains(err.Error(), "metrics.allowed_hosts[0]") {
			t.Errorf("allowed host %q: %v; want a problem at metrics.allowed_hosts[0]", bad, err)
		}
	}
	isolateEnv(t, nil)
	if _, err := Parse([]byte("metrics: {nope: 1}\n"), "/etc/capgate"); err == nil || !strings.Contains(err.Error(), "known keys are listen, allowed_hosts") {
		t.Errorf("an unknown metrics key: %v", err)
	}
}
