package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const referencePath = "../../../config/reference.yaml"

// TestReferenceLoads keeps config/reference.yaml true: it must load, and it
// must mention every key, variable and built-in pack there is.
func TestReferenceLoads(t *testing.T) {
	isolateEnv(t, map[string]string{
		"READER_TOKEN":  "reference-reader-token",
		"SUPPORT_TOKEN": "reference-support-token",
		"CRM_API_KEY":   "reference-api-key",
	})
	cfg, err := Load(referencePath)
	if err != nil {
		t.Fatalf("config/reference.yaml does not load:\n%v", err)
	}
	if len(cfg.Tokens) != 3 || len(cfg.Plugins) != 4 || !cfg.Packs["booking"] {
		t.Errorf("reference loaded oddly: %d tokens, %d plugins, packs %v", len(cfg.Tokens), len(cfg.Plugins), cfg.Packs)
	}
	if want := filepath.Join(filepath.Dir(cfg.File), "..", "bin", "capgate-plugin-booking"); cfg.Plugins[0].Path != filepath.Clean(want) {
		t.Errorf("plugins[0].path = %q", cfg.Plugins[0].Path)
	}
	if got := cfg.Search.BlockedEntities; len(got) != 2 || got[0] != "customer" || got[1] != "crm.contact" {
		t.Errorf("search.blocked_entities = %v", got)
	}
	if cfg.Events != (Events{NATSURL: "nats://127.0.0.1:4222", Stream: "CAPGATE_EVENTS"}) {
		t.Errorf("events = %+v", cfg.Events)
	}
	if got := cfg.Plugins[2].Config["connection"]; cfg.Plugins[2].Name != "llm" || got != "local" {
		t.Errorf("plugins[2] is %s, config.connection = %v; want the llm plugin's", cfg.Plugins[2].Name, got)
	}
	if tr := cfg.Tracing; tr.OTLPEndpoint != "http://127.0.0.1:4318" || tr.OTLPProtocol != OTLPHTTP || tr.Headers["Authorization"] != "Bearer none" {
		t.Errorf("tracing = %+v", tr)
	}
	if got := cfg.Plugins[3].Config["Region"]; got != "eu-west-1" {
		t.Errorf("plugins[3].config.Region = %v", got)
	}

	raw, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var mentions []string
	for _, s := range Settings {
		leaf := s.Key[strings.LastIndex(s.Key, ".")+1:]
		def := s.Default
		if def == "" {
			def = `""`
		}
		mentions = append(mentions, leaf+":", s.Env(), "Default: "+def)
	}
	for _, keys := range [][]string{topKeys, httpKeys, logKeys, searchKeys, eventsKeys, tokenKeys, pluginKeys, limitsKeys, rateKeys, riskKeys, tracingKeys} {
		for _, k := range keys {
			mentions = append(mentions, k+":")
		}
	}
	mentions = append(mentions, BuiltinPacks...)
	mentions = append(mentions, "CAPGATE_PACKS_")
	for _, m := range mentions {
		if !strings.Contains(text, m) {
			t.Errorf("config/reference.yaml does not mention %q", m)
		}
	}
}
