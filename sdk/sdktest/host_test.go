package sdktest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

func provider(name string, entities ...string) *sdk.Plugin {
	p := sdk.New(name, "1")
	for _, e := range entities {
		p.ProvideEntity(sdk.Entity{Name: e, Source: emptySource{}})
	}
	return p
}

// emptySource provides an entity type without records.
type emptySource struct{}

func (emptySource) Documents(context.Context, string, int) ([]sdk.Document, error) { return nil, nil }
func (emptySource) DocumentsByID(context.Context, []string) ([]sdk.Document, error) {
	return nil, nil
}
func (emptySource) Record(_ context.Context, id string) (any, error) {
	return nil, sdk.NotFound("no %s", id)
}

// TestHostRefusesAnEntityProvidedTwice, as the host does.
func TestHostRefusesAnEntityProvidedTwice(t *testing.T) {
	h := sdktest.NewHost(t)
	for _, p := range []*sdk.Plugin{provider("one", "a.thing"), provider("two", "b.thing", "a.thing")} {
		if _, err := h.Add(p, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	err := h.Start(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), `"a.thing"`) || !strings.Contains(err.Error(), "one") || !strings.Contains(err.Error(), "two") {
		t.Fatalf("Start = %v; want a.thing named with both providers", err)
	}
}

func TestHostStartsOnce(t *testing.T) {
	h := sdktest.NewHost(t)
	if _, err := h.Add(provider("one", "a.thing"), nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err == nil {
		t.Fatal("a second Start succeeded")
	}
}

// TestHostBus: events published through Publish and by plugins share one
// bus with cursors from 1; Published shows a plugin its own.
func TestHostBus(t *testing.T) {
	h := sdktest.NewHost(t)
	var env sdk.Env
	p := provider("one")
	p.OnConfigure(func(ctx context.Context, e sdk.Env) error {
		env = e
		_, err := e.Publish(ctx, sdk.Event{Type: "one.configured", Entity: "one", ID: "1"})
		return err
	})
	c, err := h.Add(p, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Publish("other", sdktest.Event{Type: "other.thing", ID: "x"}); got != 2 {
		t.Errorf("cursor %d; want 2", got)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if cur, err := env.Publish(context.Background(), sdk.Event{Type: "one.started", Entity: "one", ID: "2", Data: map[string]int{"n": 1}}); err != nil || cur != 3 {
		t.Fatalf("publish after start: %d, %v", cur, err)
	}
	var all []string
	for _, e := range h.Events() {
		all = append(all, e.Type)
	}
	if strings.Join(all, ",") != "one.configured,other.thing,one.started" {
		t.Errorf("bus %v", all)
	}
	own := c.Published()
	if len(own) != 2 || own[0].Cursor != 1 || own[1].Cursor != 3 || string(own[1].Data) != `{"n":1}` {
		t.Errorf("published by one: %+v", own)
	}
}

// TestStopRunsOnClose: stopping a client runs the plugin's OnClose functions
// once, as sdk.Serve does when the host stops it, and the Env carries the
// host's MaxResults.
func TestStopRunsOnClose(t *testing.T) {
	var closed, maxResults int
	p := sdk.New("closer", "1")
	p.OnConfigure(func(_ context.Context, env sdk.Env) error {
		maxResults = env.MaxResults
		return nil
	})
	p.OnClose(func() error { closed++; return nil })
	h := sdktest.NewHost(t)
	h.MaxResults = 7
	c, err := h.Add(p, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if maxResults != 7 {
		t.Errorf("env.MaxResults = %d, want the host's 7", maxResults)
	}
	if closed != 0 {
		t.Fatalf("OnClose ran %d times before Stop", closed)
	}
	for range 2 {
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if closed != 1 {
		t.Errorf("OnClose ran %d times after two Stops, want once", closed)
	}
}
