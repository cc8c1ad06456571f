package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// The config the bench writes is one capgate accepts, with the bench token
// bound to alice and allowed hello.greet.
func TestBenchConfigLoads(t *testing.T) {
	bin := t.TempDir()
	cfg := benchConfig(bin, t.TempDir(), "127.0.0.1:18080", true)
	validate(t, cfg)
	validate(t, governed(cfg)) // the governed row's: audit on, a rate limit
	validate(t, withMetrics(cfg))
	validate(t, withTraces(cfg))
	if !cfg.Enabled || cfg.Listen != "127.0.0.1:18080" {
		t.Errorf("enabled, listen = %v, %q", cfg.Enabled, cfg.Listen)
	}
	if len(cfg.Tokens) != 1 || cfg.Tokens[0].UserID != benchUser || cfg.Tokens[0].Scope != "action" {
		t.Errorf("tokens = %+v", cfg.Tokens)
	}
	if !slices.Contains(cfg.Roles[cfg.Tokens[0].Role], greetTool) {
		t.Errorf("role %q lacks %s: %v", cfg.Tokens[0].Role, greetTool, cfg.Roles)
	}
	if !cfg.Packs["hello"] || !cfg.Packs["booking"] {
		t.Errorf("packs = %v", cfg.Packs)
	}
	paths := map[string]string{}
	for _, p := range cfg.Plugins {
		paths[p.Name] = p.Path
	}
	if paths["hello"] != filepath.Join(bin, helloPluginBin) || paths["booking"] != filepath.Join(bin, bookingPluginBin) {
		t.Errorf("plugins = %+v", cfg.Plugins)
	}
}

func TestFindBookingID(t *testing.T) {
	for name, tc := range map[string]struct {
		out  string
		want any
	}{
		"array":          {`[{"id":"b1","user_id":"bob"},{"id":"b2","user_id":"alice"}]`, "b2"},
		"wrapped":        {`{"count":2,"bookings":[{"id":7,"owner":"bob"},{"id":9,"owner":"alice"}]}`, json.Number("9")},
		"no owner field": {`{"items":[{"id":"x1","slot":{"id":"s1"}},{"id":"x2"}]}`, "x1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := findBookingID(json.RawMessage(tc.out), "alice")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("id = %#v, want %#v", got, tc.want)
			}
		})
	}
	if _, err := findBookingID(json.RawMessage(`{"bookings":[]}`), "alice"); err == nil {
		t.Error("an empty list yields an id")
	}
}

func TestCoerceID(t *testing.T) {
	if got := coerceID(json.Number("12"), "string"); got != "12" {
		t.Errorf("number to string = %#v", got)
	}
	if got := coerceID("12", "integer"); got != json.Number("12") {
		t.Errorf("string to integer = %#v", got)
	}
	if got := coerceID("bk-1", "integer"); got != "bk-1" {
		t.Errorf("non-numeric string to integer = %#v", got)
	}
}

func TestChildEnvDropsCapgateVariables(t *testing.T) {
	got := childEnv([]string{"PATH=/bin", "CAPGATE_LISTEN=0.0.0.0:1", "HOME=/root"})
	if !slices.Equal(got, []string{"PATH=/bin", "HOME=/root"}) {
		t.Errorf("childEnv = %v", got)
	}
}
