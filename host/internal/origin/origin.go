// Package origin decides which browser origins may call capgate's
// endpoints: the defence against DNS rebinding that the MCP transport asks
// for, shared by every protocol the host serves so that none can be
// reached from a page the others refuse.
//
// A page whose hostile name was re-pointed at this server still sends its
// own Origin, which is refused. Allowed are the origins the operator lists
// (http.allowed_origins), loopback origins (a page served from the user's
// own machine), and an origin naming exactly the host the request was sent
// to when that host is an IP literal. A same-host match by name is
// deliberately not enough: under DNS rebinding the attacker's page and its
// request share the attacker's name, so Origin and Host agree. Only names
// DNS cannot re-point count, and a named deployment that serves a browser
// client lists its origin.
package origin

import (
	"net"
	"strings"
)

// Header is the request header a browser names its page's origin in.
const Header = "Origin"

// Policy is the set of origins that may call. The zero value allows
// loopback origins and IP-literal same-host ones only.
type Policy struct {
	any     bool
	allowed map[string]bool
}

// NewPolicy allows the listed origins ("https://app.example.com") besides
// the ones every policy allows; "*" allows every origin.
func NewPolicy(list []string) Policy {
	p := Policy{allowed: map[string]bool{}}
	for _, o := range list {
		o = strings.ToLower(strings.TrimRight(strings.TrimSpace(o), "/"))
		if o == "*" {
			p.any = true
		} else if o != "" {
			p.allowed[o] = true
		}
	}
	return p
}

// Allows reports whether a request carrying Origin origin to Host host may
// proceed.
func (p Policy) Allows(origin, host string) bool {
	if p.any {
		return true
	}
	o := strings.ToLower(strings.TrimRight(origin, "/"))
	if p.allowed[o] {
		return true
	}
	scheme, rest, ok := strings.Cut(o, "://")
	if !ok || (scheme != "http" && scheme != "https") || rest == "" || strings.ContainsAny(rest, "/?#@") {
		return false
	}
	oh := hostOnly(rest)
	if isLoopback(oh) {
		return true
	}
	if net.ParseIP(oh) == nil {
		return false
	}
	return strings.EqualFold(withDefaultPort(rest, scheme), withDefaultPort(host, scheme))
}

// hostOnly strips the port and IPv6 brackets from host[:port].
func hostOnly(hp string) string {
	if h, _, err := net.SplitHostPort(hp); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]")
}

func withDefaultPort(hp, scheme string) string {
	if _, _, err := net.SplitHostPort(hp); err == nil {
		return hp
	}
	if scheme == "https" {
		return hp + ":443"
	}
	return hp + ":80"
}

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
