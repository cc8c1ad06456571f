//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// faultProxy stands between the replicas and one dependency: the replicas
// only ever dial its address, so the test can slow or cut what passes
// without touching either side.
type faultProxy struct {
	dep   *dependency
	proxy *toxiproxy.Proxy
	addr  string // host:port the replicas dial
}

var toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())

func newFaultProxy(t *testing.T, dep *dependency) *faultProxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer, dep.name, fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("127.0.0.1:%d", dep.port))
	if err := p.Start(); err != nil {
		t.Fatalf("proxy for %s: %v", dep.name, err)
	}
	t.Cleanup(p.Stop)
	return &faultProxy{dep: dep, proxy: p, addr: p.Listen}
}

// slow delays everything the dependency sends back by ms milliseconds.
func (p *faultProxy) slow(ms int) error {
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, ms)))
	return err
}

func (p *faultProxy) unslow() error { return p.proxy.Toxics.RemoveToxic(context.Background(), "slow") }

// cut closes every connection through the proxy and refuses new ones, as
// when the dependency drops off the network; mend listens again on the
// same address.
func (p *faultProxy) cut() { p.proxy.Stop() }

func (p *faultProxy) mend() error { return p.proxy.Start() }
