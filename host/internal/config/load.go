package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/capgate/capgate/host/internal/catalogue"
	"github.com/capgate/capgate/host/internal/events"
	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
	"github.com/capgate/capgate/internal/registry"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk/sqlstore"
)

// EnvPrefix starts every environment variable the configuration reads.
const EnvPrefix = "CAPGATE_"

// EnvName is the environment variable that overrides the setting at the
// dotted key path, e.g. "http.max_body_bytes" -> CAPGATE_HTTP_MAX_BODY_BYTES.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

type kind uint8

const (
	kindString kind = iota
	kindBool
	kindInt
	kindDuration
	kindFloat
)

func (k kind) want() string {
	switch k {
	case kindBool:
		return "true or false"
	case kindInt:
		return "an integer"
	case kindDuration:
		return `a duration such as "30s" or "1m30s"`
	case kindFloat:
		return "a number"
	}
	return "a string"
}

// convert turns a file or environment value into the setting's Go type.
// Strings are parsed for every kind: environment values are always strings,
// and so is a file value written as "${VAR}".
func (k kind) convert(v any) (any, bool) {
	switch k {
	case kindString:
		s, ok := v.(string)
		return s, ok
	case kindBool:
		switch v := v.(type) {
		case bool:
			return v, true
		case string:
			b, err := strconv.ParseBool(v)
			return b, err == nil
		}
	case kindInt:
		switch v := v.(type) {
		case int:
			return int64(v), true
		case int64:
			return v, true
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	case kindDuration:
		if s, ok := v.(string); ok {
			d, err := time.ParseDuration(s)
			return d, err == nil
		}
	case kindFloat:
		switch v := v.(type) {
		case float64:
			return v, true
		case int:
			return float64(v), true
		case int64:
			return float64(v), true
		case string:
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
		}
	}
	return nil, false
}

// Setting is one scalar key that an environment variable can override.
type Setting struct {
	// Key is the dotted key path, e.g. "http.request_timeout".
	Key string
	// Default is the value used when neither file nor environment sets it,
	// as it would be written in the file.
	Default string
	kind    kind
	def     any
}

// Env is the variable that overrides the setting.
func (s Setting) Env() string { return EnvName(s.Key) }

// Settings lists every scalar setting in file order. Packs are overridden
// by CAPGATE_PACKS_<NAME> in addition.
var Settings = []Setting{
	{Key: "enabled", Default: "false", kind: kindBool, def: false},
	{Key: "actions_enabled", Default: "true", kind: kindBool, def: true},
	{Key: "listen", Default: "127.0.0.1:8080", kind: kindString, def: "127.0.0.1:8080"},
	{Key: "data_dir", Default: "./data", kind: kindString, def: "./data"},
	{Key: "default_scope", Default: "read", kind: kindString, def: "read"},
	{Key: "default_role", Default: "", kind: kindString, def: ""},
	{Key: "max_results", Default: "20", kind: kindInt, def: 20},
	{Key: "events_buffer_size", Default: "1000", kind: kindInt, def: 1000},
	{Key: "max_result_bytes", Default: strconv.Itoa(pluginhost.DefaultMaxResultBytes), kind: kindInt, def: pluginhost.DefaultMaxResultBytes},
	{Key: "http.max_body_bytes", Default: "1048576", kind: kindInt, def: 1 << 20},
	{Key: "http.request_timeout", Default: "30s", kind: kindDuration, def: "30s"},
	{Key: "http.shutdown_timeout", Default: "15s", kind: kindDuration, def: "15s"},
	{Key: "http.max_in_flight", Default: strconv.Itoa(DefaultHTTPMaxInFlight), kind: kindInt, def: DefaultHTTPMaxInFlight},
	{Key: "http.trusted_proxy_header", Default: "", kind: kindString, def: ""},
	{Key: "log.level", Default: "info", kind: kindString, def: "info"},
	{Key: "log.format", Default: "text", kind: kindString, def: "text"},
	{Key: "events.nats_url", Default: "", kind: kindString, def: ""},
	{Key: "events.stream", Default: "CAPGATE_EVENTS", kind: kindString, def: "CAPGATE_EVENTS"},
	{Key: "database.dsn", Default: "", kind: kindString, def: ""},
	{Key: "idempotency.retention", Default: "24h", kind: kindDuration, def: "24h"},
	{Key: "audit.enabled", Default: "true", kind: kindBool, def: true},
	{Key: "audit.retention", Default: "720h", kind: kindDuration, def: "720h"},
	{Key: "audit.on_unavailable", Default: "refuse_actions", kind: kindString, def: "refuse_actions"},
	{Key: "refusals.ownership", Default: "distinct", kind: kindString, def: "distinct"},
	{Key: "approvals.ttl", Default: "24h", kind: kindDuration, def: "24h"},
	{Key: "approvals.four_eyes", Default: "true", kind: kindBool, def: true},
	{Key: "approvals.confirm_ttl", Default: "10m", kind: kindDuration, def: "10m"},
	{Key: "approvals.confirm_key", Default: "", kind: kindString, def: ""},
	{Key: "approvals.max_pending", Default: "20", kind: kindInt, def: 20},
	{Key: "tasks.enabled", Default: "true", kind: kindBool, def: true},
	{Key: "tasks.ttl", Default: "1h", kind: kindDuration, def: "1h"},
	{Key: "tasks.run_timeout", Default: "30m", kind: kindDuration, def: "30m"},
	{Key: "tasks.max_per_principal", Default: "16", kind: kindInt, def: 16},
	{Key: "tasks.poll_interval", Default: "1s", kind: kindDuration, def: "1s"},
	{Key: "metrics.listen", Default: "", kind: kindString, def: ""},
	{Key: "tracing.otlp_endpoint", Default: "", kind: kindString, def: ""},
	{Key: "tracing.otlp_protocol", Default: OTLPHTTP, kind: kindString, def: OTLPHTTP},
	{Key: "tracing.sample_ratio", Default: "1", kind: kindFloat, def: 1.0},
	{Key: "tracing.service_name", Default: "capgate", kind: kindString, def: "capgate"},
	{Key: "auth.oauth.issuer", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.resource", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.audience", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.jwks_url", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.clock_skew", Default: "60s", kind: kindDuration, def: "60s"},
	{Key: "auth.oauth.jwks_refresh_interval", Default: "15m", kind: kindDuration, def: "15m"},
	{Key: "auth.oauth.jwks_min_refresh_interval", Default: "30s", kind: kindDuration, def: "30s"},
	{Key: "auth.oauth.user_claim", Default: "sub", kind: kindString, def: "sub"},
	{Key: "auth.oauth.role_claim", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.default_role", Default: "", kind: kindString, def: ""},
	{Key: "auth.oauth.scopes.read", Default: "capgate:read", kind: kindString, def: "capgate:read"},
	{Key: "auth.oauth.scopes.action", Default: "capgate:action", kind: kindString, def: "capgate:action"},
	{Key: "auth.oauth.scopes.admin", Default: "capgate:admin", kind: kindString, def: "capgate:admin"},
	{Key: "auth.oauth.resource_name", Default: "capgate", kind: kindString, def: "capgate"},
}

// DefaultHTTPMaxInFlight is http.max_in_flight's default: with the default
// 1 MiB body limit, the requests the host holds at once take at most a
// gigabyte however many clients connect.
const DefaultHTTPMaxInFlight = 1024

var (
	// packName excludes "-" so CAPGATE_PACKS_<NAME> maps back to one name.
	packName   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	roleName   = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	pluginName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	permission = regexp.MustCompile(`^(\*|[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*(\.\*)?)$`)
	hexDigest  = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	tokenLabel = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

const maxBodyLimit = 64 << 20

var (
	topKeys          = []string{"enabled", "listen", "data_dir", "tokens", "roles", "packs", "default_scope", "default_role", "max_results", "events_buffer_size", "max_result_bytes", "http", "log", "search", "events", "database", "idempotency", "plugins", "actions_enabled", "disabled_capabilities", "limits", "audit", "refusals", "risk", "approvals", "tasks", "metrics", "tracing", "auth"}
	httpKeys         = []string{"max_body_bytes", "request_timeout", "shutdown_timeout", "max_in_flight", "allowed_origins", "trusted_proxies", "trusted_proxy_header"}
	databaseKeys     = []string{"dsn"}
	idempotencyKeys  = []string{"retention"}
	auditKeys        = []string{"enabled", "retention", "on_unavailable"}
	refusalsKeys     = []string{"ownership"}
	approvalsKeys    = []string{"ttl", "four_eyes", "confirm_ttl", "confirm_key", "max_pending"}
	tasksKeys        = []string{"enabled", "ttl", "run_timeout", "max_per_principal", "poll_interval"}
	pluginRestartKey = []string{"initial_backoff", "max_backoff", "jitter", "max_restarts", "window"}
	logKeys          = []string{"level", "format"}
	searchKeys       = []string{"blocked_entities"}
	eventsKeys       = []string{"nats_url", "stream"}
	metricsKeys      = []string{"listen", "allowed_hosts"}
	tracingKeys      = []string{"otlp_endpoint", "otlp_protocol", "headers", "sample_ratio", "service_name"}
	authKeys         = []string{"oauth"}
	oauthKeys        = []string{"issuer", "resource", "audience", "jwks_url", "algorithms", "clock_skew", "jwks_refresh_interval", "jwks_min_refresh_interval", "user_claim", "role_claim", "default_role", "scopes", "scopes_supported", "resource_name"}
	oauthScopeKeys   = []string{"read", "action", "admin"}
	tokenKeys        = []string{"token", "token_sha256", "label", "role", "scope", "user_id"}
	limitsKeys       = []string{"default", "per_token", "roles", "capabilities", "redis_url", "on_redis_error"}
	rateKeys         = []string{"rate", "burst"}
	riskKeys         = []string{"capabilities", "packs", "in_band"}
	inBandKeys       = []string{"capabilities", "packs"}
	pluginKeys       = []string{"name", "path", "sha256", "env", "max_in_flight", "restart", "run_as", "config"}
)

// source is where a setting's winning value came from.
type source struct {
	env  string
	line int
}

type loader struct {
	baseDir  string
	problems []*Problem

	// file holds the scalar settings found in the file, by dotted key, and
	// lines where each was written.
	file  map[string]any
	lines map[string]int
	v     *viper.Viper

	// nodes is how many more values plugin config blocks may expand to;
	// aliases of aliases can otherwise multiply a small file into billions.
	nodes int

	// pluginAt is where plugins sit under plugins, by name and by the name
	// of the bundled plugin binary they run (capgate-plugin-<name>); the
	// first entry wins.
	pluginAt map[string]int
}

// movedKeys are top-level keys that became a plugin's own: an operator
// still setting one is told where it went rather than that it is unknown.
var movedKeys = map[string]movedKey{
	"llm_connection_slug": {plugin: "llm", key: "connection"},
}

// movedKey is the plugin config key a top-level key moved to.
type movedKey struct{ plugin, key string }

func (l *loader) addf(path string, line int, format string, args ...any) {
	l.problems = append(l.problems, &Problem{Path: path, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) addAt(path string, src source, format string, args ...any) {
	l.problems = append(l.problems, &Problem{Path: path, Line: src.line, Env: src.env, Message: fmt.Sprintf(format, args...)})
}

func parse(data []byte, baseDir, file string) (*Config, error) {
	doc, err := decodeYAML(data)
	if err != nil {
		if file != "" {
			return nil, fmt.Errorf("config %s: %w", file, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	l := &loader{
		baseDir: baseDir,
		file:    map[string]any{},
		lines:   map[string]int{},
		nodes:   maxFreeformNodes,

		pluginAt: map[string]int{},
	}
	cfg := l.load(doc)
	if len(l.problems) > 0 {
		// File order reads best; problems with no line (environment) last.
		slices.SortStableFunc(l.problems, func(a, b *Problem) int {
			return cmp.Compare(lineOrder(a), lineOrder(b))
		})
		return nil, &Error{File: file, Problems: l.problems}
	}
	cfg.File = file
	return cfg, nil
}

func lineOrder(p *Problem) int {
	if p.Line == 0 {
		return math.MaxInt
	}
	return p.Line
}

func (l *loader) load(doc *yaml.Node) *Config {
	sections := map[string]*yaml.Node{}
	var moved []pair
	if doc != nil && len(doc.Content) > 0 {
		root := resolve(doc.Content[0])
		switch {
		case isNull(root):
		case root.Kind != yaml.MappingNode:
			l.addf("(top level)", root.Line, "must be a mapping of settings, got %s", describe(root))
		default:
			for _, p := range l.pairs("", root, 0) {
				if strings.HasPrefix(p.key, "x-") {
					continue // an extension block, a place to define YAML anchors
				}
				if _, ok := movedKeys[p.key]; ok {
					moved = append(moved, p) // reported once plugins are read
					continue
				}
				if !slices.Contains(topKeys, p.key) {
					l.unknown(p, topKeys)
					continue
				}
				sections[p.key] = p.val
			}
		}
	}

	for _, s := range Settings {
		if !strings.Contains(s.Key, ".") {
			if n, ok := sections[s.Key]; ok {
				l.fileScalar(s, n)
			}
		}
	}
	var origins []string
	var proxies []netip.Prefix
	proxiesLine := 0
	if pairs, _ := l.mapping("http", sections["http"]); pairs != nil {
		for _, p := range pairs {
			switch p.key {
			case "allowed_origins":
				origins = l.origins(p.path, p.val)
			case "trusted_proxies":
				proxies, proxiesLine = l.trustedProxies(p.path, p.val), p.keyNode.Line
			case "max_body_bytes", "request_timeout", "shutdown_timeout", "max_in_flight", "trusted_proxy_header":
				l.fileScalar(settingFor("http."+p.key), p.val)
			default:
				l.unknown(p, httpKeys)
			}
		}
	}
	if pairs, _ := l.mapping("log", sections["log"]); pairs != nil {
		for _, p := range pairs {
			if !slices.Contains(logKeys, p.key) {
				l.unknown(p, logKeys)
				continue
			}
			l.fileScalar(settingFor("log."+p.key), p.val)
		}
	}
	l.scalarSection("events", sections["events"], eventsKeys)
	metricsHosts := l.metricsSection(sections["metrics"])
	var traceHeaders map[string]string
	if pairs, _ := l.mapping("tracing", sections["tracing"]); pairs != nil {
		for _, p := range pairs {
			switch p.key {
			case "headers":
				traceHeaders = l.traceHeaders(p.path, p.val)
			case "otlp_endpoint", "otlp_protocol", "sample_ratio", "service_name":
				l.fileScalar(settingFor("tracing."+p.key), p.val)
			default:
				l.unknown(p, tracingKeys)
			}
		}
	}
	oauthLists := l.authSection(sections["auth"])
	l.scalarSection("database", sections["database"], databaseKeys)
	l.scalarSection("idempotency", sections["idempotency"], idempotencyKeys)
	l.scalarSection("audit", sections["audit"], auditKeys)
	l.scalarSection("refusals", sections["refusals"], refusalsKeys)
	l.scalarSection("approvals", sections["approvals"], approvalsKeys)
	l.scalarSection("tasks", sections["tasks"], tasksKeys)
	packNames := l.filePacks(sections["packs"])
	roles := l.roles(sections["roles"])

	l.layer(packNames)
	var search Search
	if pairs, _ := l.mapping("search", sections["search"]); pairs != nil {
		for _, p := range pairs {
			switch p.key {
			case "blocked_entities":
				search.BlockedEntities = l.blockedEntities(p.path, p.val)
			default:
				l.unknown(p, searchKeys)
			}
		}
	}
	cfg := &Config{Roles: roles, HTTP: HTTP{AllowedOrigins: origins, TrustedProxies: proxies}, Search: search, Tracing: Tracing{Headers: traceHeaders},
		Metrics: Metrics{AllowedHosts: metricsHosts}}
	cfg.DisabledCapabilities = l.capabilityNames("disabled_capabilities", sections["disabled_capabilities"])
	cfg.Limits, cfg.LimitsCounter = l.limits(sections["limits"], roles)
	cfg.Risk, cfg.InBand = l.risk(sections["risk"])
	l.resolveSettings(cfg)
	l.proxyHeader(cfg, proxiesLine)
	l.oauth(cfg, oauthLists)
	cfg.Packs = map[string]bool{}
	for _, name := range packNames {
		key := "packs." + name
		if v, ok := l.setting(key, kindBool); ok {
			cfg.Packs[name] = v.(bool)
		}
	}
	cfg.Tokens = l.tokens(sections["tokens"], cfg)
	cfg.Plugins = l.plugins(sections["plugins"])
	for _, p := range moved {
		l.movedKey(p)
	}
	return cfg
}

// movedKey reports a top-level key that moved into a plugin's config,
// naming the place it goes in this file, with its value.
func (l *loader) movedKey(p pair) {
	m := movedKeys[p.key]
	value := ""
	if v := resolve(p.val); v.Kind == yaml.ScalarNode && !isNull(v) && v.Value != "" {
		value = ": " + v.Value
	}
	if i, ok := l.pluginAt[m.plugin]; ok {
		l.addf(p.path, p.keyNode.Line, "moved to the %s plugin's config: remove it here and set %s%s",
			m.plugin, child(child(index("plugins", i), "config"), m.key), value)
		return
	}
	l.addf(p.path, p.keyNode.Line, "moved to the %s plugin's config: remove it here and set config.%s%s in the %s plugin's entry under plugins",
		m.plugin, m.key, value, m.plugin)
}

// placePlugin records that the plugin named name is plugins[i], unless
// an earlier entry is.
func (l *loader) placePlugin(name string, i int) {
	if _, ok := l.pluginAt[name]; !ok {
		l.pluginAt[name] = i
	}
}

// scalarSection records a section whose keys are all scalar settings.
func (l *loader) scalarSection(name string, n *yaml.Node, known []string) {
	pairs, _ := l.mapping(name, n)
	for _, p := range pairs {
		if !slices.Contains(known, p.key) {
			l.unknown(p, known)
			continue
		}
		l.fileScalar(settingFor(name+"."+p.key), p.val)
	}
}

func settingFor(key string) Setting {
	for _, s := range Settings {
		if s.Key == key {
			return s
		}
	}
	panic("config: no setting " + key)
}

// fileScalar records a scalar setting's file value for the viper layer.
func (l *loader) fileScalar(s Setting, n *yaml.Node) {
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode {
		l.addf(s.Key, n.Line, "must be %s, got %s", s.kind.want(), describe(n))
		return
	}
	v, ok := l.scalarValue(s.Key, n)
	if !ok {
		return
	}
	l.file[s.Key] = v
	l.lines[s.Key] = n.Line
}

// filePacks records the packs set in the file and returns every pack name
// known: built-in, from the file, and from CAPGATE_PACKS_* variables.
func (l *loader) filePacks(n *yaml.Node) []string {
	names := slices.Clone(BuiltinPacks)
	pairs, _ := l.mapping("packs", n)
	for _, p := range pairs {
		if !packName.MatchString(p.key) {
			l.addf(p.path, p.keyNode.Line, "pack name must match [a-z][a-z0-9_]*")
			continue
		}
		val := resolve(p.val)
		if !isNull(val) && val.Kind != yaml.ScalarNode {
			l.addf(p.path, val.Line, "must be true or false, got %s", describe(val))
		} else if !isNull(val) {
			if v, ok := l.scalarValue(p.path, val); ok {
				l.file["packs."+p.key] = v
				l.lines["packs."+p.key] = val.Line
			}
		}
		if !slices.Contains(names, p.key) {
			names = append(names, p.key)
		}
	}
	prefix := EnvPrefix + "PACKS_"
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, prefix) || len(k) == len(prefix) {
			continue
		}
		name := strings.ToLower(k[len(prefix):])
		if k != EnvName("packs."+name) {
			// Only the upper-case spelling is bound, so a lower-case one
			// would be silently ignored.
			l.addAt("packs."+name, source{env: k}, "write the variable in upper case, as %s", EnvName("packs."+name))
			continue
		}
		if !packName.MatchString(name) {
			l.addAt("packs."+name, source{env: k}, "pack name must match [a-z][a-z0-9_]*")
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// layer stacks defaults, file values and environment variables in viper.
func (l *loader) layer(packNames []string) {
	v := viper.New()
	for _, s := range Settings {
		v.SetDefault(s.Key, s.def)
		_ = v.BindEnv(s.Key, s.Env()) // only fails without a key
	}
	for _, name := range packNames {
		key := "packs." + name
		v.SetDefault(key, false)
		_ = v.BindEnv(key, EnvName(key))
	}
	nested := map[string]any{}
	for key, val := range l.file {
		m := nested
		parts := strings.Split(key, ".")
		for _, part := range parts[:len(parts)-1] {
			sub, ok := m[part].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[part] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = val
	}
	_ = v.MergeConfigMap(nested) // never fails
	l.v = v
}

// source says where key's winning value came from; it mirrors viper's
// precedence, which skips empty variables.
func (l *loader) source(key string) source {
	env := EnvName(key)
	if val, ok := os.LookupEnv(env); ok && val != "" {
		return source{env: env}
	}
	return source{line: l.lines[key]}
}

// setting returns key's winning value converted to k, reporting a problem
// when it does not convert.
func (l *loader) setting(key string, k kind) (any, bool) {
	raw := l.v.Get(key)
	v, ok := k.convert(raw)
	if !ok {
		l.addAt(key, l.source(key), "must be %s, got %s", k.want(), describeValue(raw))
	}
	return v, ok
}

func (l *loader) resolveSettings(cfg *Config) {
	get := func(key string) (any, source, bool) {
		v, ok := l.setting(key, settingFor(key).kind)
		return v, l.source(key), ok
	}
	if v, _, ok := get("enabled"); ok {
		cfg.Enabled = v.(bool)
	}
	if v, _, ok := get("actions_enabled"); ok {
		cfg.ActionsEnabled = v.(bool)
	}
	if v, src, ok := get("listen"); ok {
		cfg.Listen = v.(string)
		if msg := checkListen(cfg.Listen); msg != "" {
			l.addAt("listen", src, "%s", msg)
		}
	}
	if v, src, ok := get("metrics.listen"); ok && v.(string) != "" {
		cfg.Metrics.Listen = v.(string)
		switch msg := checkListen(cfg.Metrics.Listen); {
		case msg != "":
			l.addAt("metrics.listen", src, "%s", msg)
		case cfg.Metrics.Listen == cfg.Listen:
			l.addAt("metrics.listen", src, "must differ from listen (%s): metrics and profiles are served apart from the MCP endpoint", cfg.Listen)
		}
	}
	l.tracing(cfg, get)
	if v, src, ok := get("data_dir"); ok {
		if cfg.DataDir = v.(string); cfg.DataDir == "" {
			l.addAt("data_dir", src, "must not be empty")
		}
	}
	cfg.DefaultScope = dispatch.ScopeRead
	if v, src, ok := get("default_scope"); ok {
		if s := dispatch.Scope(v.(string)); s.Valid() {
			cfg.DefaultScope = s
		} else {
			l.addAt("default_scope", src, "must be one of read, action, admin, got %q", s)
		}
	}
	if v, src, ok := get("default_role"); ok {
		cfg.DefaultRole = v.(string)
		if cfg.DefaultRole != "" {
			if _, defined := cfg.Roles[cfg.DefaultRole]; !defined {
				l.addAt("default_role", src, "%s", undefinedRole(cfg.DefaultRole, cfg.Roles))
			}
		}
	}
	intIn := func(key string, lo, hi int64) int64 {
		v, src, ok := get(key)
		if !ok {
			return 0
		}
		n := v.(int64)
		if n < lo || n > hi {
			l.addAt(key, src, "must be between %d and %d, got %d", lo, hi, n)
		}
		return n
	}
	cfg.MaxResults = int(intIn("max_results", 1, 1000))
	cfg.EventsBufferSize = int(intIn("events_buffer_size", 1, 1_000_000))
	cfg.HTTP.MaxBodyBytes = intIn("http.max_body_bytes", 1, maxBodyLimit)
	cfg.HTTP.MaxInFlight = int(intIn("http.max_in_flight", 1, 1_000_000))
	cfg.MaxResultBytes = int(intIn("max_result_bytes", 1024, maxBodyLimit))
	positive := func(key string) time.Duration {
		v, src, ok := get(key)
		if !ok {
			return 0
		}
		d := v.(time.Duration)
		if d <= 0 {
			l.addAt(key, src, "must be greater than zero, got %s", d)
		}
		return d
	}
	cfg.HTTP.RequestTimeout = positive("http.request_timeout")
	cfg.HTTP.ShutdownTimeout = positive("http.shutdown_timeout")
	cfg.Idempotency.Retention = positive("idempotency.retention")
	cfg.Audit.Retention = positive("audit.retention")
	if cfg.Approvals.TTL = positive("approvals.ttl"); cfg.Approvals.TTL > 0 && cfg.Approvals.TTL < time.Minute {
		v, src, _ := get("approvals.ttl")
		l.addAt("approvals.ttl", src, "must be at least a minute, so a human has time to decide, got %s", v)
	}
	if v, _, ok := get("approvals.four_eyes"); ok {
		cfg.Approvals.FourEyes = v.(bool)
	}
	if cfg.Approvals.ConfirmTTL = positive("approvals.confirm_ttl"); cfg.Approvals.ConfirmTTL > 0 &&
		(cfg.Approvals.ConfirmTTL < 30*time.Second || cfg.Approvals.ConfirmTTL > 24*time.Hour) {
		v, src, _ := get("approvals.confirm_ttl")
		l.addAt("approvals.confirm_ttl", src, "must be between 30s (time for the user to read the question) and 24h, got %s", v)
	}
	if v, src, ok := get("approvals.confirm_key"); ok {
		// The key is a secret: a problem names its length, never its value.
		if cfg.Approvals.ConfirmKey = v.(string); cfg.Approvals.ConfirmKey != "" && len(cfg.Approvals.ConfirmKey) < 32 {
			l.addAt("approvals.confirm_key", src, "must be at least 32 bytes (a random one: openssl rand -base64 32), got %d; leave it empty to use a key kept in the approvals database", len(cfg.Approvals.ConfirmKey))
		}
	}
	cfg.Approvals.MaxPending = int(intIn("approvals.max_pending", 1, 10_000))
	if v, _, ok := get("tasks.enabled"); ok {
		cfg.Tasks.Enabled = v.(bool)
	}
	if cfg.Tasks.TTL = positive("tasks.ttl"); cfg.Tasks.TTL > 0 && (cfg.Tasks.TTL < time.Minute || cfg.Tasks.TTL > 30*24*time.Hour) {
		v, src, _ := get("tasks.ttl")
		l.addAt("tasks.ttl", src, "must be between 1m (time for a client to poll) and 720h, got %s", v)
	}
	if cfg.Tasks.RunTimeout = positive("tasks.run_timeout"); cfg.Tasks.RunTimeout > 0 && cfg.Tasks.TTL > 0 && cfg.Tasks.RunTimeout > cfg.Tasks.TTL {
		v, src, _ := get("tasks.run_timeout")
		l.addAt("tasks.run_timeout", src, "must not exceed tasks.ttl (%s): a task must outlive its run, got %s", cfg.Tasks.TTL, v)
	}
	cfg.Tasks.MaxPerPrincipal = int(intIn("tasks.max_per_principal", 1, 10_000))
	if cfg.Tasks.PollInterval = positive("tasks.poll_interval"); cfg.Tasks.PollInterval > 0 &&
		(cfg.Tasks.PollInterval < 100*time.Millisecond || cfg.Tasks.PollInterval > time.Minute) {
		v, src, _ := get("tasks.poll_interval")
		l.addAt("tasks.poll_interval", src, "must be between 100ms and 1m, got %s", v)
	}
	if v, _, ok := get("audit.enabled"); ok {
		cfg.Audit.Enabled = v.(bool)
	}
	if v, src, ok := get("audit.on_unavailable"); ok {
		switch v.(string) {
		case "refuse_actions":
			cfg.Audit.RefuseActions = true
		case "allow":
		default:
			l.addAt("audit.on_unavailable", src, "must be refuse_actions (actions are refused while the audit trail cannot be written; reads carry on) or allow (calls carry on unrecorded), got %q", shorten(v.(string)))
		}
	}
	if v, src, ok := get("refusals.ownership"); ok {
		switch v.(string) {
		case "distinct":
		case "not_found":
			cfg.OwnershipAsMissing = true
		default:
			l.addAt("refusals.ownership", src, "must be distinct (another user's target is refused at step ownership) or not_found (it answers exactly as a target that does not exist), got %q", shorten(v.(string)))
		}
	}
	if v, src, ok := get("database.dsn"); ok {
		cfg.Database.DSN = v.(string)
		if msg := checkDSN(cfg.Database.DSN); msg != "" {
			l.addAt("database.dsn", src, "%s", msg)
		}
	}
	if v, src, ok := get("log.level"); ok {
		switch strings.ToLower(v.(string)) {
		case "debug":
			cfg.Log.Level = slog.LevelDebug
		case "info":
			cfg.Log.Level = slog.LevelInfo
		case "warn":
			cfg.Log.Level = slog.LevelWarn
		case "error":
			cfg.Log.Level = slog.LevelError
		default:
			l.addAt("log.level", src, "must be one of debug, info, warn, error, got %q", v)
		}
	}
	if v, src, ok := get("log.format"); ok {
		switch f := strings.ToLower(v.(string)); f {
		case "text", "json":
			cfg.Log.Format = f
		default:
			l.addAt("log.format", src, "must be text or json, got %q", v)
		}
	}
	if v, src, ok := get("events.nats_url"); ok {
		cfg.Events.NATSURL = v.(string)
		if msg := checkNATSURL(cfg.Events.NATSURL); msg != "" {
			l.addAt("events.nats_url", src, "%s", msg)
		}
	}
	if v, src, ok := get("events.stream"); ok {
		cfg.Events.Stream = v.(string)
		if !events.ValidStreamName(cfg.Events.Stream) {
			l.addAt("events.stream", src, "must be 1 to 64 letters, digits, '-' or '_', got %q", cfg.Events.Stream)
		}
	}
}

// tracing resolves and checks the tracing section's settings.
func (l *loader) tracing(cfg *Config, get func(string) (any, source, bool)) {
	t := &cfg.Tracing
	if v, src, ok := get("tracing.otlp_protocol"); ok {
		switch p := strings.ToLower(v.(string)); p {
		case OTLPGRPC, OTLPHTTP:
			t.OTLPProtocol = p
		default:
			l.addAt("tracing.otlp_protocol", src, "must be %s or %s, got %q", OTLPGRPC, OTLPHTTP, shorten(v.(string)))
		}
	}
	if v, src, ok := get("tracing.otlp_endpoint"); ok {
		t.OTLPEndpoint = v.(string)
		if msg := checkOTLPEndpoint(t.OTLPEndpoint, t.OTLPProtocol); msg != "" {
			l.addAt("tracing.otlp_endpoint", src, "%s", msg)
		}
	}
	if v, src, ok := get("tracing.sample_ratio"); ok {
		if t.SampleRatio = v.(float64); t.SampleRatio < 0 || t.SampleRatio > 1 {
			l.addAt("tracing.sample_ratio", src, "must be between 0 (record no trace the host starts) and 1 (every one), got %g", t.SampleRatio)
		}
	}
	if v, src, ok := get("tracing.service_name"); ok {
		t.ServiceName = v.(string)
		if t.ServiceName == "" || len(t.ServiceName) > 255 || strings.ContainsFunc(t.ServiceName, unicode.IsControl) {
			l.addAt("tracing.service_name", src, "must be 1 to 255 characters, none a control character, got %q", shorten(t.ServiceName))
		}
	}
}

// checkOTLPEndpoint accepts "" (no tracing) or a collector's http:// or
// https:// URL; over gRPC it has no path. The message never repeats a URL
// that carries credentials.
func checkOTLPEndpoint(s, protocol string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return fmt.Sprintf("must be empty (no tracing) or a collector's URL such as http://127.0.0.1:4318 (plaintext) or https://collector.example.com:4318 (TLS), got %q", shorten(s))
	case u.User != nil:
		return "must not carry credentials: send them in tracing.headers"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("scheme must be http (plaintext) or https (TLS), got %q", u.Scheme)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Sprintf("must have no query or fragment, got %q", s)
	case protocol == OTLPGRPC && u.Path != "" && u.Path != "/":
		return fmt.Sprintf("has a path (%s), which OTLP over gRPC does not use: give scheme, host and port, such as http://127.0.0.1:4317", u.Path)
	}
	if _, err := strconv.ParseUint(cmp.Or(u.Port(), "0"), 10, 16); err != nil {
		return fmt.Sprintf("port must be a number from 0 to 65535, got %q", u.Port())
	}
	return ""
}

// headerName is an HTTP header field name (RFC 9110 token).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

// Bounds on tracing.headers.
const (
	maxTraceHeaders     = 32
	maxTraceHeaderValue = 4096
)

// traceHeaders reads tracing.headers: names are header names, and values,
// which may be secrets, are never repeated in a problem.
func (l *loader) traceHeaders(path string, n *yaml.Node) map[string]string {
	pairs, ok := l.mapping(path, n)
	if !ok || len(pairs) == 0 {
		return nil
	}
	if len(pairs) > maxTraceHeaders {
		l.addf(path, resolve(n).Line, "at most %d headers, got %d", maxTraceHeaders, len(pairs))
		return nil
	}
	out := map[string]string{}
	seen := map[string]string{}
	for _, p := range pairs {
		lower := strings.ToLower(p.key)
		switch {
		case !headerName.MatchString(p.key):
			l.addf(p.path, p.keyNode.Line, "must be named as an HTTP header (letters, digits and !#$%%&'*+.^_`|~-, at most 128)")
			continue
		case strings.HasPrefix(lower, "grpc-"):
			l.addf(p.path, p.keyNode.Line, "grpc- headers are the gRPC transport's own")
			continue
		case seen[lower] != "":
			l.addf(p.path, p.keyNode.Line, "is also %s: header names are case-insensitive", seen[lower])
			continue
		}
		seen[lower] = p.key
		v, vok := l.text(p.path, p.val)
		switch {
		case !vok:
		case len(v) > maxTraceHeaderValue:
			l.addf(p.path, resolve(p.val).Line, "must be at most %d bytes, got %d", maxTraceHeaderValue, len(v))
		case strings.ContainsFunc(v, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }):
			l.addf(p.path, resolve(p.val).Line, "must hold no control character (a line break would split the header)")
		default:
			out[p.key] = v
		}
	}
	return out
}

// checkNATSURL accepts "" (the in-process bus) or a comma-separated list of
// NATS server URLs such as nats://127.0.0.1:4222.
func checkNATSURL(s string) string {
	if s == "" {
		return ""
	}
	for _, part := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(part))
		if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Sprintf("must be empty (the in-process bus) or NATS server URLs such as nats://127.0.0.1:4222, comma-separated, got %q", s)
		}
		switch strings.ToLower(u.Scheme) {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Sprintf("scheme must be nats, tls, ws or wss, got %q in %q", u.Scheme, s)
		}
	}
	return ""
}

// checkDSN accepts what the host's own store accepts: empty (SQLite in
// data_dir) or a PostgreSQL URL. The message never repeats the value, which
// may hold a password.
func checkDSN(dsn string) string {
	if _, err := sqlstore.Engine(dsn); err != nil {
		return err.Error()
	}
	return ""
}

func checkListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("must be host:port such as 127.0.0.1:8080, got %q", addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > math.MaxUint16 {
		return fmt.Sprintf("port must be a number from 0 to 65535, got %q", port)
	}
	return ""
}

func undefinedRole(role string, roles map[string][]string) string {
	if len(roles) == 0 {
		return fmt.Sprintf("role %q is not defined under roles (no roles are defined)", role)
	}
	names := make([]string, 0, len(roles))
	for r := range roles {
		names = append(names, r)
	}
	slices.Sort(names)
	return fmt.Sprintf("role %q is not defined under roles (defined: %s)", role, strings.Join(names, ", "))
}

func (l *loader) roles(n *yaml.Node) map[string][]string {
	roles := map[string][]string{}
	pairs, _ := l.mapping("roles", n)
	for _, p := range pairs {
		if !roleName.MatchString(p.key) {
			l.addf(p.path, p.keyNode.Line, "role name must match [a-z][a-z0-9_-]*")
			continue
		}
		items, ok := l.sequence(p.path, p.val)
		if !ok {
			continue
		}
		perms := []string{}
		for i, item := range items {
			path := index(p.path, i)
			s, ok := l.str(path, item)
			if !ok {
				continue
			}
			if !permission.MatchString(s) {
				l.addf(path, item.Line, `must be a permission such as "booking.read", "booking.*" or "*", got %q`, s)
				continue
			}
			perms = append(perms, s)
		}
		roles[p.key] = perms
	}
	return roles
}

// origins validates allowed_origins and normalizes each entry to the form
// browsers send in the Origin header, so the server can compare exactly.
func (l *loader) origins(path string, n *yaml.Node) []string {
	return l.uniqueStrings(path, n, normalizeOrigin)
}

// blockedEntities validates search.blocked_entities: each entry is an entity
// type name such as "customer" or "crm.contact".
func (l *loader) blockedEntities(path string, n *yaml.Node) []string {
	return l.uniqueStrings(path, n, func(s string) (string, error) {
		if !catalogue.ValidName(s) {
			return "", fmt.Errorf(`must be an entity type name such as "customer" or "crm.contact" (lower-case dotted, [a-z][a-z0-9_]* each), got %q`, s)
		}
		return s, nil
	})
}

// uniqueStrings reads a list of strings, passing each through check (which
// returns the value to keep, or why the entry is wrong); repeats are dropped.
func (l *loader) uniqueStrings(path string, n *yaml.Node, check func(string) (string, error)) []string {
	items, _ := l.sequence(path, n)
	var out []string
	for i, item := range items {
		p := index(path, i)
		s, ok := l.str(p, item)
		if !ok {
			continue
		}
		v, err := check(s)
		if err != nil {
			l.addf(p, item.Line, "%v", err)
			continue
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func normalizeOrigin(s string) (string, error) {
	bad := fmt.Errorf("must be an origin such as https://app.example.com or http://localhost:3000, got %q", s)
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || (u.Path != "" && u.Path != "/") {
		return "", bad
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", bad
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return "", bad
	}
	if port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return "", bad
		}
	}
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host, nil
}

func (l *loader) tokens(n *yaml.Node, cfg *Config) []Token {
	items, _ := l.sequence("tokens", n)
	out := make([]Token, 0, len(items))
	first := map[[32]byte]int{}
	labels := map[string]int{}
	for i, item := range items {
		path := index("tokens", i)
		t := Token{Index: i, Role: cfg.DefaultRole, Scope: cfg.DefaultScope}
		var ok bool
		switch {
		case item.Kind == yaml.ScalarNode && !isNull(item):
			ok = l.plainToken(path, item, &t)
		case item.Kind == yaml.MappingNode:
			ok = l.tokenObject(path, item, cfg, &t)
		default:
			l.addf(path, item.Line, "must be a token or a mapping with token or token_sha256, got %s", describe(item))
		}
		if !ok {
			continue
		}
		if j, dup := first[t.SHA256]; dup {
			l.addf(path, item.Line, "same token as tokens[%d]; each token must be distinct", j)
			continue
		}
		if t.Label == "" {
			t.Label = fmt.Sprintf("tokens-%d", i)
		}
		if j, dup := labels[t.Label]; dup {
			l.addf(child(path, "label"), item.Line, "label %q is also tokens[%d]'s; audit records and rate limits tell tokens apart by label", t.Label, j)
			continue
		}
		first[t.SHA256], labels[t.Label] = i, i
		out = append(out, t)
	}
	return out
}

// plainToken hashes a token written in the clear. The message never
// includes the token.
func (l *loader) plainToken(path string, n *yaml.Node, t *Token) bool {
	raw, ok := l.text(path, n)
	if !ok {
		return false
	}
	if err := CheckToken(raw); err != nil {
		l.addf(path, n.Line, "%v", err)
		return false
	}
	t.SHA256 = sha256.Sum256([]byte(raw))
	return true
}

func (l *loader) tokenObject(path string, n *yaml.Node, cfg *Config, t *Token) bool {
	ok := true
	var plain, hashed *yaml.Node
	for _, p := range l.pairs(path, n, 0) {
		val := resolve(p.val)
		switch p.key {
		case "token":
			plain = val
		case "token_sha256":
			hashed = val
		case "label":
			if isNull(val) {
				continue
			}
			label, lok := l.str(p.path, val)
			switch {
			case !lok:
				ok = false
			case !tokenLabel.MatchString(label):
				l.addf(p.path, val.Line, "must be 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, got %q", shorten(label))
				ok = false
			default:
				t.Label = label
			}
		case "role":
			if isNull(val) {
				continue
			}
			role, rok := l.str(p.path, val)
			if !rok {
				ok = false
			} else if role != "" {
				if _, defined := cfg.Roles[role]; !defined {
					l.addf(p.path, val.Line, "%s", undefinedRole(role, cfg.Roles))
					ok = false
				}
				t.Role = role
			}
		case "scope":
			if isNull(val) {
				continue
			}
			s, sok := l.str(p.path, val)
			switch {
			case !sok:
				ok = false
			case !dispatch.Scope(s).Valid():
				l.addf(p.path, val.Line, "must be one of read, action, admin, got %q", s)
				ok = false
			default:
				t.Scope = dispatch.Scope(s)
			}
		case "user_id":
			if isNull(val) {
				continue
			}
			u, uok := l.text(p.path, val)
			ok = ok && uok
			t.UserID = u
		default:
			l.unknown(p, tokenKeys)
			ok = false
		}
	}
	switch {
	case plain != nil && hashed != nil:
		l.addf(path, n.Line, "set exactly one of token and token_sha256, not both")
		return false
	case plain != nil:
		return l.plainToken(child(path, "token"), plain, t) && ok
	case hashed != nil:
		p := child(path, "token_sha256")
		s, sok := l.str(p, hashed)
		if !sok {
			return false
		}
		if !hexDigest.MatchString(s) {
			l.addf(p, hashed.Line, "must be 64 hexadecimal characters (a SHA-256 digest)")
			return false
		}
		_, _ = hex.Decode(t.SHA256[:], []byte(strings.ToLower(s))) // checked above
		return ok
	default:
		l.addf(path, n.Line, "set exactly one of token and token_sha256")
		return false
	}
}

// typed reads a scalar of kind k that is not an overridable setting (a key
// inside a list entry), reporting a problem when it is not one.
func (l *loader) typed(path string, n *yaml.Node, k kind) (any, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || isNull(n) {
		l.addf(path, n.Line, "must be %s, got %s", k.want(), describe(n))
		return nil, false
	}
	raw, ok := l.scalarValue(path, n)
	if !ok {
		return nil, false
	}
	v, ok := k.convert(raw)
	if !ok {
		l.addf(path, n.Line, "must be %s, got %s", k.want(), describeValue(raw))
	}
	return v, ok
}

// envName is a variable name a plugin may be given.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// pluginEnv reads a plugin's env list: "NAME" passes capgate's own value of
// NAME (none when unset: listed in missing), "NAME=value" sets it. The
// handshake's variables are go-plugin's and may not be set.
func (l *loader) pluginEnv(path string, n *yaml.Node) (env, missing []string, ok bool) {
	items, sok := l.sequence(path, n)
	if !sok {
		return nil, nil, false
	}
	ok = true
	seen := map[string]int{}
	for i, item := range items {
		ipath := index(path, i)
		entry, eok := l.str(ipath, item)
		if !eok {
			ok = false
			continue
		}
		name, value, set := strings.Cut(entry, "=")
		switch {
		case !envName.MatchString(name):
			l.addf(ipath, item.Line, "must be NAME or NAME=value with NAME of letters, digits and _ (not starting with a digit), got %q", shorten(entry))
			ok = false
			continue
		case name == capgatev1.MagicCookieKey || strings.HasPrefix(name, "PLUGIN_"):
			l.addf(ipath, item.Line, "%s is set by the host for the plugin handshake and cannot be configured", name)
			ok = false
			continue
		}
		if j, dup := seen[name]; dup {
			l.addf(ipath, item.Line, "%s is listed twice (also %s)", name, index(path, j))
			ok = false
			continue
		}
		seen[name] = i
		if !set {
			v, found := os.LookupEnv(name)
			if !found {
				missing = append(missing, name)
				continue
			}
			value = v
		}
		env = append(env, name+"="+value)
	}
	return env, missing, ok
}

// shorten cuts a value for a message: a plugin's env entry may hold a
// secret, and a message needs only enough to find the entry.
func shorten(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=…"
	}
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// restartPolicy reads a plugin's restart block over the default policy.
func (l *loader) restartPolicy(path string, n *yaml.Node) (pluginhost.RestartPolicy, bool) {
	r := pluginhost.DefaultRestartPolicy
	pairs, mok := l.mapping(path, n)
	if !mok {
		return r, false
	}
	ok := true
	for _, p := range pairs {
		switch p.key {
		case "initial_backoff", "max_backoff", "window":
			v, vok := l.typed(p.path, p.val, kindDuration)
			switch {
			case !vok:
				ok = false
			case v.(time.Duration) <= 0:
				l.addf(p.path, resolve(p.val).Line, "must be more than 0, got %s", v)
				ok = false
			case p.key == "initial_backoff":
				r.InitialBackoff = v.(time.Duration)
			case p.key == "max_backoff":
				r.MaxBackoff = v.(time.Duration)
			default:
				r.Window = v.(time.Duration)
			}
		case "jitter":
			v, vok := l.typed(p.path, p.val, kindFloat)
			switch {
			case !vok:
				ok = false
			case v.(float64) < 0 || v.(float64) > 1:
				l.addf(p.path, resolve(p.val).Line, "must be between 0 and 1, got %g", v)
				ok = false
			default:
				r.Jitter = v.(float64)
			}
		case "max_restarts":
			v, vok := l.typed(p.path, p.val, kindInt)
			switch {
			case !vok:
				ok = false
			case v.(int64) < 0 || v.(int64) > 1000:
				l.addf(p.path, resolve(p.val).Line, "must be between 0 (never restart) and 1000, got %d", v)
				ok = false
			default:
				r.MaxRestarts = int(v.(int64))
			}
		default:
			l.unknown(p, pluginRestartKey)
			ok = false
		}
	}
	if ok {
		if err := r.Check(); err != nil {
			l.addf(path, resolve(n).Line, "%v", err)
			ok = false
		}
	}
	return r, ok
}

func (l *loader) plugins(n *yaml.Node) []Plugin {
	items, _ := l.sequence("plugins", n)
	var out []Plugin
	first := map[string]int{}
	for i, item := range items {
		path := index("plugins", i)
		if item.Kind != yaml.MappingNode {
			l.addf(path, item.Line, "must be a mapping with name and path, got %s", describe(item))
			continue
		}
		pl := Plugin{MaxInFlight: pluginhost.DefaultMaxInFlight, Restart: pluginhost.DefaultRestartPolicy}
		ok, hasName, hasPath := true, false, false
		for _, p := range l.pairs(path, item, 0) {
			val := resolve(p.val)
			switch p.key {
			case "name":
				s, sok := l.str(p.path, val)
				switch {
				case !sok:
					ok = false
				case !pluginName.MatchString(s):
					l.addf(p.path, val.Line, "must match [a-z][a-z0-9_-]*, got %q", s)
					ok = false
				default:
					if j, dup := first[s]; dup {
						l.addf(p.path, val.Line, "duplicate plugin name %q (also plugins[%d])", s, j)
						ok = false
					} else {
						first[s] = i
					}
					l.placePlugin(s, i)
				}
				pl.Name, hasName = s, true
			case "path":
				s, sok := l.str(p.path, val)
				switch {
				case !sok:
					ok = false
				case s == "":
					l.addf(p.path, val.Line, "must not be empty")
					ok = false
				default:
					if !filepath.IsAbs(s) && l.baseDir != "" {
						s = filepath.Join(l.baseDir, s)
					}
					pl.Path = filepath.Clean(s)
					if name, bundled := strings.CutPrefix(filepath.Base(pl.Path), "capgate-plugin-"); bundled {
						l.placePlugin(name, i)
					}
				}
				hasPath = true
			case "sha256":
				if isNull(val) {
					continue
				}
				s, sok := l.str(p.path, val)
				switch {
				case !sok:
					ok = false
				case !hexDigest.MatchString(s):
					l.addf(p.path, val.Line, "must be 64 hexadecimal characters (a SHA-256 digest)")
					ok = false
				default:
					pl.SHA256 = strings.ToLower(s)
				}
			case "env":
				if isNull(val) {
					continue
				}
				var eok bool
				pl.Env, pl.EnvMissing, eok = l.pluginEnv(p.path, val)
				ok = ok && eok
			case "max_in_flight":
				if v, vok := l.typed(p.path, val, kindInt); vok {
					if n := v.(int64); n < 1 || n > 1_000_000 {
						l.addf(p.path, val.Line, "must be between 1 and 1000000, got %d", n)
						ok = false
					} else {
						pl.MaxInFlight = int(n)
					}
				} else {
					ok = false
				}
			case "restart":
				if isNull(val) {
					continue
				}
				var rok bool
				pl.Restart, rok = l.restartPolicy(p.path, val)
				ok = ok && rok
			case "run_as":
				if isNull(val) {
					continue
				}
				var rok bool
				pl.RunAs, rok = l.runAs(p.path, val)
				ok = ok && rok
			case "config":
				if isNull(val) {
					continue
				}
				if val.Kind != yaml.MappingNode {
					l.addf(p.path, val.Line, "must be a mapping, got %s", describe(val))
					ok = false
					continue
				}
				v, fok := l.freeform(p.path, val, 0)
				if !fok {
					ok = false
					continue
				}
				pl.Config = v.(map[string]any)
				// Checked here so ConfigJSON cannot fail at start-up.
				if _, err := json.Marshal(pl.Config); err != nil {
					l.addf(p.path, val.Line, "cannot be encoded as JSON: %v", err)
					ok = false
				}
			default:
				l.unknown(p, pluginKeys)
				ok = false
			}
		}
		if !hasName {
			l.addf(child(path, "name"), item.Line, "required")
			ok = false
		}
		if !hasPath {
			l.addf(child(path, "path"), item.Line, "required")
			ok = false
		}
		if ok {
			out = append(out, pl)
		}
	}
	return out
}

// capabilityNames reads a list of capability names (disabled_capabilities).
// Whether a plugin provides each is known only once the plugins have
// started; the host checks that then.
func (l *loader) capabilityNames(path string, n *yaml.Node) []string {
	return l.uniqueStrings(path, n, func(s string) (string, error) {
		if !registry.ValidName(s) {
			return "", fmt.Errorf(`must be a capability name such as "booking.create", got %q`, shorten(s))
		}
		return s, nil
	})
}

// limits reads the limits section: rates for every token's calls to each
// capability (default, by role, by capability) and over all of them
// (per_token).
func (l *loader) limits(n *yaml.Node, roles map[string][]string) (dispatch.Limits, LimitsCounter) {
	var (
		out     dispatch.Limits
		counter LimitsCounter
	)
	pairs, _ := l.mapping("limits", n)
	for _, p := range pairs {
		switch p.key {
		case "redis_url":
			u, ok := l.str(p.path, p.val)
			if !ok || u == "" {
				continue
			}
			if !strings.HasPrefix(u, "redis://") && !strings.HasPrefix(u, "rediss://") {
				l.addf(p.path, p.val.Line, "must be a redis:// or rediss:// URL")
				continue
			}
			counter.RedisURL = u
		case "on_redis_error":
			v, ok := l.str(p.path, p.val)
			if !ok {
				continue
			}
			switch v {
			case "refuse":
			case "allow":
				counter.FailOpen = true
			default:
				l.addf(p.path, p.val.Line, "must be refuse (calls a limit applies to are refused while Redis is unreachable) or allow (they are admitted uncounted), got %q", shorten(v))
			}
		case "default":
			out.Default = l.rate(p.path, p.val)
		case "per_token":
			out.PerToken = l.rate(p.path, p.val)
		case "roles":
			byRole, _ := l.mapping(p.path, p.val)
			for _, r := range byRole {
				if _, ok := roles[r.key]; !ok {
					l.addf(r.path, r.val.Line, "%s", undefinedRole(r.key, roles))
					continue
				}
				if out.Roles == nil {
					out.Roles = map[string]dispatch.Rate{}
				}
				out.Roles[r.key] = l.rate(r.path, r.val)
			}
		case "capabilities":
			byCap, _ := l.mapping(p.path, p.val)
			for _, c := range byCap {
				if !registry.ValidName(c.key) {
					l.addf(c.path, c.val.Line, `must be keyed by a capability name such as "booking.create", got %q`, shorten(c.key))
					continue
				}
				if out.Capabilities == nil {
					out.Capabilities = map[string]dispatch.Rate{}
				}
				out.Capabilities[c.key] = l.rate(c.path, c.val)
			}
		default:
			l.unknown(p, limitsKeys)
		}
	}
	if counter.FailOpen && counter.RedisURL == "" {
		l.addf("limits.on_redis_error", n.Line, "applies only with limits.redis_url")
	}
	return out, counter
}

// risk reads the risk section: levels by capability and by pack, which
// override the levels plugins declare, and where in-band confirmation is
// off (in_band).
func (l *loader) risk(n *yaml.Node) (dispatch.RiskPolicy, dispatch.InBand) {
	var (
		out    dispatch.RiskPolicy
		inBand dispatch.InBand
	)
	pairs, _ := l.mapping("risk", n)
	for _, p := range pairs {
		var (
			name func(string) bool
			what string
			into *map[string]registry.Risk
		)
		switch p.key {
		case "capabilities":
			name, what, into = registry.ValidName, `a capability name such as "booking.create"`, &out.Capabilities
		case "packs":
			name, what, into = packName.MatchString, `a pack name such as "booking"`, &out.Packs
		case "in_band":
			inBand = l.inBand(p.path, p.val)
			continue
		default:
			l.unknown(p, riskKeys)
			continue
		}
		levels, _ := l.mapping(p.path, p.val)
		for _, e := range levels {
			if !name(e.key) {
				l.addf(e.path, e.val.Line, "must be keyed by %s, got %q", what, shorten(e.key))
				continue
			}
			v, ok := l.str(e.path, e.val)
			if !ok {
				continue
			}
			level := registry.Risk(v)
			if v == "" || !level.Valid() {
				l.addf(e.path, e.val.Line, "must be one of %s, got %q", registry.RiskNames(), shorten(v))
				continue
			}
			if *into == nil {
				*into = map[string]registry.Risk{}
			}
			(*into)[e.key] = level
		}
	}
	return out, inBand
}

// inBand reads risk.in_band: {capabilities: {name: bool}, packs: {name:
// bool}}, false turning in-band confirmation off.
func (l *loader) inBand(path string, n *yaml.Node) dispatch.InBand {
	var out dispatch.InBand
	pairs, _ := l.mapping(path, n)
	for _, p := range pairs {
		var (
			name func(string) bool
			what string
			into *map[string]bool
		)
		switch p.key {
		case "capabilities":
			name, what, into = registry.ValidName, `a capability name such as "booking.add_resource"`, &out.Capabilities
		case "packs":
			name, what, into = packName.MatchString, `a pack name such as "booking"`, &out.Packs
		default:
			l.unknown(p, inBandKeys)
			continue
		}
		switches, _ := l.mapping(p.path, p.val)
		for _, e := range switches {
			if !name(e.key) {
				l.addf(e.path, e.val.Line, "must be keyed by %s, got %q", what, shorten(e.key))
				continue
			}
			on, ok := l.onOff(e.path, e.val)
			if !ok {
				continue
			}
			if *into == nil {
				*into = map[string]bool{}
			}
			(*into)[e.key] = on
		}
	}
	return out
}

// onOff reads a switch: a YAML boolean, or a string ("${VAR}") that
// parses as one.
func (l *loader) onOff(path string, n *yaml.Node) (bool, bool) {
	if v := resolve(n); v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!bool" || v.ShortTag() == "!!str") {
		if raw, ok := l.scalarValue(path, v); ok {
			if b, ok := kindBool.convert(raw); ok {
				return b.(bool), true
			}
		}
	}
	l.addf(path, n.Line, "must be true or false, got %s", describe(resolve(n)))
	return false, false
}

// rate reads {rate: "10/s", burst: 20}; burst defaults to the rate's count.
func (l *loader) rate(path string, n *yaml.Node) dispatch.Rate {
	var r dispatch.Rate
	pairs, ok := l.mapping(path, n)
	if !ok {
		return r
	}
	var burst int
	seen := false
	for _, p := range pairs {
		switch p.key {
		case "rate":
			s, ok := l.str(p.path, p.val)
			if !ok {
				continue
			}
			parsed, err := dispatch.ParseRate(s)
			if err != nil {
				l.addf(p.path, p.val.Line, "%v", err)
				continue
			}
			r, seen = parsed, true
		case "burst":
			v, ok := l.typed(p.path, p.val, kindInt)
			if !ok {
				continue
			}
			if b := v.(int64); b < 1 || b > 1_000_000 {
				l.addf(p.path, p.val.Line, "must be from 1 to 1000000, got %d", b)
			} else {
				burst = int(b)
			}
		default:
			l.unknown(p, rateKeys)
		}
	}
	if !seen {
		l.addf(path, n.Line, `needs a rate, such as {rate: 10/s} or {rate: 5/m, burst: 10}`)
		return dispatch.Rate{}
	}
	r.Burst = burst
	return r
}
