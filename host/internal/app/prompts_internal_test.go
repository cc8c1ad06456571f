package app

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/host/internal/config"
	"github.com/capgate/capgate/internal/registry"
)

// TestDisabledNamesPrompts: disabled_capabilities may switch a prompt off
// by its name; a name nothing provides is still refused.
func TestDisabledNamesPrompts(t *testing.T) {
	reg := registry.New([]string{"a"})
	if err := reg.AddPrompt(registry.Prompt{Name: "a.visit", Pack: "a", Plugin: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := checkDisabled(&config.Config{DisabledCapabilities: []string{"a.visit"}}, reg); err != nil {
		t.Fatalf("a prompt's name refused: %v", err)
	}
	err := checkDisabled(&config.Config{DisabledCapabilities: []string{"a.visit", "a.none"}}, reg)
	if err == nil || !strings.Contains(err.Error(), `disabled_capabilities[1]: no plugin provides capability "a.none"`) {
		t.Fatalf("unknown name: %v", err)
	}
}
