package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults of a connection's optional keys.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxTokens  = 1024
	DefaultMaxRetries = 2
	// maxMaxRetries bounds max_retries: every retry is spent inside the
	// connection's timeout anyway, so more would only hide an outage.
	maxMaxRetries = 10
)

// KindOpenAI is any endpoint speaking OpenAI's Chat Completions API:
// OpenAI itself, Ollama, vLLM, the llama.cpp server, LM Studio, …
const KindOpenAI = "openai"

var errTrailing = errors.New("data after the JSON object")

var slugPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// Config is the plugin's config block.
type Config struct {
	// Connection is the slug of the connection llm.ask answers with. It
	// may be left out when there is only one.
	Connection  string             `json:"connection"`
	Connections []ConnectionConfig `json:"connections"`
}

// ConnectionConfig is one entry of connections, as the operator wrote it.
type ConnectionConfig struct {
	Slug    string `json:"slug"`
	Kind    string `json:"kind"`
	BaseURL string `json:"base_url"`
	Model   string `json:"model"`
	// APIKey may be empty: Ollama and most self-hosted servers want none.
	APIKey string `json:"api_key"`
	// Timeout is a Go duration ("60s", "2m") spanning the whole request,
	// retries included.
	Timeout    string `json:"timeout"`
	MaxTokens  *int   `json:"max_tokens"`
	MaxRetries *int   `json:"max_retries"`
}

// Connection is a validated connection.
type Connection struct {
	Slug       string
	Kind       string
	BaseURL    string
	Model      string
	APIKey     string
	Timeout    time.Duration
	MaxTokens  int
	MaxRetries int
}

// String describes the connection for logs; it never includes the key, and
// credentials in the URL are masked.
func (c Connection) String() string {
	return fmt.Sprintf("%s (%s, model %s at %s)", c.Slug, c.Kind, c.Model, redactURL(c.BaseURL))
}

// ParseConfig decodes and validates the config block and picks the
// connection its connection key names. Every error names the key path that
// is wrong, and none quotes api_key.
func ParseConfig(raw json.RawMessage) (chosen Connection, all []Connection, err error) {
	// Each connection is decoded on its own so an error can name its index;
	// the json package's own messages name neither.
	var top struct {
		Connection  string            `json:"connection"`
		Connections []json.RawMessage `json:"connections"`
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = json.RawMessage("{}")
	}
	if err := decodeStrict(raw, &top); err != nil {
		return Connection{}, nil, fmt.Errorf("llm config: %s", describeDecodeError("", err))
	}
	if len(top.Connections) == 0 {
		return Connection{}, nil, errors.New("llm config: connections: at least one connection is required, " +
			"e.g. {slug: local, kind: openai, base_url: http://127.0.0.1:11434/v1, model: llama3.2}")
	}
	seen := map[string]int{}
	for i, r := range top.Connections {
		path := fmt.Sprintf("connections[%d]", i)
		var cc ConnectionConfig
		if err := decodeStrict(r, &cc); err != nil {
			return Connection{}, nil, fmt.Errorf("llm config: %s", describeDecodeError(path, err))
		}
		c, err := validate(path, cc)
		if err != nil {
			return Connection{}, nil, fmt.Errorf("llm config: %w", err)
		}
		if j, dup := seen[c.Slug]; dup {
			return Connection{}, nil, fmt.Errorf("llm config: %s.slug: %q is already the slug of connections[%d]; slugs must be unique", path, c.Slug, j)
		}
		seen[c.Slug] = i
		all = append(all, c)
	}
	chosen, err = choose(all, top.Connection)
	return chosen, all, err
}

// choose picks the connection llm.ask answers with.
func choose(all []Connection, slug string) (Connection, error) {
	slugs := make([]string, len(all))
	for i, c := range all {
		slugs[i] = c.Slug
	}
	if slug == "" {
		if len(all) == 1 {
			return all[0], nil
		}
		return Connection{}, fmt.Errorf("llm config: connection: not set, and there are %d connections (%s): "+
			"set connection to the slug of the one llm.ask should use", len(all), strings.Join(slugs, ", "))
	}
	if i := slices.Index(slugs, slug); i >= 0 {
		return all[i], nil
	}
	return Connection{}, fmt.Errorf("llm config: connection: %q is the slug of none of connections; their slugs are: %s",
		slug, strings.Join(slugs, ", "))
}

