package pluginhost

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// Every invalid resource of every plugin is reported at once, each naming
// its plugin and declaration.
func TestRegisterResourcesReportsEveryProblem(t *testing.T) {
	size := uint64(3)
	h := &Host{plugins: []*Plugin{
		{spec: Spec{Name: "docs", ConfigPath: "plugins[0]"}, describe: &capgatev1.DescribeResponse{
			Resources: []*capgatev1.Resource{
				{Uri: "docs://terms", Name: "terms", Pack: "docs", Size: &size},
				{Uri: "capgate://x/1", Name: "mine", Pack: "docs"},
			},
			ResourceTemplates: []*capgatev1.ResourceTemplate{{UriTemplate: "docs://{a}{b}", Name: "t", Pack: "docs"}},
		}},
		{spec: Spec{Name: "other", ConfigPath: "plugins[1]"}, describe: &capgatev1.DescribeResponse{
			Resources: []*capgatev1.Resource{{Uri: "docs://terms", Name: "terms", Pack: "docs"}},
		}},
	}}
	reg := registry.New([]string{"docs"})
	err := h.Register(reg)
	if err == nil {
		t.Fatal("registered")
	}
	for _, want := range []string{
		`plugins[0]: plugin "docs" declares an invalid resource "capgate://x/1"`,
		`plugins[0]: plugin "docs" declares an invalid resource template "docs://{a}{b}"`,
		`plugins[1]: plugin "other" declares an invalid resource "docs://terms": already provided by plugin "docs"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if r := reg.Resources(); len(r) != 1 || !r[0].HasSize || r[0].Size != 3 || r[0].Plugin != "docs" {
		t.Errorf("registered %+v", r)
	}
}

func TestCompareDescriptionsResources(t *testing.T) {
	was := &capgatev1.DescribeResponse{
		Resources:         []*capgatev1.Resource{{Uri: "docs://a", Name: "a"}},
		ResourceTemplates: []*capgatev1.ResourceTemplate{{UriTemplate: "docs://t/{id}", Name: "t"}},
	}
	now := &capgatev1.DescribeResponse{
		Resources:         []*capgatev1.Resource{{Uri: "docs://a", Name: "b"}},
		ResourceTemplates: []*capgatev1.ResourceTemplate{{UriTemplate: "docs://u/{id}", Name: "t"}},
	}
	err := compareDescriptions(was, now)
	want := "resource docs://a changed; resource template docs://t/{id} is gone; resource template docs://u/{id} is new"
	if err == nil || err.Error() != want {
		t.Errorf("compare = %v\nwant %s", err, want)
	}
}
