package pluginhost

import (
	"testing"

	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// A restarted process must describe what the plugin registered: every
// difference is named, and only the version string may change.
func TestCompareDescriptions(t *testing.T) {
	was := &capgatev1.DescribeResponse{
		Version: "1.0",
		Capabilities: []*capgatev1.Capability{
			{Name: "a.get", Kind: capgatev1.Kind_KIND_READ}, {Name: "a.set", Kind: capgatev1.Kind_KIND_ACTION},
		},
		Entities: []*capgatev1.EntityType{{Name: "a.thing", Version: "1"}},
	}
	same := &capgatev1.DescribeResponse{
		Version: "1.1",
		Capabilities: []*capgatev1.Capability{
			{Name: "a.set", Kind: capgatev1.Kind_KIND_ACTION}, {Name: "a.get", Kind: capgatev1.Kind_KIND_READ},
		},
		Entities: []*capgatev1.EntityType{{Name: "a.thing", Version: "1"}},
	}
	if err := compareDescriptions(was, same); err != nil {
		t.Errorf("same capabilities in another order, another version: %v", err)
	}
	changed := &capgatev1.DescribeResponse{
		Capabilities: []*capgatev1.Capability{
			{Name: "a.get", Kind: capgatev1.Kind_KIND_ACTION}, {Name: "a.new", Kind: capgatev1.Kind_KIND_READ},
		},
		Entities: []*capgatev1.EntityType{{Name: "a.thing", Version: "2"}, {Name: "a.other"}},
	}
	err := compareDescriptions(was, changed)
	want := "capability a.get changed; capability a.set is gone; capability a.new is new; entity type a.thing changed; entity type a.other is new"
	if err == nil || err.Error() != want {
		t.Errorf("compare = %v\nwant %s", err, want)
	}
}
