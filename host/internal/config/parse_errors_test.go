package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const topKnown = "known keys are enabled, listen, data_dir, tokens, roles, packs, default_scope, default_role, max_results, events_buffer_size, max_result_bytes, http, log, search, events, database, idempotency, plugins, actions_enabled, disabled_capabilities, limits, audit, refusals, risk, approvals, tasks, metrics, tracing, auth"

// TestParseProblems holds one case per mistake an operator can make; each
// names the exact lines the operator reads.
func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		// Unknown keys, at every level that has a schema.
		{"unknown top-level key", "listn: 127.0.0.1:80\n",
			nil, []string{"listn: unknown key; " + topKnown + " (line 1)"}},
		{"unknown token key", "tokens:\n  - {token: abcdefgh, rol: admin}\n",
			nil, []string{"tokens[0].rol: unknown key; known keys are token, token_sha256, label, role, scope, user_id (line 2)"}},
		{"unknown http key", "http:\n  timeout: 5s\n",
			nil, []string{"http.timeout: unknown key; known keys are max_body_bytes, request_timeout, shutdown_timeout, max_in_flight, allowed_origins, trusted_proxies, trusted_proxy_header (line 2)"}},
		{"unknown log key", "log:\n  lvl: debug\n",
			nil, []string{"log.lvl: unknown key; known keys are level, format (line 2)"}},
		{"unknown events key", "events:\n  url: nats://127.0.0.1:4222\n",
			nil, []string{"events.url: unknown key; known keys are nats_url, stream (line 2)"}},
		{"events not a mapping", "events: nats://127.0.0.1:4222\n",
			nil, []string{`events: must be a mapping, got "nats://127.0.0.1:4222" (line 1)`}},
		{"events nats_url not a url", "events:\n  nats_url: 127.0.0.1:4222\n",
			nil, []string{`events.nats_url: must be empty (the in-process bus) or NATS server URLs such as nats://127.0.0.1:4222, comma-separated, got "127.0.0.1:4222" (line 2)`}},
		{"events nats_url wrong scheme", "events:\n  nats_url: http://127.0.0.1:4222\n",
			nil, []string{`events.nats_url: scheme must be nats, tls, ws or wss, got "http" in "http://127.0.0.1:4222" (line 2)`}},
		{"events nats_url a list", "events:\n  nats_url: [nats://a:1]\n",
			nil, []string{"events.nats_url: must be a string, got a list (line 2)"}},
		{"events stream malformed", "events:\n  stream: capgate.events\n",
			nil, []string{`events.stream: must be 1 to 64 letters, digits, '-' or '_', got "capgate.events" (line 2)`}},
		{"events stream empty", "events:\n  stream: \"\"\n",
			nil, []string{`events.stream: must be 1 to 64 letters, digits, '-' or '_', got "" (line 2)`}},
		{"events stream from env malformed", "",
			map[string]string{"CAPGATE_EVENTS_STREAM": "a b"}, []string{`events.stream: must be 1 to 64 letters, digits, '-' or '_', got "a b" (from CAPGATE_EVENTS_STREAM)`}},
		{"unknown search key", "search:\n  blocked: [customer]\n",
			nil, []string{"search.blocked: unknown key; known keys are blocked_entities (line 2)"}},
		{"unknown plugin key", "plugins:\n  - name: a\n    path: a\n    sha265: x\n",
			nil, []string{"plugins[0].sha265: unknown key; known keys are name, path, sha256, env, max_in_flight, restart, run_as, config (line 4)"}},
		// A key that moved into a plugin's config says where it went.
		{"llm_connection_slug, llm plugin by name", "llm_connection_slug: local\nplugins:\n  - {name: search, path: bin/s}\n  - {name: llm, path: bin/l}\n",
			nil, []string{"llm_connection_slug: moved to the llm plugin's config: remove it here and set plugins[1].config.connection: local (line 1)"}},
		{"llm_connection_slug, llm plugin by binary", "plugins:\n  - {name: ask, path: ../bin/capgate-plugin-llm}\nllm_connection_slug: ${CG_TEST_SLUG}\n",
			nil, []string{"llm_connection_slug: moved to the llm plugin's config: remove it here and set plugins[0].config.connection: ${CG_TEST_SLUG} (line 3)"}},
		{"llm_connection_slug, no llm plugin", "llm_connection_slug: \"\"\n",
			nil, []string{"llm_connection_slug: moved to the llm plugin's config: remove it here and set config.connection in the llm plugin's entry under plugins (line 1)"}},
		{"llm_connection_slug among other problems", "listn: x\nllm_connection_slug: [a]\n",
			nil, []string{"listn: unknown key; " + topKnown + " (line 1)",
				"llm_connection_slug: moved to the llm plugin's config: remove it here and set config.connection in the llm plugin's entry under plugins (line 2)"}},
		{"odd key quoted in path", "\"a b\": 1\n",
			nil, []string{`["a b"]: unknown key; ` + topKnown + " (line 1)"}},
		{"duplicate key", "listen: a:1\nlisten: b:2\n",
			nil, []string{"listen: duplicate key (line 2)"}},
		{"non-string key", "[a]: 1\n",
			nil, []string{": keys must be plain strings, got a list (line 1)"}},

		// Wrong shapes and types.
		{"top level not a mapping", "- a\n",
			nil, []string{"(top level): must be a mapping of settings, got a list (line 1)"}},
		{"integer as word", "max_results: ten\n",
			nil, []string{`max_results: must be an integer, got "ten" (line 1)`}},
		{"integer as float", "max_results: 1.5\n",
			nil, []string{"max_results: must be an integer, got 1.5 (line 1)"}},
		{"integer as list", "events_buffer_size: [1]\n",
			nil, []string{"events_buffer_size: must be an integer, got a list (line 1)"}},
		{"boolean as yes", "enabled: yes\n",
			nil, []string{`enabled: must be true or false, got "yes" (line 1)`}},
		{"string as number", "listen: 8080\n",
			nil, []string{"listen: must be a string, got 8080 (line 1)"}},
		{"duration as number", "http:\n  request_timeout: 30\n",
			nil, []string{`http.request_timeout: must be a duration such as "30s" or "1m30s", got 30 (line 2)`}},
		{"duration as word", "http:\n  shutdown_timeout: soon\n",
			nil, []string{`http.shutdown_timeout: must be a duration such as "30s" or "1m30s", got "soon" (line 2)`}},
		{"http not a mapping", "http: 5\n",
			nil, []string{"http: must be a mapping, got 5 (line 1)"}},
		{"log not a mapping", "log: [debug]\n",
			nil, []string{"log: must be a mapping, got a list (line 1)"}},
		{"tokens not a list", "tokens: {a: b}\n",
			nil, []string{"tokens: must be a list, got a mapping (line 1)"}},
		{"plugins not a list", "plugins: x\n",
			nil, []string{`plugins: must be a list, got "x" (line 1)`}},
		{"roles not a mapping", "roles: [admin]\n",
			nil, []string{"roles: must be a mapping, got a list (line 1)"}},
		{"packs not a mapping", "packs: [booking]\n",
			nil, []string{"packs: must be a mapping, got a list (line 1)"}},
		{"role not a list", "roles:\n  admin: \"*\"\n",
			nil, []string{`roles.admin: must be a list, got "*" (line 2)`}},
		{"permission not a string", "roles:\n  admin: [{a: 1}]\n",
			nil, []string{"roles.admin[0]: must be a string, got a mapping (line 2)"}},
		{"pack not a boolean", "packs:\n  booking: maybe\n",
			nil, []string{`packs.booking: must be true or false, got "maybe" (line 2)`}},
		{"pack a mapping", "packs:\n  booking: {on: true}\n",
			nil, []string{"packs.booking: must be true or false, got a mapping (line 2)"}},
		{"allowed_origins not a list", "http:\n  allowed_origins: https://a.example\n",
			nil, []string{`http.allowed_origins: must be a list, got "https://a.example" (line 2)`}},
		{"search not a mapping", "search: [customer]\n",
			nil, []string{"search: must be a mapping, got a list (line 1)"}},
		{"blocked_entities not a list", "search:\n  blocked_entities: customer\n",
			nil, []string{`search.blocked_entities: must be a list, got "customer" (line 2)`}},
		{"blocked entity not a string", "search:\n  blocked_entities:\n    - customer\n    - {a: 1}\n",
			nil, []string{"search.blocked_entities[1]: must be a string, got a mapping (line 4)"}},
		{"blocked entity malformed", "search:\n  blocked_entities: [customer, Crm.Contact, \"crm.\", \"\"]\n",
			nil, []string{
				`search.blocked_entities[1]: must be an entity type name such as "customer" or "crm.contact" (lower-case dotted, [a-z][a-z0-9_]* each), got "Crm.Contact" (line 2)`,
				`search.blocked_entities[2]: must be an entity type name such as "customer" or "crm.contact" (lower-case dotted, [a-z][a-z0-9_]* each), got "crm." (line 2)`,
				`search.blocked_entities[3]: must be an entity type name such as "customer" or "crm.contact" (lower-case dotted, [a-z][a-z0-9_]* each), got "" (line 2)`,
			}},
		{"plugin not a mapping", "plugins:\n  - ./bin/x\n",
			nil, []string{`plugins[0]: must be a mapping with name and path, got "./bin/x" (line 2)`}},
		{"plugin config not a mapping", "plugins:\n  - {name: a, path: a, config: [1]}\n",
			nil, []string{"plugins[0].config: must be a mapping, got a list (line 2)"}},
		{"plugin name not a string", "plugins:\n  - {name: [a], path: a}\n",
			nil, []string{"plugins[0].name: must be a string, got a list (line 2)"}},
		{"plugin config not JSON", "plugins:\n  - {name: a, path: a, config: {ratio: .inf}}\n",
			nil, []string{"plugins[0].config: cannot be encoded as JSON: json: unsupported value: +Inf (line 2)"}},
		{"token item a list", "tokens:\n  - [abcdefgh]\n",
			nil, []string{"tokens[0]: must be a token or a mapping with token or token_sha256, got a list (line 2)"}},
		{"token item null", "tokens:\n  -\n",
			nil, []string{"tokens[0]: must be a token or a mapping with token or token_sha256, got null (line 2)"}},
		{"token a float", "tokens:\n  - 1234.5678\n",
			nil, []string{"tokens[0]: must be a string, got 1234.5678 (line 2)"}},
		{"user_id a list", "tokens:\n  - {token: abcdefgh, user_id: [1]}\n",
			nil, []string{"tokens[0].user_id: must be a string, got a list (line 2)"}},

		{"token role not a string", "roles: {a: []}\ntokens:\n  - {token: abcdefgh, role: [a]}\n",
			nil, []string{"tokens[0].role: must be a string, got a list (line 3)"}},
		{"token scope not a string", "tokens:\n  - {token: abcdefgh, scope: 1}\n",
			nil, []string{"tokens[0].scope: must be a string, got 1 (line 2)"}},
		{"token_sha256 not a string", "tokens:\n  - {token_sha256: [a]}\n",
			nil, []string{"tokens[0].token_sha256: must be a string, got a list (line 2)"}},
		{"user_id reference unset", "tokens:\n  - {token: abcdefgh, user_id: '${CG_TEST_UNSET}'}\n",
			nil, []string{"tokens[0].user_id: environment variable CG_TEST_UNSET is not set (write ${CG_TEST_UNSET:-default} to give a default) (line 2)"}},
		{"plugin path not a string", "plugins:\n  - {name: a, path: {x: 1}}\n",
			nil, []string{"plugins[0].path: must be a string, got a mapping (line 2)"}},
		{"origin not a string", "http: {allowed_origins: [443]}\n",
			nil, []string{"http.allowed_origins[0]: must be a string, got 443 (line 1)"}},
		{"origin without host name", "http: {allowed_origins: ['https://:443']}\n",
			nil, []string{`http.allowed_origins[0]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://:443" (line 1)`}},
		{"explicit tag that does not decode", "max_results: !!int ten\n",
			nil, []string{"max_results: yaml: cannot decode !!str `ten` as a !!int (line 1)"}},

		// Scopes and roles.
		{"bad token scope", "tokens:\n  - {token: abcdefgh, scope: write}\n",
			nil, []string{`tokens[0].scope: must be one of read, action, admin, got "write" (line 2)`}},
		{"bad default scope", "default_scope: Read\n",
			nil, []string{`default_scope: must be one of read, action, admin, got "Read" (line 1)`}},
		{"unknown token role", "roles:\n  admin: ['*']\n  viewer: []\ntokens:\n  - {token: abcdefgh, role: root}\n",
			nil, []string{`tokens[0].role: role "root" is not defined under roles (defined: admin, viewer) (line 5)`}},
		{"unknown role with no roles", "tokens:\n  - {token: abcdefgh, role: root}\n",
			nil, []string{`tokens[0].role: role "root" is not defined under roles (no roles are defined) (line 2)`}},
		{"unknown default role", "default_role: viewer\n",
			nil, []string{`default_role: role "viewer" is not defined under roles (no roles are defined) (line 1)`}},
		{"bad role name", "roles:\n  Admin: []\n",
			nil, []string{"roles.Admin: role name must match [a-z][a-z0-9_-]* (line 2)"}},
		{"bad permission", "roles:\n  admin: ['booking*']\n",
			nil, []string{`roles.admin[0]: must be a permission such as "booking.read", "booking.*" or "*", got "booking*" (line 2)`}},
		{"bad pack name", "packs:\n  my-pack: true\n",
			nil, []string{"packs.my-pack: pack name must match [a-z][a-z0-9_]* (line 2)"}},

		// Tokens.
		{"both token fields", "tokens:\n  - token: abcdefgh\n    token_sha256: " + strings.Repeat("a", 64) + "\n",
			nil, []string{"tokens[0]: set exactly one of token and token_sha256, not both (line 2)"}},
		{"neither token field", "tokens:\n  - {scope: read}\n",
			nil, []string{"tokens[0]: set exactly one of token and token_sha256 (line 2)"}},
		{"sha256 too short", "tokens:\n  - token_sha256: abc123\n",
			nil, []string{"tokens[0].token_sha256: must be 64 hexadecimal characters (a SHA-256 digest) (line 2)"}},
		{"sha256 not hex", "tokens:\n  - token_sha256: " + strings.Repeat("g", 64) + "\n",
			nil, []string{"tokens[0].token_sha256: must be 64 hexadecimal characters (a SHA-256 digest) (line 2)"}},
		{"token too short", "tokens:\n  - abc\n",
			nil, []string{"tokens[0]: must be at least 8 characters (line 2)"}},
		{"token too long", "tokens:\n  - " + strings.Repeat("t", 513) + "\n",
			nil, []string{"tokens[0]: must be at most 512 characters (line 2)"}},
		{"token bad character", "tokens:\n  - {token: 'secret:token'}\n",
			nil, []string{"tokens[0].token: may contain only letters, digits and - . _ ~ + / followed by optional = padding (RFC 6750 b64token) (line 2)"}},
		{"token padding inside", "tokens:\n  - secret=token\n",
			nil, []string{"tokens[0]: may contain only letters, digits and - . _ ~ + / followed by optional = padding (RFC 6750 b64token) (line 2)"}},
		{"duplicate plain tokens", "tokens:\n  - abcdefgh\n  - other-token\n  - abcdefgh\n",
			nil, []string{"tokens[2]: same token as tokens[0]; each token must be distinct (line 4)"}},
		{"duplicate plain and hashed", "tokens:\n  - abcdefgh\n  - token_sha256: " + strings.ToUpper(HashTokenForTest("abcdefgh")) + "\n",
			nil, []string{"tokens[1]: same token as tokens[0]; each token must be distinct (line 3)"}},

		// Plugins.
		{"duplicate plugin names", "plugins:\n  - {name: a, path: a}\n  - {name: b, path: b}\n  - {name: a, path: c}\n",
			nil, []string{`plugins[2].name: duplicate plugin name "a" (also plugins[0]) (line 4)`}},
		{"plugin without name and path", "plugins:\n  - {sha256: null}\n",
			nil, []string{"plugins[0].name: required (line 2)", "plugins[0].path: required (line 2)"}},
		{"bad plugin name", "plugins:\n  - {name: My.Plugin, path: a}\n",
			nil, []string{`plugins[0].name: must match [a-z][a-z0-9_-]*, got "My.Plugin" (line 2)`}},
		{"empty plugin path", "plugins:\n  - {name: a, path: ''}\n",
			nil, []string{"plugins[0].path: must not be empty (line 2)"}},
		{"bad plugin sha256", "plugins:\n  - {name: a, path: a, sha256: 1234}\n",
			nil, []string{"plugins[0].sha256: must be a string, got 1234 (line 2)"}},
		{"short plugin sha256", "plugins:\n  - {name: a, path: a, sha256: beef}\n",
			nil, []string{"plugins[0].sha256: must be 64 hexadecimal characters (a SHA-256 digest) (line 2)"}},
		{"plugin env not a list", "plugins:\n  - {name: a, path: a, env: PATH}\n",
			nil, []string{`plugins[0].env: must be a list, got "PATH" (line 2)`}},
		{"plugin env entries", "plugins:\n  - name: a\n    path: a\n    env: [1BAD, \"SECRET x=hunter2\", CAPGATE_PLUGIN=x, PLUGIN_MIN_PORT=1, TZ=UTC, TZ, [x]]\n",
			nil, []string{
				`plugins[0].env[0]: must be NAME or NAME=value with NAME of letters, digits and _ (not starting with a digit), got "1BAD" (line 4)`,
				`plugins[0].env[1]: must be NAME or NAME=value with NAME of letters, digits and _ (not starting with a digit), got "SECRET x=…" (line 4)`,
				"plugins[0].env[2]: CAPGATE_PLUGIN is set by the host for the plugin handshake and cannot be configured (line 4)",
				"plugins[0].env[3]: PLUGIN_MIN_PORT is set by the host for the plugin handshake and cannot be configured (line 4)",
				"plugins[0].env[5]: TZ is listed twice (also plugins[0].env[4]) (line 4)",
				"plugins[0].env[6]: must be a string, got a list (line 4)",
			}},
		{"plugin max_in_flight", "plugins:\n  - {name: a, path: a, max_in_flight: 0}\n  - {name: b, path: b, max_in_flight: many}\n",
			nil, []string{"plugins[0].max_in_flight: must be between 1 and 1000000, got 0 (line 2)", `plugins[1].max_in_flight: must be an integer, got "many" (line 3)`}},
		{"plugin restart keys", "plugins:\n  - name: a\n    path: a\n    restart: {initial_backoff: 0s, max_backoff: soon, jitter: 2, max_restarts: -1, window: 1h, tries: 3}\n",
			nil, []string{
				"plugins[0].restart.initial_backoff: must be more than 0, got 0s (line 4)",
				`plugins[0].restart.max_backoff: must be a duration such as "30s" or "1m30s", got "soon" (line 4)`,
				"plugins[0].restart.jitter: must be between 0 and 1, got 2 (line 4)",
				"plugins[0].restart.max_restarts: must be between 0 (never restart) and 1000, got -1 (line 4)",
				"plugins[0].restart.tries: unknown key; known keys are initial_backoff, max_backoff, jitter, max_restarts, window (line 4)",
			}},
		{"plugin restart backoffs crossed", "plugins:\n  - name: a\n    path: a\n    restart: {initial_backoff: 1m}\n",
			nil, []string{"plugins[0].restart: max_backoff (30s) must be at least initial_backoff (1m0s) (line 4)"}},
		{"plugin restart not a mapping", "plugins:\n  - {name: a, path: a, restart: always}\n",
			nil, []string{`plugins[0].restart: must be a mapping, got "always" (line 2)`}},
		{"database dsn scheme", "database:\n  dsn: mysql://u:secret@h/db\n",
			nil, []string{"database.dsn: dsn must be a postgres:// or postgresql:// URL (PostgreSQL), or left out for SQLite in the data directory; other schemes and key=value strings are not accepted (line 2)"}},
		{"unknown database key", "database:\n  url: x\n",
			nil, []string{"database.url: unknown key; known keys are dsn (line 2)"}},
		{"idempotency retention", "idempotency:\n  retention: 0s\n",
			nil, []string{"idempotency.retention: must be greater than zero, got 0s (line 2)"}},
		{"max_result_bytes too small", "max_result_bytes: 10\n",
			nil, []string{"max_result_bytes: must be between 1024 and 67108864, got 10 (line 1)"}},
		{"http max_in_flight", "http:\n  max_in_flight: 0\n",
			nil, []string{"http.max_in_flight: must be between 1 and 1000000, got 0 (line 2)"}},

		// Values out of range.
		{"listen without port", "listen: localhost\n",
			nil, []string{`listen: must be host:port such as 127.0.0.1:8080, got "localhost" (line 1)`}},
		{"listen port too big", "listen: 127.0.0.1:99999\n",
			nil, []string{`listen: port must be a number from 0 to 65535, got "99999" (line 1)`}},
		{"listen port named", "listen: 127.0.0.1:http\n",
			nil, []string{`listen: port must be a number from 0 to 65535, got "http" (line 1)`}},
		{"empty data_dir", "data_dir: ''\n",
			nil, []string{"data_dir: must not be empty (line 1)"}},
		{"max_results zero", "max_results: 0\n",
			nil, []string{"max_results: must be between 1 and 1000, got 0 (line 1)"}},
		{"max_results too big", "max_results: 1001\n",
			nil, []string{"max_results: must be between 1 and 1000, got 1001 (line 1)"}},
		{"events buffer too big", "events_buffer_size: 1000001\n",
			nil, []string{"events_buffer_size: must be between 1 and 1000000, got 1000001 (line 1)"}},
		{"body limit zero", "http: {max_body_bytes: 0}\n",
			nil, []string{"http.max_body_bytes: must be between 1 and 67108864, got 0 (line 1)"}},
		{"body limit over 64 MiB", "http: {max_body_bytes: 67108865}\n",
			nil, []string{"http.max_body_bytes: must be between 1 and 67108864, got 67108865 (line 1)"}},
		{"zero request timeout", "http: {request_timeout: 0s}\n",
			nil, []string{"http.request_timeout: must be greater than zero, got 0s (line 1)"}},
		{"negative shutdown timeout", "http: {shutdown_timeout: -1s}\n",
			nil, []string{"http.shutdown_timeout: must be greater than zero, got -1s (line 1)"}},
		{"bad log level", "log: {level: loud}\n",
			nil, []string{`log.level: must be one of debug, info, warn, error, got "loud" (line 1)`}},
		{"bad log format", "log: {format: xml}\n",
			nil, []string{`log.format: must be text or json, got "xml" (line 1)`}},
		{"wildcard origin", "http: {allowed_origins: ['*']}\n",
			nil, []string{`http.allowed_origins[0]: must be an origin such as https://app.example.com or http://localhost:3000, got "*" (line 1)`}},
		{"bad origins", "http:\n  allowed_origins:\n    - https://a.example/app\n    - ftp://a.example\n    - https://\n    - https://u@a.example\n    - https://a.example?x=1\n    - https://a.example:0\n",
			nil, []string{
				`http.allowed_origins[0]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://a.example/app" (line 3)`,
				`http.allowed_origins[1]: must be an origin such as https://app.example.com or http://localhost:3000, got "ftp://a.example" (line 4)`,
				`http.allowed_origins[2]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://" (line 5)`,
				`http.allowed_origins[3]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://u@a.example" (line 6)`,
				`http.allowed_origins[4]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://a.example?x=1" (line 7)`,
				`http.allowed_origins[5]: must be an origin such as https://app.example.com or http://localhost:3000, got "https://a.example:0" (line 8)`,
			}},

		// ${VAR} references.
		{"unset variable", "tokens:\n  - token: ${CG_TEST_UNSET}\n",
			nil, []string{"tokens[0].token: environment variable CG_TEST_UNSET is not set (write ${CG_TEST_UNSET:-default} to give a default) (line 2)"}},
		{"unset variable in plugin config", "plugins:\n  - name: a\n    path: a\n    config:\n      db: {Password: '${CG_TEST_UNSET}'}\n",
			nil, []string{"plugins[0].config.db.Password: environment variable CG_TEST_UNSET is not set (write ${CG_TEST_UNSET:-default} to give a default) (line 5)"}},
		{"unterminated reference", "data_dir: ${CG_TEST\n",
			nil, []string{`data_dir: unterminated "${CG_TEST": a reference is written ${NAME} or ${NAME:-default} (line 1)`}},
		{"bad variable name", "data_dir: ${1DIR}\n",
			nil, []string{"data_dir: invalid reference ${1DIR}: a variable name is letters, digits and _, not starting with a digit (line 1)"}},
		{"expanded value wrong type", "max_results: ${CG_TEST_N}\n",
			map[string]string{"CG_TEST_N": "many"}, []string{`max_results: must be an integer, got "many" (line 1)`}},

		// Environment variables.
		{"bad env integer", "max_results: 10\n",
			map[string]string{"CAPGATE_MAX_RESULTS": "ten"}, []string{`max_results: must be an integer, got "ten" (from CAPGATE_MAX_RESULTS)`}},
		{"bad env boolean", "",
			map[string]string{"CAPGATE_ENABLED": "maybe"}, []string{`enabled: must be true or false, got "maybe" (from CAPGATE_ENABLED)`}},
		{"bad env duration", "",
			map[string]string{"CAPGATE_HTTP_REQUEST_TIMEOUT": "soon"}, []string{`http.request_timeout: must be a duration such as "30s" or "1m30s", got "soon" (from CAPGATE_HTTP_REQUEST_TIMEOUT)`}},
		{"bad env listen", "listen: 127.0.0.1:80\n",
			map[string]string{"CAPGATE_LISTEN": "nowhere"}, []string{`listen: must be host:port such as 127.0.0.1:8080, got "nowhere" (from CAPGATE_LISTEN)`}},
		{"bad env range", "",
			map[string]string{"CAPGATE_EVENTS_BUFFER_SIZE": "0"}, []string{"events_buffer_size: must be between 1 and 1000000, got 0 (from CAPGATE_EVENTS_BUFFER_SIZE)"}},
		{"bad env scope", "",
			map[string]string{"CAPGATE_DEFAULT_SCOPE": "write"}, []string{`default_scope: must be one of read, action, admin, got "write" (from CAPGATE_DEFAULT_SCOPE)`}},
		{"bad env role", "",
			map[string]string{"CAPGATE_DEFAULT_ROLE": "root"}, []string{`default_role: role "root" is not defined under roles (no roles are defined) (from CAPGATE_DEFAULT_ROLE)`}},
		{"bad env log level", "",
			map[string]string{"CAPGATE_LOG_LEVEL": "loud"}, []string{`log.level: must be one of debug, info, warn, error, got "loud" (from CAPGATE_LOG_LEVEL)`}},
		{"bad env pack value", "packs: {booking: false}\n",
			map[string]string{"CAPGATE_PACKS_BOOKING": "perhaps"}, []string{`packs.booking: must be true or false, got "perhaps" (from CAPGATE_PACKS_BOOKING)`}},
		{"lower-case pack variable", "",
			map[string]string{"CAPGATE_PACKS_booking": "true"}, []string{"packs.booking: write the variable in upper case, as CAPGATE_PACKS_BOOKING (from CAPGATE_PACKS_booking)"}},
		{"bad pack name in variable", "",
			map[string]string{"CAPGATE_PACKS_MY-PACK": "true"}, []string{"packs.my-pack: pack name must match [a-z][a-z0-9_]* (from CAPGATE_PACKS_MY-PACK)"}},

		// YAML features.
		{"bad merge", "http:\n  <<: 5\n",
			nil, []string{"http[\"<<\"]: must be a mapping or a list of mappings, got 5 (line 2)"}},
		{"bad merge item", "http:\n  <<: [5]\n",
			nil, []string{"http[\"<<\"]: must be a mapping or a list of mappings, got 5 (line 2)"}},
		{"extension block still checked for references", "x-common: &c {a: 1}\nlog:\n  <<: *c\n",
			nil, []string{"log.a: unknown key; known keys are level, format (line 1)"}},

		// Governance: labels, switches and limits.
		{"token labels", "tokens:\n  - {token: abcdefgh, label: Desk}\n  - {token: abcdefgh-2, label: a}\n  - {token: abcdefgh-3, label: a}\n",
			nil, []string{
				`tokens[0].label: must be 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit, got "Desk" (line 2)`,
				`tokens[2].label: label "a" is also tokens[1]'s; audit records and rate limits tell tokens apart by label (line 4)`,
			}},
		{"disabled capabilities", "disabled_capabilities: [booking.create, Booking, 7]\n",
			nil, []string{
				`disabled_capabilities[1]: must be a capability name such as "booking.create", got "Booking" (line 1)`,
				`disabled_capabilities[2]: must be a string, got 7 (line 1)`,
			}},
		{"limits", "roles: {viewer: []}\nlimits:\n  default: {rate: 10/d}\n  per_token: {burst: 5}\n  roles: {ghost: {rate: 1/s}, viewer: {rate: 1/s, burst: 0}}\n  capabilities: {Booking: {rate: 1/s}, booking.create: {rate: 1/s, every: 2}}\n  total: 1\n",
			nil, []string{
				`limits.default.rate: rate "10/d": the unit must be s, m or h (line 3)`,
				`limits.default: needs a rate, such as {rate: 10/s} or {rate: 5/m, burst: 10} (line 3)`,
				`limits.per_token: needs a rate, such as {rate: 10/s} or {rate: 5/m, burst: 10} (line 4)`,
				`limits.roles.ghost: role "ghost" is not defined under roles (defined: viewer) (line 5)`,
				`limits.roles.viewer.burst: must be from 1 to 1000000, got 0 (line 5)`,
				`limits.capabilities.Booking: must be keyed by a capability name such as "booking.create", got "Booking" (line 6)`,
				`limits.capabilities["booking.create"].every: unknown key; known keys are rate, burst (line 6)`,
				`limits.total: unknown key; known keys are default, per_token, roles, capabilities, redis_url, on_redis_error (line 7)`,
			}},
		{"risk", "risk:\n  capabilities: {Booking: safe, booking.create: risky, booking.cancel: 3, booking.get: \"\"}\n  packs: {Booking: dangerous, booking: blocked}\n  tools: {}\n" +
			"  in_band: {capabilities: {Booking: false, booking.add: maybe, booking.get: [1]}, packs: {Booking: false}, tools: {}}\n",
			nil, []string{
				`risk.capabilities.Booking: must be keyed by a capability name such as "booking.create", got "Booking" (line 2)`,
				`risk.capabilities["booking.create"]: must be one of safe, review_required, dangerous, blocked, got "risky" (line 2)`,
				`risk.capabilities["booking.cancel"]: must be a string, got 3 (line 2)`,
				`risk.capabilities["booking.get"]: must be one of safe, review_required, dangerous, blocked, got "" (line 2)`,
				`risk.packs.Booking: must be keyed by a pack name such as "booking", got "Booking" (line 3)`,
				`risk.tools: unknown key; known keys are capabilities, packs, in_band (line 4)`,
				`risk.in_band.capabilities.Booking: must be keyed by a capability name such as "booking.add_resource", got "Booking" (line 5)`,
				`risk.in_band.capabilities["booking.add"]: must be true or false, got "maybe" (line 5)`,
				`risk.in_band.capabilities["booking.get"]: must be true or false, got a list (line 5)`,
				`risk.in_band.packs.Booking: must be keyed by a pack name such as "booking", got "Booking" (line 5)`,
				`risk.in_band.tools: unknown key; known keys are capabilities, packs (line 5)`,
			}},
		{"approvals", "approvals: {ttl: 10s, four_eyes: maybe, grace: 1, confirm_ttl: 5s, confirm_key: short-secret, max_pending: 0}\n",
			nil, []string{
				`approvals.grace: unknown key; known keys are ttl, four_eyes, confirm_ttl, confirm_key, max_pending (line 1)`,
				`approvals.ttl: must be at least a minute, so a human has time to decide, got 10s (line 1)`,
				`approvals.four_eyes: must be true or false, got "maybe" (line 1)`,
				`approvals.confirm_ttl: must be between 30s (time for the user to read the question) and 24h, got 5s (line 1)`,
				`approvals.confirm_key: must be at least 32 bytes (a random one: openssl rand -base64 32), got 12; leave it empty to use a key kept in the approvals database (line 1)`,
				`approvals.max_pending: must be between 1 and 10000, got 0 (line 1)`,
			}},
		{"tasks", "tasks: {enabled: sometimes, ttl: 10s, run_timeout: 0s, max_per_principal: 0, poll_interval: 5ms, queue: 1}\n",
			nil, []string{
				`tasks.queue: unknown key; known keys are enabled, ttl, run_timeout, max_per_principal, poll_interval (line 1)`,
				`tasks.enabled: must be true or false, got "sometimes" (line 1)`,
				`tasks.ttl: must be between 1m (time for a client to poll) and 720h, got 10s (line 1)`,
				`tasks.run_timeout: must be greater than zero, got 0s (line 1)`,
				`tasks.max_per_principal: must be between 1 and 10000, got 0 (line 1)`,
				`tasks.poll_interval: must be between 100ms and 1m, got 5ms (line 1)`,
			}},
		{"tasks run longer than kept", "tasks: {ttl: 1h, run_timeout: 2h}\n",
			nil, []string{
				`tasks.run_timeout: must not exceed tasks.ttl (1h0m0s): a task must outlive its run, got 2h0m0s (line 1)`,
			}},
		{"metrics listener", "listen: 127.0.0.1:8080\nmetrics: {listen: 127.0.0.1:8080}\n",
			nil, []string{
				`metrics.listen: must differ from listen (127.0.0.1:8080): metrics and profiles are served apart from the MCP endpoint (line 2)`,
			}},
		{"metrics listener not an address", "metrics: {listen: ninety, port: 1}\n",
			nil, []string{
				`metrics.port: unknown key; known keys are listen, allowed_hosts (line 1)`,
				`metrics.listen: must be host:port such as 127.0.0.1:8080, got "ninety" (line 1)`,
			}},
		{"tracing", "tracing:\n  otlp_endpoint: collector:4317\n  otlp_protocol: thrift\n  sample_ratio: 1.5\n  service_name: \"\"\n  exporter: otlp\n",
			nil, []string{
				`tracing.otlp_endpoint: must be empty (no tracing) or a collector's URL such as http://127.0.0.1:4318 (plaintext) or https://collector.example.com:4318 (TLS), got "collector:4317" (line 2)`,
				`tracing.otlp_protocol: must be grpc or http/protobuf, got "thrift" (line 3)`,
				`tracing.sample_ratio: must be between 0 (record no trace the host starts) and 1 (every one), got 1.5 (line 4)`,
				`tracing.service_name: must be 1 to 255 characters, none a control character, got "" (line 5)`,
				`tracing.exporter: unknown key; known keys are otlp_endpoint, otlp_protocol, headers, sample_ratio, service_name (line 6)`,
			}},
		{"tracing endpoint", "tracing: {otlp_endpoint: \"ftp://collector:21\"}\n",
			nil, []string{`tracing.otlp_endpoint: scheme must be http (plaintext) or https (TLS), got "ftp" (line 1)`}},
		{"tracing endpoint with credentials", "tracing: {otlp_endpoint: \"https://user:s3cret@collector:4318\"}\n",
			nil, []string{`tracing.otlp_endpoint: must not carry credentials: send them in tracing.headers (line 1)`}},
		{"tracing endpoint path over grpc", "tracing: {otlp_endpoint: \"http://collector:4317/v1/traces\", otlp_protocol: grpc}\n",
			nil, []string{`tracing.otlp_endpoint: has a path (/v1/traces), which OTLP over gRPC does not use: give scheme, host and port, such as http://127.0.0.1:4317 (line 1)`}},
		{"tracing from env", "",
			map[string]string{"CAPGATE_TRACING_SAMPLE_RATIO": "half", "CAPGATE_TRACING_OTLP_ENDPOINT": "http://collector:99999"},
			[]string{
				`tracing.otlp_endpoint: port must be a number from 0 to 65535, got "99999" (from CAPGATE_TRACING_OTLP_ENDPOINT)`,
				`tracing.sample_ratio: must be a number, got "half" (from CAPGATE_TRACING_SAMPLE_RATIO)`,
			}},
		// A header's value may be a secret: no problem repeats it.
		{"tracing headers", "tracing:\n  headers:\n    \"bad name\": x\n    grpc-timeout: 1s\n    Authorization: \"Bearer s3cret\\r\\nX-Evil: 1\"\n    authorization: again\n    x-list: [a]\n",
			nil, []string{
				`tracing.headers["bad name"]: must be named as an HTTP header (letters, digits and !#$%&'*+.^_` + "`" + `|~-, at most 128) (line 3)`,
				`tracing.headers.grpc-timeout: grpc- headers are the gRPC transport's own (line 4)`,
				`tracing.headers.Authorization: must hold no control character (a line break would split the header) (line 5)`,
				`tracing.headers.authorization: is also Authorization: header names are case-insensitive (line 6)`,
				`tracing.headers.x-list: must be a string, got a list (line 7)`,
			}},
		{"limits counter", "limits:\n  redis_url: http://cache:6379\n  on_redis_error: maybe\n",
			nil, []string{
				`limits.redis_url: must be a redis:// or rediss:// URL (line 2)`,
				`limits.on_redis_error: must be refuse (calls a limit applies to are refused while Redis is unreachable) or allow (they are admitted uncounted), got "maybe" (line 3)`,
			}},
		{"audit", "audit:\n  retention: 0s\n  on_unavailable: ignore\n  size: 1\n",
			nil, []string{
				`audit.retention: must be greater than zero, got 0s (line 2)`,
				`audit.on_unavailable: must be refuse_actions (actions are refused while the audit trail cannot be written; reads carry on) or allow (calls carry on unrecorded), got "ignore" (line 3)`,
				`audit.size: unknown key; known keys are enabled, retention, on_unavailable (line 4)`,
			}},
		{"refusals", "refusals:\n  ownership: hide\n  step: 1\n",
			nil, []string{
				`refusals.ownership: must be distinct (another user's target is refused at step ownership) or not_found (it answers exactly as a target that does not exist), got "hide" (line 2)`,
				`refusals.step: unknown key; known keys are ownership (line 3)`,
			}},
		{"on_redis_error without redis", "limits:\n  on_redis_error: allow\n",
			nil, []string{`limits.on_redis_error: applies only with limits.redis_url (line 2)`}},

		// Many problems at once come back together, in file order, with
		// the environment's last.
		{"every problem at once", "max_results: ten\nlistn: x\ntokens:\n  - abc\n",
			map[string]string{"CAPGATE_LOG_FORMAT": "xml"}, []string{
				`max_results: must be an integer, got "ten" (line 1)`,
				"listn: unknown key; " + topKnown + " (line 2)",
				"tokens[0]: must be at least 8 characters (line 4)",
				`log.format: must be text or json, got "xml" (from CAPGATE_LOG_FORMAT)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, tt.env)
			cfg, err := Parse([]byte(tt.yaml), "/etc/capgate")
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("returned a config with the error")
			}
			if got := problemLines(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestProblemsNeverShowTokens: a mistyped token is still a secret.
func TestProblemsNeverShowTokens(t *testing.T) {
	isolateEnv(t, nil)
	secrets := []string{"s3cr:t-value", "dup-secret-1", "tiny"}
	yaml := "tokens:\n  - '" + secrets[0] + "'\n  - " + secrets[1] + "\n  - " + secrets[1] + "\n  - {token: " + secrets[2] + ", scope: x}\n"
	_, err := Parse([]byte(yaml), "")
	if err == nil {
		t.Fatal("accepted")
	}
	if n := len(problemLines(t, err)); n != 4 {
		t.Fatalf("want 4 problems, got %d:\n%v", n, err)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows token %q:\n%v", s, err)
		}
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"bad indentation", "listen: a\n  b: c\n", "config: yaml: line 2: mapping values are not allowed in this context"},
		{"bad second document", "listen: a:1\n---\n[\n", "config: yaml: line 3: did not find expected node content"},
		{"two documents", "listen: a:1\n---\nlisten: b:2\n", "config: line 2: a config file holds one YAML document, found a second"},
		{"unclosed flow list", "tokens: [abcdefgh\n", "config: yaml: line 1: did not find expected ',' or ']'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, nil)
			_, err := Parse([]byte(tt.yaml), "")
			var cerr *Error
			if err == nil || errors.As(err, &cerr) {
				t.Fatalf("err = %v, want a syntax error", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}
}

func TestAliasLimits(t *testing.T) {
	// Each level multiplies the one before by ten: 10^7 values in all.
	var b strings.Builder
	b.WriteString("x-l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i <= 6; i++ {
		b.WriteString("x-l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	b.WriteString("plugins:\n  - name: a\n    path: a\n    config: {big: *l6}\n")
	isolateEnv(t, nil)
	_, err := Parse([]byte(b.String()), "")
	got := problemLines(t, err)
	if len(got) != 1 || !strings.HasPrefix(got[0], "plugins[0].config.big[") ||
		!strings.HasSuffix(got[0], ": plugin config blocks expand to more than 1000000 values (line 1)") {
		t.Errorf("got %q, want one problem about the expansion limit inside plugins[0].config.big", got)
	}
}

func TestNestingLimits(t *testing.T) {
	deep := strings.Repeat("[", 70) + strings.Repeat("]", 70)
	tests := []struct{ name, yaml, prefix string }{
		{"alias inside itself", "plugins:\n  - name: a\n    path: a\n    config: &x {a: *x}\n", "plugins[0].config.a.a.a."},
		{"merge of itself", "log: &x {<<: *x}\n", "log"},
		{"deep lists", "plugins:\n  - name: a\n    path: a\n    config: {a: " + deep + "}\n", "plugins[0].config.a[0][0][0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateEnv(t, nil)
			_, err := Parse([]byte(tt.yaml), "")
			got := problemLines(t, err)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.prefix) || !strings.Contains(got[0], ": nested too deeply (line ") {
				t.Errorf("got %q, want one \"nested too deeply\" problem under %s", got, tt.prefix)
			}
		})
	}
}