func validate(path string, cc ConnectionConfig) (Connection, error) {
	c := Connection{
		Slug: cc.Slug, Kind: cc.Kind, BaseURL: strings.TrimRight(cc.BaseURL, "/"), Model: strings.TrimSpace(cc.Model),
		APIKey: cc.APIKey, Timeout: DefaultTimeout, MaxTokens: DefaultMaxTokens, MaxRetries: DefaultMaxRetries,
	}
	switch {
	case cc.Slug == "":
		return c, fmt.Errorf("%s.slug: required, e.g. local or openai", path)
	case !slugPattern.MatchString(cc.Slug):
		return c, fmt.Errorf("%s.slug: %q must be lower-case letters, digits, - and _, starting with a letter (at most 64)", path, cc.Slug)
	case cc.Kind == "":
		return c, fmt.Errorf("%s.kind: required; the known kind is %q (any OpenAI-compatible Chat Completions endpoint)", path, KindOpenAI)
	case cc.Kind != KindOpenAI:
		return c, fmt.Errorf("%s.kind: unknown kind %q; the known kind is %q (any OpenAI-compatible Chat Completions endpoint)", path, cc.Kind, KindOpenAI)
	}
	if err := checkBaseURL(cc.BaseURL); err != nil {
		return c, fmt.Errorf("%s.base_url: %w", path, err)
	}
	if c.Model == "" {
		return c, fmt.Errorf("%s.model: required, the model name the endpoint knows, e.g. gpt-4o-mini or llama3.2", path)
	}
	if cc.Timeout != "" {
		d, err := time.ParseDuration(cc.Timeout)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s.timeout: %q is not a positive Go duration such as 30s or 2m", path, cc.Timeout)
		}
		c.Timeout = d
	}
	if cc.MaxTokens != nil {
		if *cc.MaxTokens < 1 {
			return c, fmt.Errorf("%s.max_tokens: %d must be at least 1", path, *cc.MaxTokens)
		}
		c.MaxTokens = *cc.MaxTokens
	}
	if cc.MaxRetries != nil {
		if *cc.MaxRetries < 0 || *cc.MaxRetries > maxMaxRetries {
			return c, fmt.Errorf("%s.max_retries: %d must be between 0 and %d", path, *cc.MaxRetries, maxMaxRetries)
		}
		c.MaxRetries = *cc.MaxRetries
	}
	return c, nil
}

// checkBaseURL accepts an absolute http(s) URL. The value is quoted only
// masked: an operator may have put credentials in it.
func checkBaseURL(s string) error {
	if s == "" {
		return errors.New("required, the API root such as https://api.openai.com/v1 or http://127.0.0.1:11434/v1")
	}
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL; write the API root such as https://api.openai.com/v1")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q must be an http:// or https:// URL", redactURL(s))
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", redactURL(s))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not carry a query or fragment: the client appends /chat/completions to it", redactURL(s))
	}
	return nil
}

// redactURL masks a password in u, and the whole URL when it does not parse.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// describeDecodeError turns the json package's error into one naming the key
// path. It never quotes a value: a mistyped api_key must not be echoed.
func describeDecodeError(path string, err error) string {
	join := func(field string) string {
		if path == "" {
			return field
		}
		if field == "" {
			return path
		}
		return path + "." + field
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: must be %s, not a JSON %s", join(te.Field), describeType(te.Type.Kind().String()), te.Value)
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("%s: unknown key %s", join(""), f)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, errTrailing) {
		return fmt.Sprintf("%s: not valid JSON", join(""))
	}
	if path == "" {
		return "must be an object with a connections list (and connection, the slug of the one to use)"
	}
	return fmt.Sprintf("%s: must be an object {slug, kind, base_url, model, api_key?, timeout?, max_tokens?, max_retries?}", path)
}

func describeType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "ptr":
		return "a whole number"
	case "slice":
		return "a list"
	case "struct":
		return "an object"
	}
	return "a " + kind
}
