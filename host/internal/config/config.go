package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/capgate/capgate/host/internal/pluginhost"
	"github.com/capgate/capgate/internal/dispatch"
)

// BuiltinPacks are the packs the bundled plugins provide. Config.Packs
// always has an entry for each, false unless the operator turns it on.
var BuiltinPacks = []string{"search", "booking", "subscription", "llm", "events", "approvals"}

// Token length limits. The upper bound keeps the per-request work on a
// hostile header small; the lower bound refuses guessable tokens.
const (
	MinTokenLength = 8
	MaxTokenLength = 512
)

// Errors returned by CheckToken. They are fixed values so a caller on the
// request path can test a token without allocating.
var (
	ErrTokenTooShort = fmt.Errorf("must be at least %d characters", MinTokenLength)
	ErrTokenTooLong  = fmt.Errorf("must be at most %d characters", MaxTokenLength)
	ErrTokenSyntax   = errors.New("may contain only letters, digits and - . _ ~ + / followed by optional = padding (RFC 6750 b64token)")
)

// CheckToken reports whether tok is acceptable as a bearer token: its
// length is within the limits and it is an RFC 6750 b64token, which is what
// can travel in an Authorization header unquoted. It never allocates.
func CheckToken(tok string) error {
	if len(tok) < MinTokenLength {
		return ErrTokenTooShort
	}
	if len(tok) > MaxTokenLength {
		return ErrTokenTooLong
	}
	i := 0
	for ; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return ErrTokenSyntax
	}
	for ; i < len(tok); i++ {
		if tok[i] != '=' {
			return ErrTokenSyntax
		}
	}
	return nil
}

// Config is a loaded, validated host configuration.
type Config struct {
	// Enabled is the master switch: when false the endpoint answers 404.
	Enabled bool
	// Listen is the host:port the HTTP server binds.
	Listen string
	// DataDir is where the host and plugins keep state; a relative path is
	// relative to the working directory.
	DataDir string
	Tokens  []Token
	// Roles maps a role name to the permissions it holds.
	Roles map[string][]string
	// Packs has every built-in pack and every configured one.
	Packs map[string]bool
	// DefaultScope and DefaultRole apply to tokens that do not set their own.
	DefaultScope dispatch.Scope
	DefaultRole  string
	// MaxResults caps the items a listing capability returns.
	MaxResults int
	// EventsBufferSize is how many events the bus retains, on disk, for
	// events.poll and for subscribers that fall behind.
	EventsBufferSize int
	// MaxResultBytes is the largest result one call may return.
	MaxResultBytes int
	HTTP           HTTP
	Log            Log
	Search         Search
	Events         Events
	Database       Database
	Idempotency    Idempotency
	Audit          Audit
	Approvals      Approvals
	Tasks          Tasks
	Metrics        Metrics
	Tracing        Tracing
	Auth           Auth
	// ActionsEnabled is false when the operator has switched every action
	// off (the kill switch); reads carry on.
	ActionsEnabled bool
	// DisabledCapabilities are switched off: refused and listed to no one.
	DisabledCapabilities []string
	// Limits are the rate limits per token.
	Limits dispatch.Limits
	// Risk overrides the risk levels plugins declare.
	Risk dispatch.RiskPolicy
	// InBand turns in-band confirmation off by capability or pack
	// (risk.in_band): their review_required calls wait for an approver.
	InBand dispatch.InBand
	// OwnershipAsMissing answers a call on another user's target as one
	// on a target that does not exist (refusals.ownership: not_found).
	OwnershipAsMissing bool
	// LimitsCounter is where the limits are counted.
	LimitsCounter LimitsCounter
	Plugins       []Plugin
	// File is the absolute path of the file loaded; empty after Parse.
	File string
}

// LimitsCounter says where rate limits are counted: in each replica's
// memory, or in a Redis all replicas share, so a limit holds across them.
type LimitsCounter struct {
	// RedisURL is limits.redis_url; empty counts in memory.
	RedisURL string
	// FailOpen admits calls uncounted while Redis cannot be reached
	// (limits.on_redis_error: allow); the default refuses them.
	FailOpen bool
}

// Token is one accepted bearer token. Only its hash is kept.
type Token struct {
	// Index is the token's position under tokens, for logs that must name a
	// token without revealing it.
	Index int
	// Label names the token in audit records, rate limits and logs:
	// tokens[N].label, or "tokens-N".
	Label  string
	SHA256 [32]byte
	Role   string
	Scope  dispatch.Scope
	// UserID is the user the token acts for; empty when unbound.
	UserID string
}

// HTTP holds the server's limits.
type HTTP struct {
	MaxBodyBytes    int64
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	// MaxInFlight bounds the requests served at once; more are refused
	// with 503 at once.
	MaxInFlight int
	// AllowedOrigins are normalized origins (lower-case scheme and host, no
	// default port, no trailing slash) that browsers may call from, besides
	// same-host and localhost ones.
	AllowedOrigins []string
	// TrustedProxies are the reverse proxies (http.trusted_proxies) whose
	// TrustedProxyHeader (http.trusted_proxy_header) names the client
	// whose failed sign-ins and tokens are counted; both or neither.
	TrustedProxies     []netip.Prefix
	TrustedProxyHeader string
}

