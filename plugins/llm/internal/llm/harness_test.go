package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/mapping"

	"github.com/capgate/capgate/plugins/llm/internal/llm"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

// testKey is distinctive so a leak anywhere is found by a plain search.
const testKey = "sk-capgate-LEAKCANARY-7f3a9c21e5"

// alice is the caller of every test call.
var alice = sdk.Principal{Role: "customer", Scope: "read", UserID: "alice"}

// chatRequest is the part of a Chat Completions request the tests read.
type chatRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// seen is one request the fake provider received.
type seen struct {
	Path          string
	Authorization string
	Body          chatRequest
	Raw           string
}

// prompt is every message's content, joined.
func (s seen) prompt() string {
	var b strings.Builder
	for _, m := range s.Body.Messages {
		b.WriteString(m.Role + ": " + m.Content + "\n")
	}
	return b.String()
}

// fakeLLM is an OpenAI-compatible Chat Completions server: it records each
// request and answers with handle (n counts requests from 1), by default a
// well-formed completion.
type fakeLLM struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []seen
	handle func(w http.ResponseWriter, r *http.Request, n int)
}

func newFakeLLM(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *fakeLLM {
	f := &fakeLLM{handle: handle}
	if f.handle == nil {
		f.handle = func(w http.ResponseWriter, _ *http.Request, _ int) {
			writeCompletion(w, "Aurora room has a projector [1].")
		}
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		s := seen{Path: r.URL.Path, Authorization: r.Header.Get("Authorization"), Raw: string(raw)}
		_ = json.Unmarshal(raw, &s.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, s)
		n := len(f.reqs)
		f.mu.Unlock()
		f.handle(w, r, n)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLLM) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func (f *fakeLLM) last(t *testing.T) seen {
	t.Helper()
	r := f.requests()
	if len(r) == 0 {
		t.Fatal("the provider received no request")
	}
	return r[len(r)-1]
}

func writeCompletion(w http.ResponseWriter, answer string) {
	writeCompletionFrom(w, "served-model-2024", answer)
}

// writeCompletionFrom answers a completion naming model as the one that
// answered.
func writeCompletionFrom(w http.ResponseWriter, model, answer string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1700000000, "model": model,
		"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": answer},
		}},
		"usage": map[string]any{"prompt_tokens": 321, "completion_tokens": 12, "total_tokens": 333},
	})
}

// writeError answers OpenAI's error shape; the message echoes the request's
// Authorization header, as some providers echo a wrong key, so the tests see
// whether the key travels any further.
func writeError(w http.ResponseWriter, r *http.Request, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg + " (credentials: " + r.Header.Get("Authorization") + ")", "type": typ, "code": code,
	}})
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The fixture catalogue: what platform.search / platform.get serve.
type record struct {
	entity, id, title string
	data              map[string]any
}

var records = []record{
	{"booking.resource", "room-aurora", "Aurora room", map[string]any{
		"name": "Aurora room", "capacity": 12, "features": []string{"projector", "whiteboard"}, "floor": "AURORA-FLOOR-SEVEN",
	}},
	{"booking.resource", "room-gone", "Gone room with projector", nil}, // indexed, but platform.get no longer finds it
	{"booking.resource", "desk-12", "Standing desk 12", map[string]any{"name": "Standing desk 12", "features": []string{"projector arm"}}},
	{"subscription.plan", "plan-pro", "Pro plan projector bundle", map[string]any{"price": "49 EUR", "code": "PLAN-PRO-CODE"}},
}

// The search's limits on one query, as its contract states them.
const (
	searchMaxQueryLen = platform.MaxQueryLen
	searchMaxTerms    = platform.MaxQueryTerms
)

// analyzer is the one the search index analyzes queries with: bleve's
// standard analyzer (Unicode word splitting, lower case, English stop
// words), so the stand-in counts a query's terms as the search does.
var analyzer = func() analysis.Analyzer {
	a := mapping.NewIndexMapping().AnalyzerNamed(standard.Name)
	if a == nil {
		panic("bleve's standard analyzer is missing")
	}
	return a
}()

