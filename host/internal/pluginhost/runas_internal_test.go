package pluginhost

import (
	"strings"
	"testing"
)

// TestRunAsNeedsRoot: a host not running as root refuses run_as at start,
// naming the setting's path, rather than failing at fork.
func TestRunAsNeedsRoot(t *testing.T) {
	s := Spec{Name: "crm", ConfigPath: "plugins[2]", RunAs: &RunAs{User: "nobody", UID: 65534, GID: 65534}}
	err := checkRunAsBy(s, 1000)
	if err == nil || !strings.HasPrefix(err.Error(), "plugins[2].run_as: ") || !strings.Contains(err.Error(), "root") {
		t.Errorf("as uid 1000: %v; want a refusal naming plugins[2].run_as and root", err)
	}
	if runAsSupported {
		if err := checkRunAsBy(s, 0); err != nil {
			t.Errorf("as root: %v", err)
		}
	}
	if err := checkRunAsBy(Spec{ConfigPath: "plugins[0]"}, 1000); err != nil {
		t.Errorf("no run_as, as uid 1000: %v", err)
	}
}

func TestParseRunAs(t *testing.T) {
	if !runAsSupported {
		if _, err := ParseRunAs("nobody"); err == nil || !strings.Contains(err.Error(), "Linux only") {
			t.Errorf("run_as outside Linux: %v", err)
		}
		return
	}
	for _, tc := range []struct {
		in       string
		uid, gid uint32
	}{
		{"root", 0, 0},
		{"0", 0, 0},
		{"1234:5678", 1234, 5678},
		{" 7:8 ", 7, 8},
	} {
		r, err := ParseRunAs(tc.in)
		if err != nil || r.UID != tc.uid || r.GID != tc.gid {
			t.Errorf("ParseRunAs(%q) = %+v, %v; want %d:%d", tc.in, r, err, tc.uid, tc.gid)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "must name a user"},
		{"no-such-user-capgate", `no user "no-such-user-capgate"`},
		{"4000000000", `no user "4000000000"`},
		{"a:b", "is not uid:gid"},
		{"1:", "is not uid:gid"},
		{"1:2:3", "is not uid:gid"},
		{"-1", `no user "-1"`},
	} {
		if _, err := ParseRunAs(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRunAs(%q) = %v; want an error with %q", tc.in, err, tc.want)
		}
	}
}