// Search configures the search registry.
type Search struct {
	// BlockedEntities are entity types no plugin may provide, on top of the
	// always-blocked "user" and "invoice". An entry refuses the type of that
	// name and any dotted name ending in it ("customer" refuses
	// "crm.customer").
	BlockedEntities []string
}

// Events configures the event bus, a JetStream stream that survives
// restarts either way: an acknowledged event outlives the host being killed.
type Events struct {
	// NATSURL is the NATS server (events.nats_url), whose stream replicas
	// share; empty means a NATS server embedded in the host, listening on
	// no port, with its store in <data_dir>/events, which one host at a
	// time may hold and which is fsynced every two minutes and at shutdown.
	NATSURL string
	// Stream is the JetStream stream holding the events on NATSURL
	// (events.stream); the embedded store always uses the default.
	Stream string
}

// Database is where the host keeps its own records (idempotency keys).
type Database struct {
	// DSN is empty for SQLite files in data_dir, or a PostgreSQL URL that
	// replicas share.
	DSN string
}

// Idempotency configures idempotency keys on actions.
type Idempotency struct {
	// Retention is how long an outcome is replayed for a repeated key.
	Retention time.Duration
}

// Audit configures the audit trail of the gate's decisions, kept in the
// host's database (database.dsn, or SQLite in data_dir).
type Audit struct {
	// Enabled is false when the operator runs without a trail
	// (audit.enabled: false): no decision is recorded.
	Enabled bool
	// Retention is how long records are kept.
	Retention time.Duration
	// RefuseActions refuses actions while records cannot be written
	// (audit.on_unavailable: refuse_actions, the default); reads carry on.
	RefuseActions bool
}

// Approvals configures the calls held for a human (risk levels
// review_required and dangerous).
type Approvals struct {
	// TTL is how long a held call waits for a decision.
	TTL time.Duration
	// FourEyes refuses a decision by the user who asked (the default).
	FourEyes bool
	// ConfirmTTL is how long a question put to a caller's user (in-band
	// confirmation of a review_required call) waits for its answer.
	ConfirmTTL time.Duration
	// ConfirmKey seals those questions' state; empty uses a key the
	// approvals database keeps, which replicas sharing it agree on. A
	// secret: never logged.
	ConfirmKey string
	// MaxPending is the most calls of one user that wait for a decision
	// at once (approvals.max_pending).
	MaxPending int
}

// Tasks configures the tasks of the MCP tasks extension: calls of
// capabilities that declare task support, answered at once with a handle
// the client polls while the call runs in the background.
type Tasks struct {
	// Enabled offers the extension (tasks.enabled, the default); off, every
	// call runs while its caller waits and required ones are refused.
	Enabled bool
	// TTL is how long a task is kept from its creation (tasks.ttl).
	TTL time.Duration
	// RunTimeout bounds one task's call (tasks.run_timeout), in place of
	// http.request_timeout, which bounds calls the caller waits for.
	RunTimeout time.Duration
	// MaxPerPrincipal bounds the unfinished tasks of one principal
	// (tasks.max_per_principal).
	MaxPerPrincipal int
	// PollInterval is the polling interval suggested to clients
	// (tasks.poll_interval).
	PollInterval time.Duration
}

// Metrics configures the host's metrics and profiling listener.
type Metrics struct {
	// Listen is where /metrics and /debug/pprof/ are served
	// (metrics.listen); empty serves neither.
	Listen string
	// AllowedHosts are the host names (metrics.allowed_hosts) it answers
	// besides addresses and localhost: any other Host is refused, so a
	// page rebinding its own name to the listener reads nothing.
	AllowedHosts []string
}

// Tracing configures the host's OpenTelemetry traces, exported over OTLP
// with its plugins' spans.
type Tracing struct {
	// OTLPEndpoint is the collector's URL (tracing.otlp_endpoint):
	// http:// for plaintext, https:// for TLS. Empty traces nothing.
	OTLPEndpoint string
	// OTLPProtocol is OTLPGRPC or OTLPHTTP.
	OTLPProtocol string
	// Headers go with every export (an API key, a tenant): secrets, never
	// logged.
	Headers map[string]string
	// SampleRatio is the share, 0 to 1, of the traces the host starts
	// itself that it records; a request carrying a caller's trace context
	// follows the caller's decision.
	SampleRatio float64
	// ServiceName is the service.name of the host's spans; a plugin's are
	// ServiceName-plugin-<name>.
	ServiceName string
}

// Auth configures how callers authenticate besides the static tokens.
type Auth struct {
	// OAuth, when set (auth.oauth.issuer is not empty), accepts OAuth 2.1
	// access tokens, JWTs an authorization server signs for this
	// resource; nil accepts none.
	OAuth *OAuth
}

