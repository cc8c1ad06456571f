package search

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/plugins/search/internal/index"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/platform"
	"github.com/capgate/capgate/sdk/sdktest"
)

// propSchema is the part of a property's schema the bounds live in.
type propSchema struct {
	Description string   `json:"description"`
	MaxLength   *int     `json:"maxLength"`
	Minimum     *float64 `json:"minimum"`
	Maximum     *float64 `json:"maximum"`
}

func inputProps(t *testing.T, c *capgatev1.Capability) map[string]propSchema {
	t.Helper()
	var s struct {
		Properties map[string]propSchema `json:"properties"`
	}
	if err := json.Unmarshal(c.InputSchema, &s); err != nil {
		t.Fatalf("%s input schema: %v", c.Name, err)
	}
	return s.Properties
}

// TestDeclaredBounds holds the bounds agents read in tools/list (and the
// host enforces) equal to those the plugin enforces itself.
func TestDeclaredBounds(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	d, err := e.client.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][2]int{ // capability → property → {maxLength, or minimum and maximum as -1 and max}
		platform.SearchName: {"query": {maxQueryLen, 0}, "entity": {maxEntityLen, 0}, "limit": {-1, maxLimit}},
		platform.GetName:    {"entity": {maxEntityLen, 0}, "id": {maxIDLen, 0}},
		platform.ListName:   {"entity": {maxEntityLen, 0}, "cursor": {maxCursorLen, 0}, "limit": {-1, maxLimit}},
	}
	for _, c := range d.Capabilities {
		props := inputProps(t, c)
		if len(props) != len(want[c.Name]) {
			t.Errorf("%s has properties %v, want bounds for %v", c.Name, props, want[c.Name])
		}
		for name, w := range want[c.Name] {
			p, ok := props[name]
			switch {
			case !ok:
				t.Errorf("%s: no property %s", c.Name, name)
			case w[0] >= 0 && (p.MaxLength == nil || *p.MaxLength != w[0]):
				t.Errorf("%s.%s maxLength %v, want %d", c.Name, name, p.MaxLength, w[0])
			case w[0] < 0 && (p.Minimum == nil || *p.Minimum != 0 || p.Maximum == nil || *p.Maximum != float64(w[1])):
				t.Errorf("%s.%s minimum %v maximum %v, want 0 and %d", c.Name, name, p.Minimum, p.Maximum, w[1])
			}
		}
	}
	// The index enforces the query's limits the contract declares.
	if index.MaxQueryLen != platform.MaxQueryLen || index.MaxTerms != platform.MaxQueryTerms {
		t.Errorf("the index allows %d characters and %d terms, the contract %d and %d",
			index.MaxQueryLen, index.MaxTerms, platform.MaxQueryLen, platform.MaxQueryTerms)
	}
	// The query's limits are in words an agent can act on.
	q := inputProps(t, d.Capabilities[0])["query"].Description
	for _, s := range []string{fmt.Sprintf("%d characters", index.MaxQueryLen), fmt.Sprintf("%d words", index.MaxTerms)} {
		if !strings.Contains(q, s) {
			t.Errorf("query description %q does not say %q", q, s)
		}
	}
	// The longest cursor platform.list can hand out fits its own bound.
	longest := encodeCursor(index.Ref{Entity: strings.Repeat("e", maxEntityLen), ID: strings.Repeat("😀", maxIDLen)})
	if len(longest) > maxCursorLen {
		t.Errorf("longest cursor has %d characters, over its bound %d", len(longest), maxCursorLen)
	}
}

