package metrics

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// HostGuard serves next only requests whose Host is an IP address,
// localhost (or a name under .localhost), or one of hosts; any other is
// answered 421 Misdirected Request. The listener is meant for scrapers
// and operators, and a browser on an operator's machine can be made to
// reach it by a page whose own name an attacker rebinds to the
// listener's address: that request carries the page's name as its Host,
// so refusing unknown names keeps such a page from reading the metrics
// or a goroutine dump. IP addresses pass because rebinding works only
// through a name.
func HostGuard(next http.Handler, log *slog.Logger, hosts ...string) http.Handler {
	allowed := map[string]bool{}
	for _, h := range hosts {
		allowed[strings.ToLower(strings.TrimSuffix(h, "."))] = true
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowed) {
			log.LogAttrs(r.Context(), slog.LevelWarn, "metrics: a request for another host refused",
				slog.String("host", clip(r.Host)), slog.String("remote", r.RemoteAddr))
			http.Error(w, "this listener answers only its addresses, localhost and metrics.allowed_hosts", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport string, allowed map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || allowed[host]
}

// clip bounds a Host quoted in a log line.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
