package clientip

import (
	"net/http"
	"net/netip"
	"testing"
)

func prefixes(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		p, err := ParsePrefix(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestAddr: the header counts only from a trusted peer, is read from the
// right past the trusted proxies, and a client's own entries on its left
// are never believed.
func TestAddr(t *testing.T) {
	r := New("x-forwarded-for", prefixes(t, "10.0.0.0/8", "192.0.2.7"))
	for _, tc := range []struct {
		name, peer string
		hdr        []string
		want       string
	}{
		{"no proxy in front", "203.0.113.5:4000", []string{"198.51.100.1"}, "203.0.113.5"},
		{"trusted proxy", "10.1.2.3:4000", []string{"198.51.100.1"}, "198.51.100.1"},
		{"the client's forgery is left of the proxy's entry", "10.1.2.3:4000", []string{"1.2.3.4, 198.51.100.1"}, "198.51.100.1"},
		{"two trusted hops", "192.0.2.7:1", []string{"198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"several header lines", "10.1.2.3:1", []string{"1.1.1.1", "198.51.100.1"}, "198.51.100.1"},
		{"trusted proxy, no header", "10.1.2.3:4000", nil, "10.1.2.3"},
		{"garbage hop ends the walk", "10.1.2.3:1", []string{"198.51.100.1, nonsense"}, "10.1.2.3"},
		{"all hops trusted", "10.1.2.3:1", []string{"10.2.2.2"}, "10.2.2.2"},
		{"ipv6 with port in header", "10.1.2.3:1", []string{"[2001:db8::1]:5555"}, "2001:db8::1"},
		{"mapped peer", "[::ffff:10.1.2.3]:1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"an address just outside the trusted one", "192.0.2.8:1", []string{"198.51.100.1"}, "192.0.2.8"},
	} {
		req := &http.Request{RemoteAddr: tc.peer, Header: http.Header{}}
		for _, h := range tc.hdr {
			req.Header.Add("X-Forwarded-For", h)
		}
		got, ok := r.Addr(req)
		if !ok || got.String() != tc.want {
			t.Errorf("%s: %v %v; want %s", tc.name, got, ok, tc.want)
		}
	}
}

// TestUntrusting: without a header or proxies, and with a nil resolver,
// the peer is the client whatever the header says.
func TestUntrusting(t *testing.T) {
	req := &http.Request{RemoteAddr: "10.1.2.3:4000", Header: http.Header{"X-Forwarded-For": {"198.51.100.1"}}}
	for _, r := range []*Resolver{nil, New("", prefixes(t, "10.0.0.0/8")), New("X-Forwarded-For", nil)} {
		if got, _ := r.Addr(req); got.String() != "10.1.2.3" {
			t.Errorf("%+v: %v; want the peer", r, got)
		}
	}
	if k := (*Resolver)(nil).Key(&http.Request{RemoteAddr: "pipe"}); k != "pipe" {
		t.Errorf("key of a peer that is no address: %q", k)
	}
}

// TestBucket: IPv6 clients are counted by their /64.
func TestBucket(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1": "192.0.2.1", "2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64", "::ffff:192.0.2.1": "192.0.2.1",
	} {
		if got := Bucket(netip.MustParseAddr(in)); got != want {
			t.Errorf("Bucket(%s) = %s; want %s", in, got, want)
		}
	}
}

func TestParsePrefix(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3/8": "10.0.0.0/8", "192.0.2.7": "192.0.2.7/32", "2001:db8::1": "2001:db8::1/128"} {
		p, err := ParsePrefix(in)
		if err != nil || p.String() != want {
			t.Errorf("ParsePrefix(%s) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "example.com", "10.0.0/8"} {
		if _, err := ParsePrefix(bad); err == nil {
			t.Errorf("ParsePrefix(%q) accepted", bad)
		}
	}
}
