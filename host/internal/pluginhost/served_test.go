package pluginhost

import (
	"time"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// servedPlugin is a running Plugin whose process is rpc, an in-process
// server, with no supervisor: for tests of the host services.
func servedPlugin(s Spec, rpc capgatev1.PluginServiceClient, d *capgatev1.DescribeResponse) *Plugin {
	p := &Plugin{spec: s, describe: d, opts: &Options{MaxResultBytes: DefaultMaxResultBytes},
		stop: make(chan struct{}), done: make(chan struct{})}
	close(p.done)
	p.cur.Store(&instance{rpc: rpc})
	p.state.Store(&Health{Name: s.Name, State: StateRunning, Since: time.Now()})
	return p
}
