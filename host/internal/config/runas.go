package config

import (
	"go.yaml.in/yaml/v3"

	"github.com/capgate/capgate/host/internal/pluginhost"
)

// runAs reads a plugin's run_as: a user name, a uid (a YAML number or a
// string) or "uid:gid". The user must exist here and now, so a typo stops
// start-up rather than the plugin's first start.
func (l *loader) runAs(path string, n *yaml.Node) (*pluginhost.RunAs, bool) {
	var s string
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		s = n.Value
	} else {
		var ok bool
		if s, ok = l.str(path, n); !ok {
			return nil, false
		}
	}
	r, err := pluginhost.ParseRunAs(s)
	if err != nil {
		l.addf(path, n.Line, "%v", err)
		return nil, false
	}
	return r, true
}
