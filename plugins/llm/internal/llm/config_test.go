package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func registerQuiet(p *sdk.Plugin) {
	llm.Register(p, llm.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func sdkPluginQuiet() *sdk.Plugin {
	p := sdk.New("llm", "test")
	registerQuiet(p)
	return p
}

func TestParseConfigDefaultsAndValues(t *testing.T) {
	c, all, err := llm.ParseConfig(json.RawMessage(`{"connections":[{"slug":"local","kind":"openai","base_url":"http://127.0.0.1:11434/v1/","model":"llama3.2"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Connection{Slug: "local", Kind: "openai", BaseURL: "http://127.0.0.1:11434/v1", Model: "llama3.2",
		Timeout: llm.DefaultTimeout, MaxTokens: llm.DefaultMaxTokens, MaxRetries: llm.DefaultMaxRetries}
	if c != want || len(all) != 1 {
		t.Errorf("got %+v (%d), want %+v", c, len(all), want)
	}
	c, _, err = llm.ParseConfig(json.RawMessage(`{"connection":"oa","connections":[{"slug":"oa","kind":"openai","base_url":"https://api.openai.com/v1","model":"gpt-4o-mini","api_key":"k","timeout":"2m","max_tokens":10,"max_retries":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Timeout != 2*time.Minute || c.MaxTokens != 10 || c.MaxRetries != 0 || c.APIKey != "k" {
		t.Errorf("got %+v", c)
	}
	if s := c.String(); strings.Contains(s, "k)") || !strings.Contains(s, "gpt-4o-mini") {
		t.Errorf("String() = %q", s)
	}
}

func TestParseConfigErrorsNameTheKey(t *testing.T) {
	good := `{"slug":"a","kind":"openai","base_url":"http://h/v1","model":"m"}`
	with := func(kv string) string {
		return `{"connection":"a","connections":[` + good + `,{"slug":"b","kind":"openai","base_url":"http://h/v1","model":"m",` + kv + `}]}`
	}
	for _, tc := range []struct{ cfg, want string }{
		{`{}`, "connections: at least one connection is required"},
		{`{"connections":[]}`, "connections: at least one connection is required"},
		{`{"connexions":[]}`, `unknown key "connexions"`},
		{`{"llm_connection_slug":"a","connections":[` + good + `]}`, `unknown key "llm_connection_slug"`},
		{`{"connection":["a"],"connections":[` + good + `]}`, "connection: must be a string, not a JSON array"},
		{`{"connections":{}}`, "connections: must be a list"},
		{`{"connections":["x"]}`, "connections[0]: must be an object"},
		{`{"connections":[` + good + `,{"kind":"openai","base_url":"http://h/v1","model":"m"}]}`, "connections[1].slug: required"},
		{`{"connections":[` + good + `,` + good + `]}`, `connections[1].slug: "a" is already the slug of connections[0]`},
		{with(`"slug":"Bad Slug"`), `connections[1].slug: "Bad Slug" must be lower-case`},
		{with(`"kind":"anthropic"`), `connections[1].kind: unknown kind "anthropic"; the known kind is "openai"`},
		{with(`"kind":""`), "connections[1].kind: required"},
		{with(`"base_url":""`), "connections[1].base_url: required"},
		{with(`"base_url":"127.0.0.1:11434"`), "connections[1].base_url:"},
		{with(`"base_url":"ftp://h/v1"`), `connections[1].base_url: "ftp://h/v1" must be an http:// or https:// URL`},
		{with(`"base_url":"http:///v1"`), "connections[1].base_url: \"http:///v1\" has no host"},
		{with(`"base_url":"http://h/v1?x=1"`), "must not carry a query"},
		{with(`"model":" "`), "connections[1].model: required"},
		{with(`"timeout":"soon"`), `connections[1].timeout: "soon" is not a positive Go duration`},
		{with(`"timeout":"-1s"`), `connections[1].timeout: "-1s" is not a positive`},
		{with(`"timeout":60`), "connections[1].timeout: must be a string"},
		{with(`"max_tokens":0`), "connections[1].max_tokens: 0 must be at least 1"},
		{with(`"max_tokens":"many"`), "connections[1].max_tokens: must be a whole number"},
		{with(`"max_retries":11`), "connections[1].max_retries: 11 must be between 0 and 10"},
		{with(`"max_retries":-1`), "connections[1].max_retries: -1 must be between"},
		{with(`"apikey":"x"`), `connections[1]: unknown key "apikey"`},
		{`{"connections":[` + good + `]} trailing`, "not valid JSON"},
	} {
		_, _, err := llm.ParseConfig(json.RawMessage(tc.cfg))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "llm config: ") {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.cfg, err, tc.want)
		}
	}
}

func TestConnectionSelection(t *testing.T) {
	const conns = `"connections":[{"slug":"local","kind":"openai","base_url":"http://h/v1","model":"m"},{"slug":"cloud","kind":"openai","base_url":"https://c/v1","model":"n"}]`
	two := func(connection string) json.RawMessage {
		if connection == "" {
			return json.RawMessage(`{` + conns + `}`)
		}
		return json.RawMessage(`{"connection":"` + connection + `",` + conns + `}`)
	}
	if c, _, err := llm.ParseConfig(two("cloud")); err != nil || c.Slug != "cloud" {
		t.Errorf("cloud: %+v %v", c, err)
	}
	if _, _, err := llm.ParseConfig(two("")); err == nil ||
		!strings.Contains(err.Error(), "connection: not set, and there are 2 connections (local, cloud): set connection to the slug of the one llm.ask should use") {
		t.Errorf("unset connection: %v", err)
	}
	if _, _, err := llm.ParseConfig(two("gpu")); err == nil || !strings.Contains(err.Error(), `connection: "gpu" is the slug of none of connections; their slugs are: local, cloud`) {
		t.Errorf("unknown connection: %v", err)
	}
	const one = `"connections":[{"slug":"local","kind":"openai","base_url":"http://h/v1","model":"m"}]`
	if c, _, err := llm.ParseConfig(json.RawMessage(`{` + one + `}`)); err != nil || c.Slug != "local" {
		t.Errorf("one connection, none named: %+v %v", c, err)
	}
	if _, _, err := llm.ParseConfig(json.RawMessage(`{"connection":"other",` + one + `}`)); err == nil || !strings.Contains(err.Error(), `connection: "other"`) {
		t.Errorf("one connection, another named: %v", err)
	}
}

// Through the host: the config block's connection picks which provider
// answers, and a bad one stops the plugin's configuration.
func TestConnectionPicksTheProvider(t *testing.T) {
	first, second := newFakeLLM(t, nil), newFakeLLM(t, nil)
	cfg := func(connection string) map[string]any {
		return map[string]any{"connection": connection, "connections": []any{
			map[string]any{"slug": "first", "kind": "openai", "base_url": first.URL + "/v1", "model": "m1"},
			map[string]any{"slug": "second", "kind": "openai", "base_url": second.URL + "/v1", "model": "m2"},
		}}
	}
	c := sdktest.Start(t, sdkPluginQuiet(), cfg("second"))
	if _, err := c.Invoke(context.Background(), "llm.ask", alice, map[string]any{"question": "hi"}); err != nil {
		t.Fatal(err)
	}
	if len(first.requests()) != 0 || len(second.requests()) != 1 || second.last(t).Body.Model != "m2" {
		t.Errorf("first saw %d, second %d requests", len(first.requests()), len(second.requests()))
	}

	if _, err := sdktest.StartErr(t, sdkPluginQuiet(), cfg("third")); err == nil || !strings.Contains(err.Error(), `llm config: connection: "third"`) {
		t.Errorf("configure with an unknown connection: %v", err)
	}
}
