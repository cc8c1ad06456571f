package pluginhost

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
)

// TestRegisterPromptsReportsEveryProblem: every invalid prompt of every
// plugin is named at once, with the plugin's config path.
func TestRegisterPromptsReportsEveryProblem(t *testing.T) {
	reg := registry.New([]string{"a"})
	if err := reg.Add(registry.Capability{Name: "a.get", Kind: registry.Read, Pack: "a", Plugin: "one",
		InputSchema: []byte(`{"type":"object"}`)}); err != nil {
		t.Fatal(err)
	}
	h := &Host{plugins: []*Plugin{
		{spec: Spec{Name: "one", ConfigPath: "plugins[0]"}, describe: &capgatev1.DescribeResponse{Prompts: []*capgatev1.Prompt{
			{Name: "a.ok", Pack: "a"}, {Name: "a.get", Pack: "a"}, {Name: "a.nopack", Pack: "zz"},
		}}},
		{spec: Spec{Name: "two", ConfigPath: "plugins[1]"}, describe: &capgatev1.DescribeResponse{Prompts: []*capgatev1.Prompt{
			{Name: "a.ok", Pack: "a"}, {Name: "Bad", Pack: "a", Arguments: []*capgatev1.PromptArgument{{Name: "x"}, {Name: "x"}}},
		}}},
	}}
	err := h.RegisterPrompts(reg)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		`plugins[0]: plugin "one" declares an invalid prompt: prompt "a.get": a capability of plugin "one" has this name`,
		`plugins[0]: plugin "one" declares an invalid prompt: prompt "a.nopack": unknown pack "zz"`,
		`plugins[1]: plugin "two" declares an invalid prompt: prompt "a.ok": already provided by plugin "one"`,
		`plugins[1]: plugin "two" declares an invalid prompt: prompt "Bad": name must be`,
		`argument "x": declared twice`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if _, ok := reg.LookupPrompt("a.ok"); !ok {
		t.Error("the valid prompt was not registered")
	}
}

func TestComparePrompts(t *testing.T) {
	was := &capgatev1.DescribeResponse{Prompts: []*capgatev1.Prompt{{Name: "a.p", Pack: "a"}}}
	now := &capgatev1.DescribeResponse{Prompts: []*capgatev1.Prompt{{Name: "a.p", Pack: "a", Permission: "a.read"}, {Name: "a.q"}}}
	err := compareDescriptions(was, now)
	if err == nil || err.Error() != "prompt a.p changed; prompt a.q is new" {
		t.Fatalf("compare = %v", err)
	}
}
