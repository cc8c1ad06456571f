package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
)

func defaults() *Config {
	return &Config{
		Listen:           "127.0.0.1:8080",
		DataDir:          "./data",
		Tokens:           []Token{},
		Roles:            map[string][]string{},
		Packs:            map[string]bool{"search": false, "booking": false, "subscription": false, "llm": false, "events": false, "approvals": false},
		DefaultScope:     dispatch.ScopeRead,
		MaxResults:       20,
		EventsBufferSize: 1000,
		MaxResultBytes:   4 << 20,
		HTTP:             HTTP{MaxBodyBytes: 1 << 20, RequestTimeout: 30 * time.Second, ShutdownTimeout: 15 * time.Second, MaxInFlight: 1024},
		Log:              Log{Level: slog.LevelInfo, Format: "text"},
		Events:           Events{Stream: "CAPGATE_EVENTS"},
		Idempotency:      Idempotency{Retention: 24 * time.Hour},
		Audit:            Audit{Enabled: true, Retention: 720 * time.Hour, RefuseActions: true},
		Approvals:        Approvals{TTL: 24 * time.Hour, FourEyes: true, ConfirmTTL: 10 * time.Minute, MaxPending: 20},
		Tasks:            Tasks{Enabled: true, TTL: time.Hour, RunTimeout: 30 * time.Minute, MaxPerPrincipal: 16, PollInterval: time.Second},
		Tracing:          Tracing{OTLPProtocol: OTLPHTTP, SampleRatio: 1, ServiceName: "capgate"},
		ActionsEnabled:   true,
	}
}

// restartWith is the default restart policy changed by f.
func restartWith(f func(*pluginhost.RestartPolicy)) pluginhost.RestartPolicy {
	r := pluginhost.DefaultRestartPolicy
	f(&r)
	return r
}

func mustParse(t *testing.T, yaml string, env map[string]string) *Config {
	t.Helper()
	isolateEnv(t, env)
	cfg, err := Parse([]byte(yaml), "/etc/capgate")
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return cfg
}

func sum(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

func TestDefaults(t *testing.T) {
	for name, yaml := range map[string]string{
		"empty file":     "",
		"only comments":  "# nothing set\n",
		"empty mapping":  "{}\n",
		"null document":  "~\n",
		"empty sections": "tokens:\nroles:\npacks:\nhttp:\nlog:\nplugins:\n",
		"null values":    "enabled:\nlisten: ~\nhttp: {max_body_bytes: null}\npacks: {booking: null}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if got := mustParse(t, yaml, nil); !reflect.DeepEqual(got, defaults()) {
				t.Errorf("got  %+v\nwant %+v", got, defaults())
			}
		})
	}
}

