package config

import (
	"runtime"
	"strings"
	"testing"
)

func TestPluginRunAs(t *testing.T) {
	isolateEnv(t, nil)
	const entry = "plugins:\n  - name: crm\n    path: /opt/crm\n    run_as: "
	if runtime.GOOS != "linux" {
		_, err := Parse([]byte(entry+"root\n"), "")
		if err == nil || !strings.Contains(err.Error(), "plugins[0].run_as: starting a plugin as another user is supported on Linux only") {
			t.Errorf("run_as outside Linux: %v", err)
		}
		return
	}
	for _, tc := range []struct{ value, user string }{{"root", "root"}, {"0", "0"}, {`"0"`, "0"}, {"1234:5678", "1234:5678"}} {
		cfg, err := Parse([]byte(entry+tc.value+"\n"), "")
		if err != nil {
			t.Errorf("run_as: %s: %v", tc.value, err)
			continue
		}
		if r := cfg.Plugins[0].RunAs; r == nil || r.User != tc.user {
			t.Errorf("run_as: %s gives %+v", tc.value, r)
		}
	}
	cfg, err := Parse([]byte(entry+"~\n"), "")
	if err != nil || cfg.Plugins[0].RunAs != nil {
		t.Errorf("run_as: ~ gives %v, %v; want the host's user", cfg, err)
	}
	for _, tc := range []struct{ value, want string }{
		{"no-such-user-capgate", `plugins[0].run_as: no user "no-such-user-capgate" on this system`},
		{"[root]", "plugins[0].run_as: must be a string, got a list (line 4)"},
		{"x:1", `plugins[0].run_as: "x:1" is not uid:gid (two numbers) (line 4)`},
	} {
		_, err := Parse([]byte(entry+tc.value+"\n"), "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run_as: %s: %v; want %q", tc.value, err, tc.want)
		}
	}
}