// searchTerms analyzes q as the search index does; a quoted phrase's words
// count as terms too.
func searchTerms(q string) []string {
	var out []string
	for _, tok := range analyzer.Analyze([]byte(strings.ReplaceAll(q, `"`, " "))) {
		out = append(out, string(tok.Term))
	}
	return out
}

// searchLimitError is the search plugin's refusal of a query over its
// limits, or nil.
func searchLimitError(q string) error {
	q = strings.TrimSpace(q)
	if n := utf8.RuneCountInString(q); n > searchMaxQueryLen {
		return sdk.InvalidInput("query is %d characters long; at most %d are accepted: keep the words that matter", n, searchMaxQueryLen)
	}
	if n := len(searchTerms(q)); n > searchMaxTerms {
		return sdk.InvalidInput("query has %d search terms; at most %d are accepted (the words of quoted phrases count, "+
			"stop words such as \"the\" and \"of\" do not): keep the words that matter", n, searchMaxTerms)
	}
	return nil
}

// catalogue is a stand-in for the search plugin (internal to its own
// plugin, so not importable) on the same contract (sdk/platform), pack
// and permission: platform.search refuses queries over the search's
// limits as it does, and matches any analyzed query term of 3+ letters in
// a record's title or data, in the order of records.
type catalogue struct {
	// getPermission, when set, is the permission platform.get requires
	// instead of catalogue.read, so a test can let a caller search but
	// not read records.
	getPermission string

	mu       sync.Mutex
	searches []map[string]any
	gets     []string
}

// lastQuery is the query of the last search the stand-in received.
func (c *catalogue) lastQuery(t *testing.T) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.searches) == 0 {
		t.Fatal(platform.SearchName + " was not called")
	}
	return c.searches[len(c.searches)-1]["query"].(string)
}

// reached reports how many searches and gets the stand-in has served.
func (c *catalogue) reached() (searches, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.searches), len(c.gets)
}

// permCatalogue is the search plugin's permission.
const permCatalogue = "catalogue.read"

func (c *catalogue) plugin() *sdk.Plugin {
	p := sdk.New("search", "test")
	sdk.Add(p, sdk.Tool[platform.SearchIn, platform.SearchOut]{
		Name: platform.SearchName, Kind: sdk.Read, Permission: permCatalogue,
		Handler: func(_ context.Context, _ sdk.Call, in platform.SearchIn) (platform.SearchOut, error) {
			c.mu.Lock()
			c.searches = append(c.searches, map[string]any{"query": in.Query, "entity": in.Entity, "limit": in.Limit})
			c.mu.Unlock()
			if err := searchLimitError(in.Query); err != nil {
				return platform.SearchOut{}, err
			}
			if in.Entity != "" && in.Entity != "booking.resource" && in.Entity != "subscription.plan" {
				return platform.SearchOut{}, sdk.InvalidInput("unknown entity type %q; known: booking.resource, subscription.plan", in.Entity)
			}
			out := platform.SearchOut{Hits: []platform.Hit{}}
			for i, r := range records {
				if in.Entity != "" && r.entity != in.Entity {
					continue
				}
				data, _ := json.Marshal(r.data)
				text := strings.ToLower(r.title + " " + string(data))
				for _, w := range searchTerms(in.Query) {
					if len(w) >= 3 && strings.Contains(text, w) {
						out.Hits = append(out.Hits, platform.Hit{Entity: r.entity, ID: r.id, Title: r.title, Snippet: "snippet of " + r.title, Score: float64(10 - i)})
						break
					}
				}
			}
			if in.Limit > 0 && len(out.Hits) > in.Limit {
				out.Hits = out.Hits[:in.Limit]
			}
			return out, nil
		},
	})
	getPerm := permCatalogue
	if c.getPermission != "" {
		getPerm = c.getPermission
	}
	sdk.Add(p, sdk.Tool[platform.GetIn, platform.GetOut]{
		Name: platform.GetName, Kind: sdk.Read, Permission: getPerm,
		Handler: func(_ context.Context, _ sdk.Call, in platform.GetIn) (platform.GetOut, error) {
			c.mu.Lock()
			c.gets = append(c.gets, in.ID)
			c.mu.Unlock()
			for _, r := range records {
				if r.entity == in.Entity && r.id == in.ID && r.data != nil {
					return platform.GetOut{Entity: r.entity, ID: r.id, Record: r.data}, nil
				}
			}
			return platform.GetOut{}, sdk.NotFound("no %s %q", in.Entity, in.ID)
		},
	})
	return p
}