func TestParseFull(t *testing.T) {
	hashed := strings.Repeat("AB", 32)
	cfg := mustParse(t, `
enabled: true
listen: "0.0.0.0:9090"
data_dir: /var/lib/capgate
default_scope: action
default_role: viewer
max_results: 50
events_buffer_size: 5000
max_result_bytes: 65536
database:
  dsn: postgres://capgate@db.example:5432/capgate
idempotency:
  retention: 2h
roles:
  admin: ["*"]
  viewer: [booking.read, search.*]
  nobody:
packs:
  booking: true
  search: false
  crm_sync: true
tokens:
  - plain-token-1
  - token: object-token-2
    role: admin
    scope: admin
  - token_sha256: `+hashed+`
    user_id: 1042
http:
  max_body_bytes: 2048
  request_timeout: 1m30s
  shutdown_timeout: 5s
  max_in_flight: 64
  allowed_origins: ["HTTPS://App.Example.com:443", "http://localhost:3000/", "http://[::1]:80", "https://app.example.com"]
log:
  level: DEBUG
  format: json
search:
  blocked_entities: [customer, crm.contact, customer]
events:
  nats_url: nats://a.example:4222,tls://b.example:4222
  stream: CAPGATE_EVENTS_EU
tracing:
  otlp_endpoint: https://collector.example:4317
  otlp_protocol: grpc
  sample_ratio: 0.25
  service_name: capgate-eu
  headers:
    Authorization: Bearer ${CAPGATE_TEST_PASSED}
    x-tenant: 42
plugins:
  - name: booking
    path: plugins/booking
    sha256: `+strings.Repeat("Cd", 32)+`
    env: [TZ=Europe/Paris, CAPGATE_TEST_PASSED, CAPGATE_TEST_UNSET]
    max_in_flight: 32
    restart: {initial_backoff: 1s, max_restarts: 0}
    config:
      timezone: Europe/Paris
  - name: search
    path: /opt/capgate/search
    restart:
      max_backoff: 1m
      jitter: 0
      window: 1h
`, map[string]string{"CAPGATE_TEST_PASSED": "from-host"})
	var hashedSum [32]byte
	if _, err := hex.Decode(hashedSum[:], []byte(strings.ToLower(hashed))); err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Enabled:      true,
		Listen:       "0.0.0.0:9090",
		DataDir:      "/var/lib/capgate",
		DefaultScope: dispatch.ScopeAction,
		DefaultRole:  "viewer",
		Tokens: []Token{
			{Index: 0, Label: "tokens-0", SHA256: sum("plain-token-1"), Role: "viewer", Scope: dispatch.ScopeAction},
			{Index: 1, Label: "tokens-1", SHA256: sum("object-token-2"), Role: "admin", Scope: dispatch.ScopeAdmin},
			{Index: 2, Label: "tokens-2", SHA256: hashedSum, Role: "viewer", Scope: dispatch.ScopeAction, UserID: "1042"},
		},
		Roles:            map[string][]string{"admin": {"*"}, "viewer": {"booking.read", "search.*"}, "nobody": {}},
		Packs:            map[string]bool{"search": false, "booking": true, "subscription": false, "llm": false, "events": false, "approvals": false, "crm_sync": true},
		MaxResults:       50,
		EventsBufferSize: 5000,
		MaxResultBytes:   65536,
		Database:         Database{DSN: "postgres://capgate@db.example:5432/capgate"},
		Idempotency:      Idempotency{Retention: 2 * time.Hour},
		Audit:            Audit{Enabled: true, Retention: 720 * time.Hour, RefuseActions: true},
		Approvals:        Approvals{TTL: 24 * time.Hour, FourEyes: true, ConfirmTTL: 10 * time.Minute, MaxPending: 20},
		Tasks:            Tasks{Enabled: true, TTL: time.Hour, RunTimeout: 30 * time.Minute, MaxPerPrincipal: 16, PollInterval: time.Second},
		Tracing: Tracing{OTLPEndpoint: "https://collector.example:4317", OTLPProtocol: OTLPGRPC, SampleRatio: 0.25, ServiceName: "capgate-eu",
			Headers: map[string]string{"Authorization": "Bearer from-host", "x-tenant": "42"}},
		ActionsEnabled: true,
		HTTP: HTTP{
			MaxBodyBytes: 2048, RequestTimeout: 90 * time.Second, ShutdownTimeout: 5 * time.Second, MaxInFlight: 64,
			AllowedOrigins: []string{"https://app.example.com", "http://localhost:3000", "http://[::1]"},
		},
		Log:    Log{Level: slog.LevelDebug, Format: "json"},
		Search: Search{BlockedEntities: []string{"customer", "crm.contact"}},
		Events: Events{NATSURL: "nats://a.example:4222,tls://b.example:4222", Stream: "CAPGATE_EVENTS_EU"},
		Plugins: []Plugin{
			{
				Name: "booking", Path: "/etc/capgate/plugins/booking", SHA256: strings.Repeat("cd", 32),
				Env: []string{"TZ=Europe/Paris", "CAPGATE_TEST_PASSED=from-host"}, EnvMissing: []string{"CAPGATE_TEST_UNSET"},
				MaxInFlight: 32, Restart: restartWith(func(r *pluginhost.RestartPolicy) { r.InitialBackoff, r.MaxRestarts = time.Second, 0 }),
				Config: map[string]any{"timezone": "Europe/Paris"},
			},
			{
				Name: "search", Path: "/opt/capgate/search", MaxInFlight: pluginhost.DefaultMaxInFlight,
				Restart: restartWith(func(r *pluginhost.RestartPolicy) { r.MaxBackoff, r.Jitter, r.Window = time.Minute, 0, time.Hour }),
			},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
}

// TestEnvOverrides: each variable beats the file, and an empty variable
// counts as unset.
func TestEnvOverrides(t *testing.T) {
	file := `
enabled: false
listen: 127.0.0.1:1
data_dir: file-data
default_scope: read
max_results: 5
events_buffer_size: 5
roles: {admin: ["*"], viewer: []}
default_role: viewer
packs: {booking: false, search: true}
http: {max_body_bytes: 5, request_timeout: 5s, shutdown_timeout: 5s, trusted_proxies: [10.0.0.1], trusted_proxy_header: X-Real-IP}
log: {level: error, format: text}
auth: {oauth: {issuer: "https://file.example.com"}}
`
	tests := []struct {
		env   string
		value string
		check func(*Config) bool
	}{
		{"CAPGATE_ENABLED", "true", func(c *Config) bool { return c.Enabled }},
		{"CAPGATE_LISTEN", "[::1]:9999", func(c *Config) bool { return c.Listen == "[::1]:9999" }},
		{"CAPGATE_DATA_DIR", "/srv/data", func(c *Config) bool { return c.DataDir == "/srv/data" }},
		{"CAPGATE_DEFAULT_SCOPE", "admin", func(c *Config) bool { return c.DefaultScope == dispatch.ScopeAdmin }},
		{"CAPGATE_DEFAULT_ROLE", "admin", func(c *Config) bool { return c.DefaultRole == "admin" }},
		{"CAPGATE_MAX_RESULTS", "77", func(c *Config) bool { return c.MaxResults == 77 }},
		{"CAPGATE_EVENTS_BUFFER_SIZE", "123", func(c *Config) bool { return c.EventsBufferSize == 123 }},
		{"CAPGATE_HTTP_MAX_BODY_BYTES", "4096", func(c *Config) bool { return c.HTTP.MaxBodyBytes == 4096 }},
		{"CAPGATE_HTTP_REQUEST_TIMEOUT", "2m", func(c *Config) bool { return c.HTTP.RequestTimeout == 2*time.Minute }},
		{"CAPGATE_HTTP_SHUTDOWN_TIMEOUT", "1s", func(c *Config) bool { return c.HTTP.ShutdownTimeout == time.Second }},
		{"CAPGATE_LOG_LEVEL", "warn", func(c *Config) bool { return c.Log.Level == slog.LevelWarn }},
		{"CAPGATE_LOG_FORMAT", "JSON", func(c *Config) bool { return c.Log.Format == "json" }},
		{"CAPGATE_EVENTS_NATS_URL", "nats://10.0.0.1:4222", func(c *Config) bool { return c.Events.NATSURL == "nats://10.0.0.1:4222" }},
		{"CAPGATE_EVENTS_STREAM", "OTHER_EVENTS", func(c *Config) bool { return c.Events.Stream == "OTHER_EVENTS" }},
		{"CAPGATE_MAX_RESULT_BYTES", "2048", func(c *Config) bool { return c.MaxResultBytes == 2048 }},
		{"CAPGATE_HTTP_MAX_IN_FLIGHT", "7", func(c *Config) bool { return c.HTTP.MaxInFlight == 7 }},
		{"CAPGATE_HTTP_TRUSTED_PROXY_HEADER", "x-forwarded-for", func(c *Config) bool { return c.HTTP.TrustedProxyHeader == "X-Forwarded-For" }},
		{"CAPGATE_DATABASE_DSN", "postgresql://u:p@h/db", func(c *Config) bool { return c.Database.DSN == "postgresql://u:p@h/db" }},
		{"CAPGATE_IDEMPOTENCY_RETENTION", "90m", func(c *Config) bool { return c.Idempotency.Retention == 90*time.Minute }},
		{"CAPGATE_AUDIT_ENABLED", "false", func(c *Config) bool { return !c.Audit.Enabled }},
		{"CAPGATE_AUDIT_RETENTION", "48h", func(c *Config) bool { return c.Audit.Retention == 48*time.Hour }},
		{"CAPGATE_AUDIT_ON_UNAVAILABLE", "allow", func(c *Config) bool { return !c.Audit.RefuseActions }},
		{"CAPGATE_REFUSALS_OWNERSHIP", "not_found", func(c *Config) bool { return c.OwnershipAsMissing && c.Policy().OwnershipAsMissing }},
		{"CAPGATE_APPROVALS_TTL", "2h", func(c *Config) bool { return c.Approvals.TTL == 2*time.Hour }},
		{"CAPGATE_APPROVALS_FOUR_EYES", "false", func(c *Config) bool { return !c.Approvals.FourEyes }},
		{"CAPGATE_METRICS_LISTEN", "127.0.0.1:9464", func(c *Config) bool { return c.Metrics.Listen == "127.0.0.1:9464" }},
		{"CAPGATE_TRACING_OTLP_ENDPOINT", "https://otlp.example:4318/v1/traces", func(c *Config) bool {
			return c.Tracing.OTLPEndpoint == "https://otlp.example:4318/v1/traces"
		}},
		{"CAPGATE_TRACING_OTLP_PROTOCOL", "GRPC", func(c *Config) bool { return c.Tracing.OTLPProtocol == OTLPGRPC }},
		{"CAPGATE_TRACING_SAMPLE_RATIO", "0.1", func(c *Config) bool { return c.Tracing.SampleRatio == 0.1 }},
		{"CAPGATE_TRACING_SERVICE_NAME", "capgate-eu", func(c *Config) bool { return c.Tracing.ServiceName == "capgate-eu" }},
		{"CAPGATE_TASKS_ENABLED", "false", func(c *Config) bool { return !c.Tasks.Enabled }},
		{"CAPGATE_TASKS_TTL", "3h", func(c *Config) bool { return c.Tasks.TTL == 3*time.Hour }},
		{"CAPGATE_TASKS_RUN_TIMEOUT", "5m", func(c *Config) bool { return c.Tasks.RunTimeout == 5*time.Minute }},
		{"CAPGATE_TASKS_MAX_PER_PRINCIPAL", "3", func(c *Config) bool { return c.Tasks.MaxPerPrincipal == 3 }},
		{"CAPGATE_TASKS_POLL_INTERVAL", "250ms", func(c *Config) bool { return c.Tasks.PollInterval == 250*time.Millisecond }},
		{"CAPGATE_APPROVALS_CONFIRM_TTL", "90s", func(c *Config) bool { return c.Approvals.ConfirmTTL == 90*time.Second }},
		{"CAPGATE_APPROVALS_CONFIRM_KEY", strings.Repeat("s", 40), func(c *Config) bool { return c.Approvals.ConfirmKey == strings.Repeat("s", 40) }},
		{"CAPGATE_APPROVALS_MAX_PENDING", "5", func(c *Config) bool { return c.Approvals.MaxPending == 5 }},
		{"CAPGATE_ACTIONS_ENABLED", "false", func(c *Config) bool { return !c.ActionsEnabled && c.Policy().ActionsOff }},
		{"CAPGATE_PACKS_BOOKING", "true", func(c *Config) bool { return c.Packs["booking"] }},
		{"CAPGATE_PACKS_SEARCH", "false", func(c *Config) bool { return !c.Packs["search"] }},
		{"CAPGATE_PACKS_CRM_SYNC", "1", func(c *Config) bool { return c.Packs["crm_sync"] }},
		{"CAPGATE_MAX_RESULTS", "", func(c *Config) bool { return c.MaxResults == 5 }},
		{"CAPGATE_AUTH_OAUTH_ISSUER", "https://env.example.com", func(c *Config) bool { return c.Auth.OAuth.Issuer == "https://env.example.com" }},
		{"CAPGATE_AUTH_OAUTH_RESOURCE", "https://c.example.com/mcp", func(c *Config) bool {
			return c.Auth.OAuth.Resource == "https://c.example.com/mcp" && c.Auth.OAuth.Audience == "https://c.example.com/mcp"
		}},
		{"CAPGATE_AUTH_OAUTH_AUDIENCE", "api://capgate", func(c *Config) bool { return c.Auth.OAuth.Audience == "api://capgate" }},
		{"CAPGATE_AUTH_OAUTH_JWKS_URL", "https://file.example.com/jwks", func(c *Config) bool { return c.Auth.OAuth.JWKSURL == "https://file.example.com/jwks" }},
		{"CAPGATE_AUTH_OAUTH_CLOCK_SKEW", "5s", func(c *Config) bool { return c.Auth.OAuth.ClockSkew == 5*time.Second }},
		{"CAPGATE_AUTH_OAUTH_JWKS_REFRESH_INTERVAL", "1h", func(c *Config) bool { return c.Auth.OAuth.JWKSRefreshInterval == time.Hour }},
		{"CAPGATE_AUTH_OAUTH_JWKS_MIN_REFRESH_INTERVAL", "2s", func(c *Config) bool { return c.Auth.OAuth.JWKSMinRefreshInterval == 2*time.Second }},
		{"CAPGATE_AUTH_OAUTH_USER_CLAIM", "email", func(c *Config) bool { return c.Auth.OAuth.UserClaim == "email" }},
		{"CAPGATE_AUTH_OAUTH_ROLE_CLAIM", "groups", func(c *Config) bool { return c.Auth.OAuth.RoleClaim == "groups" }},
		{"CAPGATE_AUTH_OAUTH_DEFAULT_ROLE", "admin", func(c *Config) bool { return c.Auth.OAuth.DefaultRole == "admin" }},
		{"CAPGATE_AUTH_OAUTH_SCOPES_READ", "r", func(c *Config) bool { return c.Auth.OAuth.Scopes.Read == "r" }},
		{"CAPGATE_AUTH_OAUTH_SCOPES_ACTION", "w", func(c *Config) bool { return c.Auth.OAuth.Scopes.Action == "w" }},
		{"CAPGATE_AUTH_OAUTH_SCOPES_ADMIN", "", func(c *Config) bool { return c.Auth.OAuth.Scopes.Admin == "capgate:admin" }},
		{"CAPGATE_AUTH_OAUTH_RESOURCE_NAME", "Bookings", func(c *Config) bool { return c.Auth.OAuth.ResourceName == "Bookings" }},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			cfg := mustParse(t, file, map[string]string{tt.env: tt.value})
			if !tt.check(cfg) {
				t.Errorf("%s=%q did not take effect: %+v", tt.env, tt.value, cfg)
			}
		})
	}
	t.Run("every setting has a case", func(t *testing.T) {
		for _, s := range Settings {
			found := false
			for _, tt := range tests {
				found = found || tt.env == s.Env()
			}
			if !found {
				t.Errorf("no override case for %s", s.Env())
			}
		}
	})
}