// TestOverLimitInputRefused: the plugin holds its bounds itself, for a
// caller that skipped the host's schema validation (its handlers called
// directly), and through the gate the agent is refused either way (by the
// schema's bound or by the plugin), in a message that does not echo the
// input.
func TestOverLimitInputRefused(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	terms := make([]string, index.MaxTerms+1)
	for i := range terms {
		terms[i] = fmt.Sprintf("room%d", i)
	}
	cases := []struct {
		name, capability string
		args             any
		want             string
		schemaBound      bool // the gate refuses it before the plugin runs
	}{
		{"query too long", platform.SearchName, platform.SearchIn{Query: strings.Repeat("é", maxQueryLen+1)}, "query is 501 characters long; at most 500 are accepted", true},
		{"300 KB query", platform.SearchName, platform.SearchIn{Query: strings.Repeat("aurora ", 300_000/7)}, "query is 299998 characters long; at most 500 are accepted", true},
		{"too many terms", platform.SearchName, platform.SearchIn{Query: strings.Join(terms, " ")}, "query has 33 search terms; at most 32 are accepted", false},
		{"phrase words count", platform.SearchName, platform.SearchIn{Query: `"` + strings.Join(terms[:20], " ") + `" ` + strings.Join(terms[20:], " ")}, "query has 33 search terms", false},
		{"search entity too long", platform.SearchName, platform.SearchIn{Query: "room", Entity: strings.Repeat("e", maxEntityLen+1)}, "entity is 129 characters long; at most 128", true},
		{"search negative limit", platform.SearchName, platform.SearchIn{Query: "room", Limit: -1}, "limit must be 1 or more", true},
		{"get entity too long", platform.GetName, platform.GetIn{Entity: strings.Repeat("e", maxEntityLen+1), ID: "x"}, "entity is 129 characters long; at most 128", true},
		{"get id too long", platform.GetName, platform.GetIn{Entity: entRoom, ID: strings.Repeat("i", maxIDLen+1)}, "id is 257 characters long; at most 256", true},
		{"list entity too long", platform.ListName, platform.ListIn{Entity: strings.Repeat("e", maxEntityLen+1)}, "entity is 129 characters long; at most 128", true},
		{"list cursor too long", platform.ListName, platform.ListIn{Cursor: strings.Repeat("c", maxCursorLen+1)}, fmt.Sprintf("cursor is %d characters long; at most %d", maxCursorLen+1, maxCursorLen), true},
		{"list negative limit", platform.ListName, platform.ListIn{Limit: -5}, "limit must be 1 or more", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.direct(t, tc.args)
			if sdk.CodeOf(err) != sdk.CodeInvalidInput || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the plugin's own check: %v, want invalid input saying %q", err, tc.want)
			}
			if err != nil && len(err.Error()) > 300 {
				t.Errorf("the plugin's message of %d bytes echoes the input: %.100q…", len(err.Error()), err.Error())
			}
			te := e.toolError(t, tc.capability, tc.args)
			want := tc.want
			if tc.schemaBound {
				want = "invalid arguments for " + tc.capability
			}
			if te.Code != sdk.CodeInvalidInput || !strings.Contains(te.Message, want) {
				t.Errorf("through the gate: %v %q, want invalid input saying %q", te.Code, te.Message, want)
			}
			if len(te.Message) > 300 {
				t.Errorf("message of %d bytes echoes the input: %.100q…", len(te.Message), te.Message)
			}
		})
	}
	t.Run("at the limits", func(t *testing.T) {
		out := e.search(t, platform.SearchIn{Query: strings.Join(terms[:index.MaxTerms-1], " ") + " auroa", Limit: maxLimit})
		if len(out.Hits) == 0 || out.Hits[0].ID != "aurora" {
			t.Errorf("hits %v, want aurora first", hitIDs(out))
		}
	})
}

func TestQueryTimeout(t *testing.T) {
	// A timeout that has passed before the search starts: deterministic,
	// with no wait. The search must stop and say so, as an error the agent
	// can act on.
	e := run(t, smallCatalogue(), runOpts{config: map[string]any{"query_timeout": "1ns"}})
	if e.svc.queryTimeout != time.Nanosecond {
		t.Fatalf("queryTimeout %s", e.svc.queryTimeout)
	}
	te := e.toolError(t, platform.SearchName, platform.SearchIn{Query: "aurora room"})
	if te.Code != sdk.CodeInvalidInput ||
		!strings.Contains(te.Message, "took longer than 1ns and was stopped") || !strings.Contains(te.Message, "narrow the query") {
		t.Errorf("tool error %v %q", te.Code, te.Message)
	}
	// The default leaves ordinary searches alone.
	d := run(t, smallCatalogue(), runOpts{})
	if d.svc.queryTimeout != DefaultQueryTimeout {
		t.Errorf("default queryTimeout %s, want %s", d.svc.queryTimeout, DefaultQueryTimeout)
	}
	if got := hitIDs(d.search(t, platform.SearchIn{Query: "aurora"})); len(got) == 0 {
		t.Error("no hits with the default timeout")
	}
}

func TestQueryTimeoutConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
		want  string // "" = accepted
	}{
		{"duration", "250ms", ""},
		{"minutes", "1m", ""},
		{"no unit", "2", `query_timeout: "2" is not a positive Go duration such as 2s or 500ms`},
		{"words", "two seconds", `query_timeout: "two seconds" is not a positive Go duration`},
		{"zero", "0s", `query_timeout: "0s" is not a positive Go duration`},
		{"negative", "-1s", `query_timeout: "-1s" is not a positive Go duration`},
		{"a number", 2, "query_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sdktest.NewHost(t)
			p := sdk.New("search", "test")
			svc := register(p)
			_, err := h.Add(p, map[string]any{"query_timeout": tc.value}, t.TempDir())
			if err == nil {
				t.Cleanup(func() { _ = svc.close() })
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("config refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("config error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestErrorsQuoteInputShortly: an internal error reaches the host's log;
// it must not carry a caller's input whole.
func TestErrorsQuoteInputShortly(t *testing.T) {
	e := run(t, smallCatalogue(), runOpts{})
	id := failID + strings.Repeat("x", maxIDLen-len(failID))
	_, err := e.client.Invoke(context.Background(), platform.GetName, reader, platform.GetIn{Entity: entRoom, ID: id})
	if err == nil || sdk.CodeOf(err) != 0 || sdk.IsRefused(err) {
		t.Fatalf("get failing record: %v; want an internal error", err)
	}
	if msg := err.Error(); strings.Contains(msg, id) || !strings.Contains(msg, id[:40]) || len(msg) > 300 {
		t.Errorf("error %q does not quote the id shortly", msg)
	}
}