// rig is a host with the llm plugin (and, unless noCatalogue, the catalogue
// stand-in) over a fake provider.
type rig struct {
	host *sdktest.Host
	llm  *sdktest.Client
	fake *fakeLLM
	cat  *catalogue
	logs *syncBuffer
}

type rigOpts struct {
	handle      func(w http.ResponseWriter, r *http.Request, n int)
	conn        map[string]any // merged over the default connection
	noCatalogue bool
	// roles is the gate's policy (sdktest.Host.Roles): nil lets every
	// role call everything.
	roles map[string][]string
	// getPermission is the stand-in platform.get's permission (see
	// catalogue).
	getPermission string
	maxResults    int
}

func newRig(t *testing.T, o rigOpts) *rig {
	t.Helper()
	r := &rig{fake: newFakeLLM(t, o.handle), cat: &catalogue{getPermission: o.getPermission}, logs: &syncBuffer{}}
	r.host = sdktest.NewHost(t)
	r.host.Roles = o.roles
	r.host.MaxResults = o.maxResults
	if !o.noCatalogue {
		if _, err := r.host.Add(r.cat.plugin(), nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	conn := map[string]any{
		"slug": "test", "kind": "openai", "base_url": r.fake.URL + "/v1", "model": "test-model",
		"api_key": testKey, "timeout": "5s", "max_tokens": 256,
	}
	for k, v := range o.conn {
		conn[k] = v
	}
	p := sdk.New("llm", "test")
	llm.Register(p, llm.Options{Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c, err := r.host.Add(p, map[string]any{"connections": []any{conn}}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.llm = c
	if err := r.host.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return r
}

// ask calls llm.ask as alice and returns the decoded result, or the
// failure the agent gets (an *sdk.Error, the gate's own argument check
// included), or any other error.
func (r *rig) ask(t *testing.T, ctx context.Context, args any) (llm.AskOut, *sdk.Error, error) {
	t.Helper()
	return r.askAs(t, ctx, alice, args)
}

// invoke calls llm.ask as alice and returns its result, or the failure
// the agent gets, or any other error.
func (r *rig) invoke(ctx context.Context, args any) (json.RawMessage, *sdk.Error, error) {
	return r.invokeAs(ctx, alice, args)
}

func (r *rig) invokeAs(ctx context.Context, pr sdk.Principal, args any) (json.RawMessage, *sdk.Error, error) {
	raw, err := r.llm.Invoke(ctx, "llm.ask", pr, args)
	var te *sdk.Error
	if errors.As(err, &te) {
		return nil, te, nil
	}
	return raw, nil, err
}

// askAs is ask as pr.
func (r *rig) askAs(t *testing.T, ctx context.Context, pr sdk.Principal, args any) (llm.AskOut, *sdk.Error, error) {
	t.Helper()
	raw, te, err := r.invokeAs(ctx, pr, args)
	var out llm.AskOut
	if err == nil && te == nil {
		if jerr := json.Unmarshal(raw, &out); jerr != nil {
			t.Fatalf("decode %s: %v", raw, jerr)
		}
		if strings.Contains(string(raw), `"sources":null`) {
			t.Errorf("sources is null in %s; want a list", raw)
		}
	}
	return out, te, err
}

func sourceIDs(s []llm.Source) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.ID
	}
	return out
}