func TestEnvOverridesWithoutFile(t *testing.T) {
	cfg := mustParse(t, "", map[string]string{"CAPGATE_ENABLED": "true", "CAPGATE_PACKS_EVENTS": "true"})
	if !cfg.Enabled || !cfg.Packs["events"] {
		t.Errorf("got enabled=%v packs=%v", cfg.Enabled, cfg.Packs)
	}
}

func TestReferences(t *testing.T) {
	env := map[string]string{
		"CG_TEST_TOKEN":  "env-token-value",
		"CG_TEST_EMPTY":  "",
		"CG_TEST_N":      "42",
		"CG_TEST_ON":     "true",
		"CG_TEST_SECRET": `p@ss: "w'rd" # [x], {y} - *z &a !b |c >d %e`,
		"CG_TEST_HOST":   "db.internal",
	}
	cfg := mustParse(t, `
enabled: ${CG_TEST_ON}
max_results: ${CG_TEST_N}
data_dir: ${CG_TEST_UNSET:-/var/lib/default}
listen: "${CG_TEST_EMPTY:-127.0.0.1:7070}"
tokens:
  - ${CG_TEST_TOKEN}
  - {token: other-token, user_id: "u-${CG_TEST_EMPTY}-x"}
plugins:
  - name: db
    path: ${CG_TEST_UNSET:-bin}/db
    config:
      dsn: postgres://app:${CG_TEST_SECRET}@${CG_TEST_HOST}/app
      price: "$$5, $HOME and $"
      nested: [{Password: "${CG_TEST_SECRET}"}]
      count: 3
`, env)
	checks := []struct {
		name      string
		got, want any
	}{
		{"typed boolean", cfg.Enabled, true},
		{"typed integer", cfg.MaxResults, 42},
		{"default when unset", cfg.DataDir, "/var/lib/default"},
		{"default when empty", cfg.Listen, "127.0.0.1:7070"},
		{"token from variable", cfg.Tokens[0].SHA256, sum("env-token-value")},
		{"set but empty", cfg.Tokens[1].UserID, "u--x"},
		{"plugin path", cfg.Plugins[0].Path, "/etc/capgate/bin/db"},
		{"secret with YAML characters", cfg.Plugins[0].Config["dsn"], "postgres://app:" + env["CG_TEST_SECRET"] + "@db.internal/app"},
		{"escape and lone dollars", cfg.Plugins[0].Config["price"], "$5, $HOME and $"},
		{"nested", cfg.Plugins[0].Config["nested"], []any{map[string]any{"Password": env["CG_TEST_SECRET"]}}},
		{"non-strings untouched", cfg.Plugins[0].Config["count"], 3},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

// TestPluginConfigKeepsCase: viper would lower-case these keys; plugins
// see them exactly as written, merged anchors included.
func TestPluginConfigKeepsCase(t *testing.T) {
	cfg := mustParse(t, `
x-shared: &shared
  APIKey: k
  Region: eu-West-1
plugins:
  - name: crm
    path: crm
    config:
      <<: *shared
      Region: US-east-1
      baseURL: https://CRM.example.com
      Headers: {X-Tenant-ID: ACME, x-tenant-id: lower}
      list: [{CamelCase: 1}]
      "": empty key
      2024-01-01: date key
      when: 2024-01-01T10:00:00Z
      ratio: 0.5
      enabled: false
      nothing: null
`, nil)
	want := map[string]any{
		"APIKey":     "k",
		"Region":     "US-east-1",
		"baseURL":    "https://CRM.example.com",
		"Headers":    map[string]any{"X-Tenant-ID": "ACME", "x-tenant-id": "lower"},
		"list":       []any{map[string]any{"CamelCase": 1}},
		"":           "empty key",
		"2024-01-01": "date key",
		"when":       "2024-01-01T10:00:00Z",
		"ratio":      0.5,
		"enabled":    false,
		"nothing":    nil,
	}
	if got := cfg.Plugins[0].Config; !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	js, err := cfg.Plugins[0].ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"APIKey":"k"`, `"X-Tenant-ID":"ACME"`, `"CamelCase":1`, `"when":"2024-01-01T10:00:00Z"`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("ConfigJSON %s lacks %s", js, key)
		}
	}
}

func TestMergeKeys(t *testing.T) {
	cfg := mustParse(t, `
x-quiet: &quiet {level: error, format: text}
x-json: &json {format: json}
log:
  <<: [*json, *quiet]
http: &http
  request_timeout: 5s
`, nil)
	// Earlier merges win over later ones; a plain anchor needs no merge.
	if cfg.Log.Format != "json" || cfg.Log.Level != slog.LevelError || cfg.HTTP.RequestTimeout != 5*time.Second {
		t.Errorf("log %+v, http %+v", cfg.Log, cfg.HTTP)
	}
	cfg = mustParse(t, "x-a: &a {level: warn}\nlog: {<<: *a, level: debug}\n", nil)
	if cfg.Log.Level != slog.LevelDebug {
		t.Errorf("explicit key lost to a merged one: %v", cfg.Log.Level)
	}
}

func TestConfigJSON(t *testing.T) {
	tests := []struct {
		name string
		p    Plugin
		want string
	}{
		{"absent", Plugin{Name: "a"}, "{}"},
		{"empty", Plugin{Name: "a", Config: map[string]any{}}, "{}"},
		{"set", Plugin{Name: "a", Config: map[string]any{"B": []any{1, "x"}}}, `{"B":[1,"x"]}`},
	}
	for _, tt := range tests {
		got, err := tt.p.ConfigJSON()
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: got %s, %v; want %s", tt.name, got, err, tt.want)
		}
	}
	// Load refuses such a block; a Plugin built by hand can still hold one.
	_, err := Plugin{Name: "bad", Config: map[string]any{"f": func() {}}}.ConfigJSON()
	if err == nil || !strings.HasPrefix(err.Error(), `plugin "bad": encoding config as JSON: `) {
		t.Errorf("err = %v", err)
	}
}

func TestPluginPaths(t *testing.T) {
	yaml := "plugins:\n  - {name: rel, path: bin/rel, config: ~}\n  - {name: up, path: ../shared/./up}\n  - {name: abs, path: /usr/lib/capgate/abs}\n"
	tests := []struct {
		baseDir string
		want    []string
	}{
		{"/etc/capgate", []string{"/etc/capgate/bin/rel", "/etc/shared/up", "/usr/lib/capgate/abs"}},
		{"", []string{"bin/rel", "../shared/up", "/usr/lib/capgate/abs"}},
	}
	for _, tt := range tests {
		isolateEnv(t, nil)
		cfg, err := Parse([]byte(yaml), tt.baseDir)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range tt.want {
			if got := cfg.Plugins[i].Path; got != want {
				t.Errorf("baseDir %q: plugins[%d].path = %q, want %q", tt.baseDir, i, got, want)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	isolateEnv(t, nil)
	dir := t.TempDir()
	good := filepath.Join(dir, "conf", "capgate.yaml")
	if err := os.MkdirAll(filepath.Dir(good), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte("enabled: true\nplugins:\n  - {name: a, path: plugins/a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("max_results: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("a: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("relative path resolved against the file", func(t *testing.T) {
		t.Chdir(dir)
		cfg, err := Load("conf/capgate.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.File != good || cfg.Plugins[0].Path != filepath.Join(dir, "conf", "plugins", "a") || !cfg.Enabled {
			t.Errorf("File = %q, plugin path = %q", cfg.File, cfg.Plugins[0].Path)
		}
	})
	t.Run("problems carry the file", func(t *testing.T) {
		_, err := Load(bad)
		var cerr *Error
		if !errors.As(err, &cerr) || cerr.File != bad || err.Error() != "max_results: must be between 1 and 1000, got 0 (line 1)" {
			t.Errorf("err = %v (%T)", err, err)
		}
	})
	t.Run("syntax error names the file", func(t *testing.T) {
		_, err := Load(broken)
		if err == nil || !strings.HasPrefix(err.Error(), "config "+broken+": yaml: ") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope.yaml"))
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.yaml") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestPolicy(t *testing.T) {
	cfg := mustParse(t, "roles: {viewer: [booking.read]}\npacks: {booking: true}\n", nil)
	p := cfg.Policy()
	if !p.Packs["booking"] || p.Packs["llm"] || !reflect.DeepEqual(p.Roles, map[string][]string{"viewer": {"booking.read"}}) {
		t.Fatalf("policy %+v", p)
	}
	p.Packs["llm"] = true
	p.Roles["viewer"][0] = "changed"
	if cfg.Packs["llm"] || cfg.Roles["viewer"][0] != "booking.read" {
		t.Error("changing the policy changed the config")
	}
}

// TestPolicyRisk: the risk section reaches the gate's policy, as copies.
func TestPolicyRisk(t *testing.T) {
	cfg := mustParse(t, "risk:\n  capabilities: {booking.cancel: dangerous}\n  packs: {booking: review_required}\n", nil)
	p := cfg.Policy()
	want := dispatch.RiskPolicy{
		Capabilities: map[string]registry.Risk{"booking.cancel": registry.RiskDangerous},
		Packs:        map[string]registry.Risk{"booking": registry.RiskReviewRequired},
	}
	if !reflect.DeepEqual(p.Risk, want) {
		t.Fatalf("risk %+v, want %+v", p.Risk, want)
	}
	p.Risk.Packs["booking"] = registry.RiskSafe
	if cfg.Risk.Packs["booking"] != registry.RiskReviewRequired {
		t.Error("changing the policy changed the config")
	}
}

func TestTokenForms(t *testing.T) {
	cfg := mustParse(t, `
roles: {admin: ["*"]}
tokens:
  - 12345678
  - "padded+/token=="
  - {token: abcdefgh, role: "", scope: null, user_id: null}
  - {token: abcdefgh-2, role: null}
  - {token_sha256: `+strings.ToUpper(HashTokenForTest("from-hash"))+`, role: admin}
`, nil)
	want := []Token{
		{Index: 0, Label: "tokens-0", SHA256: sum("12345678"), Scope: dispatch.ScopeRead},
		{Index: 1, Label: "tokens-1", SHA256: sum("padded+/token=="), Scope: dispatch.ScopeRead},
		{Index: 2, Label: "tokens-2", SHA256: sum("abcdefgh"), Scope: dispatch.ScopeRead},
		{Index: 3, Label: "tokens-3", SHA256: sum("abcdefgh-2"), Scope: dispatch.ScopeRead},
		{Index: 4, Label: "tokens-4", SHA256: sum("from-hash"), Role: "admin", Scope: dispatch.ScopeRead},
	}
	if !reflect.DeepEqual(cfg.Tokens, want) {
		t.Errorf("got  %+v\nwant %+v", cfg.Tokens, want)
	}
}

func TestCheckToken(t *testing.T) {
	tests := []struct {
		tok  string
		want error
	}{
		{"abcdefgh", nil},
		{"A-Z.a_z~0+9/xy", nil},
		{"abcdefgh==", nil},
		{strings.Repeat("a", MaxTokenLength), nil},
		{"", ErrTokenTooShort},
		{"abcdefg", ErrTokenTooShort},
		{strings.Repeat("a", MaxTokenLength+1), ErrTokenTooLong},
		{"========", ErrTokenSyntax},
		{"abc=defgh", ErrTokenSyntax},
		{"abc defgh", ErrTokenSyntax},
		{"abcdefgh\n", ErrTokenSyntax},
		{"abcdéfgh", ErrTokenSyntax},
	}
	for _, tt := range tests {
		if got := CheckToken(tt.tok); got != tt.want {
			t.Errorf("CheckToken(%q) = %v, want %v", tt.tok, got, tt.want)
		}
	}
}

func TestProblemText(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Path: "a", Message: "bad"}, "a: bad"},
		{Problem{Path: "a.b", Message: "bad", Line: 3}, "a.b: bad (line 3)"},
		{Problem{Path: "a", Message: "bad", Line: 3, Env: "CAPGATE_A"}, "a: bad (from CAPGATE_A)"},
	}
	for _, tt := range tests {
		if got := tt.p.Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
	err := error(&Error{Problems: []*Problem{{Path: "x", Message: "one"}, {Path: "y", Message: "two"}}})
	var p *Problem
	if !errors.As(err, &p) || p.Path != "x" || err.Error() != "x: one\ny: two" {
		t.Errorf("errors.As = %v, text %q", p, err)
	}
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"enabled":             "CAPGATE_ENABLED",
		"http.max_body_bytes": "CAPGATE_HTTP_MAX_BODY_BYTES",
		"packs.crm_sync":      "CAPGATE_PACKS_CRM_SYNC",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestGovernancePolicy: the switches, limits and labels reach the gate's
// policy as written, with a burst defaulting to the rate's count.
func TestGovernancePolicy(t *testing.T) {
	isolateEnv(t, nil)
	cfg, err := Parse([]byte(`
actions_enabled: false
disabled_capabilities: [booking.cancel, booking.cancel, llm.ask, echo_text]
roles: {viewer: [booking.read]}
tokens: [{token: abcdefgh, label: desk-1, role: viewer}]
limits:
  default: {rate: 20/s, burst: 40}
  per_token: {rate: 50/s}
  roles: {viewer: {rate: 10/m}}
  capabilities: {booking.create: {rate: 5/h, burst: 1}, echo_text: {rate: 1/s}}
`), "")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy()
	want := dispatch.Limits{
		Default:      dispatch.Rate{Count: 20, Per: time.Second, Burst: 40},
		PerToken:     dispatch.Rate{Count: 50, Per: time.Second},
		Roles:        map[string]dispatch.Rate{"viewer": {Count: 10, Per: time.Minute}},
		Capabilities: map[string]dispatch.Rate{"booking.create": {Count: 5, Per: time.Hour, Burst: 1}, "echo_text": {Count: 1, Per: time.Second}},
	}
	if !p.ActionsOff || !slices.Equal(p.DisabledCapabilities, []string{"booking.cancel", "llm.ask", "echo_text"}) || !reflect.DeepEqual(p.Limits, want) {
		t.Errorf("policy = %+v\nwant limits %+v", p, want)
	}
	if got := cfg.Tokens[0].Label; got != "desk-1" {
		t.Errorf("label = %q", got)
	}
	// The policy is a copy: changing it leaves the config alone.
	p.Limits.Roles["viewer"] = dispatch.Rate{}
	p.DisabledCapabilities[0] = "x.y"
	if cfg.Limits.Roles["viewer"].Count != 10 || cfg.DisabledCapabilities[0] != "booking.cancel" {
		t.Error("Policy shares its maps or slices with the config")
	}
}