// OAuth configures capgate as an OAuth 2.1 resource server (MCP
// authorization): it validates JWT access tokens with the issuer's
// published keys and maps their claims to a principal.
type OAuth struct {
	// Issuer is the authorization server's issuer identifier, the value
	// every token's iss must equal.
	Issuer string
	// Resource is this server's resource identifier (RFC 8707, RFC 9728):
	// the canonical URL of the MCP endpoint, published in the protected
	// resource metadata.
	Resource string
	// Audience is the aud a token must hold; Resource unless set.
	Audience string
	// JWKSURL is where the issuer's keys are published; empty finds it in
	// the issuer's metadata (RFC 8414, then OpenID Connect discovery).
	JWKSURL string
	// Algorithms are the JWS algorithms accepted, all asymmetric.
	Algorithms []string
	// ClockSkew is the leeway on exp, nbf and iat.
	ClockSkew time.Duration
	// JWKSRefreshInterval is the longest the keys are kept before they are
	// fetched again; JWKSMinRefreshInterval the shortest time between two
	// fetches, however many tokens name a key not yet known.
	JWKSRefreshInterval    time.Duration
	JWKSMinRefreshInterval time.Duration
	// UserClaim names the claim holding the user id; RoleClaim the claim
	// holding the role (empty: every token gets DefaultRole).
	UserClaim string
	RoleClaim string
	// DefaultRole is the role of a token without a role claim.
	DefaultRole string
	// Scopes are the OAuth scopes granting each capgate scope; an empty
	// one is granted by no scope.
	Scopes OAuthScopes
	// ScopesSupported are the scopes published in the metadata and asked
	// for in a 401's challenge.
	ScopesSupported []string
	// ResourceName is the resource_name published in the metadata.
	ResourceName string
}

// OAuthScopes names the OAuth scope that grants each capgate scope. A
// broader one implies the narrower: admin grants action and read.
type OAuthScopes struct {
	Read, Action, Admin string
}

// The protocols tracing.otlp_protocol names.
const (
	OTLPGRPC = "grpc"
	OTLPHTTP = "http/protobuf"
)

// Log configures the host's slog handler.
type Log struct {
	Level slog.Level
	// Format is "text" or "json".
	Format string
}

// Plugin is one plugin binary to start.
type Plugin struct {
	Name string
	// Path is the binary; a relative path in the file has been resolved
	// against the file's directory.
	Path string
	// SHA256 is the expected lower-case hex digest of the binary, or empty.
	SHA256 string
	// Env is the plugin's environment as NAME=value entries: nothing of
	// capgate's own environment reaches a plugin unless listed.
	Env []string
	// EnvMissing are names env passes through from capgate's environment
	// that are not set there, so the plugin goes without them.
	EnvMissing []string
	// MaxInFlight bounds the plugin's calls in flight.
	MaxInFlight int
	// Restart is how the host restarts the plugin when it dies.
	Restart pluginhost.RestartPolicy
	// RunAs is the user the plugin runs as (run_as); nil runs it as the
	// host's.
	RunAs *pluginhost.RunAs
	// Config is the plugin's free-form block with its keys as written.
	Config map[string]any
}

// ConfigJSON returns the plugin's config block as a JSON object, "{}" when
// the block is absent.
func (p Plugin) ConfigJSON() ([]byte, error) {
	if len(p.Config) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(p.Config)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: encoding config as JSON: %w", p.Name, err)
	}
	return b, nil
}

// Policy returns the operator's part of the gate's decision. The maps are
// copies, so the dispatcher cannot be changed through the Config.
func (c *Config) Policy() dispatch.Policy {
	roles := make(map[string][]string, len(c.Roles))
	for k, v := range c.Roles {
		roles[k] = append([]string(nil), v...)
	}
	limits := c.Limits
	limits.Roles, limits.Capabilities = maps.Clone(c.Limits.Roles), maps.Clone(c.Limits.Capabilities)
	return dispatch.Policy{
		Packs: maps.Clone(c.Packs), Roles: roles,
		ActionsOff: !c.ActionsEnabled, DisabledCapabilities: slices.Clone(c.DisabledCapabilities), Limits: limits,
		Risk:               dispatch.RiskPolicy{Capabilities: maps.Clone(c.Risk.Capabilities), Packs: maps.Clone(c.Risk.Packs)},
		OwnershipAsMissing: c.OwnershipAsMissing,
	}
}

// Load reads and validates the configuration file at path. Relative plugin
// paths are resolved against the file's directory. A file that parses but
// has mistakes yields an *Error listing all of them.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return parse(data, filepath.Dir(abs), abs)
}

// Parse validates a configuration held in memory. baseDir resolves relative
// plugin paths; when empty they stay relative to the working directory.
func Parse(yamlBytes []byte, baseDir string) (*Config, error) {
	return parse(yamlBytes, baseDir, "")
}
