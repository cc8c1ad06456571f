// Package clientip says which client sent a request, for the counts that
// throttle failed sign-ins and failed bearer tokens.
//
// The address is the connection's peer unless that peer is a trusted
// proxy (http.trusted_proxies) and the request carries the header the
// proxy writes (http.trusted_proxy_header): then it is read from the
// header, right to left, skipping the trusted proxies' own addresses, so
// that what a client writes in the header itself (the left of it) is
// never believed. Behind a proxy that is not declared, every client has
// the proxy's address, and one client's failures throttle all of them.
package clientip

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver finds a request's client address. The zero value, and a nil
// *Resolver, trust no proxy: the client is the peer.
type Resolver struct {
	header  string
	proxies []netip.Prefix
}

// New trusts header when the peer is within proxies. With no header or
// no proxies it trusts nothing.
func New(header string, proxies []netip.Prefix) *Resolver {
	if header == "" || len(proxies) == 0 {
		return &Resolver{}
	}
	return &Resolver{header: http.CanonicalHeaderKey(header), proxies: append([]netip.Prefix(nil), proxies...)}
}

// Header is the header trusted, "" when none is.
func (r *Resolver) Header() string {
	if r == nil {
		return ""
	}
	return r.header
}

// Addr is the client's address; false when neither the peer nor the
// header holds one (a request built in process, say).
func (r *Resolver) Addr(req *http.Request) (netip.Addr, bool) {
	peer, ok := parse(req.RemoteAddr)
	if !ok || r == nil || r.header == "" || !r.trusted(peer) {
		return peer, ok
	}
	vals := req.Header.Values(r.header)
	if len(vals) == 0 {
		return peer, true
	}
	hops := strings.Split(strings.Join(vals, ","), ",")
	// From the right: each hop a trusted proxy added; the first one no
	// trusted proxy owns is the client. A hop that is no address ends the
	// walk at the last address a trusted proxy vouched for.
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parse(strings.TrimSpace(hops[i]))
		if !ok {
			break
		}
		client = a
		if !r.trusted(a) {
			break
		}
	}
	return client, true
}

// Key is the client's address as throttles count it: an IPv4 address
// whole, an IPv6 address by its /64, which one host is routinely given
// entire; the peer as written when it is no address.
func (r *Resolver) Key(req *http.Request) string {
	a, ok := r.Addr(req)
	if !ok {
		return req.RemoteAddr
	}
	return Bucket(a)
}

// Bucket is a's throttle key (see Key).
func Bucket(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64) // 64 is always a valid IPv6 prefix length
		return p.String()
	}
	return a.String()
}

func (r *Resolver) trusted(a netip.Addr) bool {
	for _, p := range r.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parse reads an address, with or without a port, IPv6 bracketed or not.
func parse(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.WithZone("").Unmap(), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// ParsePrefix reads a trusted proxy as configured: a CIDR such as
// 10.0.0.0/8, or one address, which stands for itself alone.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.WithZone("").Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
