package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// counter is a service a plugin builds when the host configures it.
type counter struct {
	base int
	docs []string
}

type counterConfig struct {
	Base int `json:"base"`
}

type addIn struct {
	N int `json:"n"`
}

type addOut struct {
	Sum int `json:"sum"`
}

func (c *counter) Add(_ context.Context, _ sdk.Call, in addIn) (addOut, error) {
	return addOut{Sum: c.base + in.N}, nil
}

func (c *counter) Owner(_ context.Context, call sdk.Call, in addIn) (string, error) {
	if in.N < 0 {
		return "", sdk.NotFound("no item %d", in.N)
	}
	return "user-1", nil
}

// counter is an EntitySource too.
func (c *counter) Documents(_ context.Context, after string, limit int) ([]sdk.Document, error) {
	var out []sdk.Document
	for _, id := range c.docs {
		if id > after && len(out) < limit {
			out = append(out, sdk.Document{ID: id, Title: "doc " + id})
		}
	}
	return out, nil
}

func (c *counter) DocumentsByID(ctx context.Context, ids []string) ([]sdk.Document, error) {
	return nil, nil
}

func (c *counter) Record(_ context.Context, id string) (any, error) {
	return map[string]any{"id": id, "base": c.base}, nil
}

// newCounter declares a plugin whose every function runs on the service
// Configure builds.
func newCounter(build func(cfg counterConfig) (*counter, error)) (*sdk.Plugin, *sdk.Configured[counter]) {
	p := sdk.New("counter", "1")
	svc := sdk.Configure(p, func(_ context.Context, _ sdk.Env, cfg counterConfig) (*counter, error) {
		return build(cfg)
	})
	sdk.Add(p, sdk.Tool[addIn, addOut]{
		Name: "counter.add", Kind: sdk.Read,
		Handler: sdk.Method(svc, (*counter).Add),
		Owner:   sdk.Method(svc, (*counter).Owner),
	})
	p.ProvideEntity(sdk.Entity{Name: "counter.doc", Source: svc})
	return p, svc
}

func TestConfigure(t *testing.T) {
	p, _ := newCounter(func(cfg counterConfig) (*counter, error) {
		return &counter{base: cfg.Base, docs: []string{"a", "b", "c"}}, nil
	})
	c := sdktest.Start(t, p, map[string]int{"base": 40})
	user := sdk.Principal{Role: "r", Scope: sdk.ScopeRead, UserID: "user-1"}
	if got := sdktest.Call[addOut](t, c, "counter.add", user, addIn{N: 2}); got.Sum != 42 {
		t.Errorf("counter.add = %+v; want the configured base in the sum", got)
	}
	// Owner runs on the same service: another user is refused.
	other := sdk.Principal{Role: "r", Scope: sdk.ScopeRead, UserID: "user-2"}
	if _, err := c.Invoke(context.Background(), "counter.add", other, addIn{N: 2}); sdk.RefusedAt(err) != sdk.StepOwnership {
		t.Errorf("another user: %v; want an ownership refusal", err)
	}
	docs, more, err := c.Documents(context.Background(), "counter.doc", "a", 10)
	if err != nil || more || len(docs) != 2 || docs[0].ID != "b" {
		t.Errorf("documents through the Configured = %v, %v, %v", docs, more, err)
	}
	rec, err := c.Record(context.Background(), "counter.doc", "x")
	if err != nil || string(rec) != `{"base":40,"id":"x"}` {
		t.Errorf("record through the Configured = %s, %v", rec, err)
	}
}

func TestConfigureFailures(t *testing.T) {
	ok := func(cfg counterConfig) (*counter, error) { return &counter{}, nil }
	for _, tc := range []struct {
		name   string
		build  func(counterConfig) (*counter, error)
		config any
		want   string
	}{
		{"an unknown key is named", ok, map[string]int{"bse": 1}, `unknown field "bse"`},
		{"a wrong type", ok, map[string]string{"base": "one"}, "cannot unmarshal"},
		{"the build's error", func(counterConfig) (*counter, error) { return nil, errors.New("disk full") }, nil, "disk full"},
		{"no service built", func(counterConfig) (*counter, error) { return nil, nil }, nil, "built no service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newCounter(tc.build)
			_, err := sdktest.StartErr(t, p, tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start = %v; want an error with %q", err, tc.want)
			}
		})
	}
}

// A plugin that reads no config refuses a block with keys: an operator's
// typo or misplaced option fails start-up instead of passing in silence.
func TestUnreadConfigRefused(t *testing.T) {
	p := sdk.New("quiet", "1")
	sdk.Add(p, sdk.Tool[addIn, addOut]{Name: "quiet.add", Kind: sdk.Read,
		Handler: func(context.Context, sdk.Call, addIn) (addOut, error) { return addOut{}, nil }})
	_, err := sdktest.StartErr(t, p, map[string]int{"zeta": 1, "alpha": 2})
	if err == nil || !strings.Contains(err.Error(), "reads no config") || !strings.Contains(err.Error(), "alpha, zeta") {
		t.Fatalf("start = %v; want the unread keys named", err)
	}
	if _, err := sdktest.StartErr(t, p, map[string]int{}); err != nil {
		t.Fatalf("an empty block: %v", err)
	}
}

// Before the host configures the plugin, a bound method fails with an
// error naming the plugin instead of dereferencing nil.
func TestMethodBeforeConfigure(t *testing.T) {
	_, svc := newCounter(func(counterConfig) (*counter, error) { return &counter{}, nil })
	_, err := sdk.Method(svc, (*counter).Add)(context.Background(), sdk.Call{}, addIn{N: 1})
	if err == nil || err.Error() != "counter plugin is not configured" {
		t.Fatalf("err = %v", err)
	}
	if _, err := svc.Documents(context.Background(), "", 1); err == nil {
		t.Fatal("Documents before configure succeeded")
	}
}
