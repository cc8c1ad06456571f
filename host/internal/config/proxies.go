package config

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/capgate/capgate/host/internal/clientip"
)

// trustedProxies reads http.trusted_proxies: CIDRs or single addresses of
// the reverse proxies whose client-address header the host believes.
func (l *loader) trustedProxies(path string, n *yaml.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range l.uniqueStrings(path, n, func(s string) (string, error) {
		p, err := clientip.ParsePrefix(s)
		if err != nil {
			return "", fmt.Errorf("must be an address or a CIDR such as 10.0.0.0/8 or 192.0.2.7, got %q", s)
		}
		if p.Bits() == 0 {
			return "", fmt.Errorf("%q trusts every address, so any client could name itself any other; list the proxies' own addresses", s)
		}
		return p.String(), nil
	}) {
		out = append(out, netip.MustParsePrefix(s)) // checked just above
	}
	return out
}

// proxyHeader resolves http.trusted_proxy_header, which goes with
// http.trusted_proxies: either without the other would be a proxy set up
// halfway, trusting nothing while looking as if it did. proxiesLine is
// where trusted_proxies was written (0: it was not); a list whose entries
// were all wrong has been reported already.
func (l *loader) proxyHeader(cfg *Config, proxiesLine int) {
	v, ok := l.setting("http.trusted_proxy_header", kindString)
	if !ok {
		return
	}
	h, src := strings.TrimSpace(v.(string)), l.source("http.trusted_proxy_header")
	switch {
	case h == "" && len(cfg.HTTP.TrustedProxies) > 0:
		l.addf("http.trusted_proxies", proxiesLine, "names proxies but http.trusted_proxy_header names no header to read the client from (X-Forwarded-For, say)")
	case h == "":
	case !headerName.MatchString(h):
		l.addAt("http.trusted_proxy_header", src, "must be a header name such as X-Forwarded-For or X-Real-IP, got %q", h)
	case strings.EqualFold(h, "Forwarded"):
		l.addAt("http.trusted_proxy_header", src, "Forwarded (RFC 7239) is not read; name a header holding addresses alone, such as X-Forwarded-For")
	case len(cfg.HTTP.TrustedProxies) == 0 && proxiesLine == 0:
		l.addAt("http.trusted_proxy_header", src, "names a header but http.trusted_proxies names no proxy to believe it from; without them any client could write it")
	case len(cfg.HTTP.TrustedProxies) > 0:
		cfg.HTTP.TrustedProxyHeader = http.CanonicalHeaderKey(h)
	}
}

// metricsSection reads the metrics section: listen, a scalar setting, and
// allowed_hosts, the names besides addresses and localhost that the
// listener answers requests for.
func (l *loader) metricsSection(n *yaml.Node) []string {
	pairs, _ := l.mapping("metrics", n)
	var hosts []string
	for _, p := range pairs {
		switch p.key {
		case "allowed_hosts":
			hosts = l.uniqueStrings(p.path, p.val, hostName)
		case "listen":
			l.fileScalar(settingFor("metrics."+p.key), p.val)
		default:
			l.unknown(p, metricsKeys)
		}
	}
	return hosts
}

// hostName checks a host name as a Host header carries it, without port.
func hostName(s string) (string, error) {
	h := strings.ToLower(strings.TrimSuffix(s, "."))
	ok := h != "" && len(h) <= 253
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			ok = false
			break
		}
		for _, c := range []byte(label) {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				ok = false
			}
		}
	}
	if !ok {
		return "", fmt.Errorf("must be a host name such as capgate.internal, without port, got %q", s)
	}
	return h, nil
}
