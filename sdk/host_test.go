package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/capgate/capgate/internal/sdkserver"
	capgatev1 "github.com/capgate/capgate/proto/capgate/v1"
	"github.com/capgate/capgate/sdk"
	"github.com/capgate/capgate/sdk/sdktest"
)

// lifecycle records what a plugin's hooks saw.
type lifecycle struct {
	mu       sync.Mutex
	steps    []string
	confEnv  sdk.Env
	startEnv sdk.Env
	starts   []sdk.Start
}

func (l *lifecycle) step(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

func newLifecycle(startErr error) (*sdk.Plugin, *lifecycle) {
	l := &lifecycle{}
	p := sdk.New("life", "1")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		l.step("configure")
		l.confEnv = env
		_ = env.ConfigJSON() // read, as a plugin with options would
		return nil
	})
	p.OnStart(func(ctx context.Context, env sdk.Env, s sdk.Start) error {
		l.step("start")
		l.startEnv = env
		l.starts = append(l.starts, s)
		return startErr
	})
	sdk.Add(p, sdk.Tool[noteIn, noteOut]{
		Name: "life.call", Kind: sdk.Read,
		Handler: func(ctx context.Context, call sdk.Call, in noteIn) (noteOut, error) {
			l.step("call")
			return noteOut{ID: in.ID}, nil
		},
	})
	return p, l
}

func sameEnv(a, b sdk.Env) bool {
	return a.DataDir == b.DataDir && string(a.ConfigJSON()) == string(b.ConfigJSON()) && a.HostVersion == b.HostVersion &&
		a.MaxResults == b.MaxResults && a.Logger == b.Logger
}

// TestOnStartDirect drives the server as the host does, without a broker:
// OnStart runs once, on Start, with the Env OnConfigure got.
func TestOnStartDirect(t *testing.T) {
	for _, rebuild := range []bool{false, true} {
		t.Run(fmt.Sprint("rebuild=", rebuild), func(t *testing.T) {
			p, l := newLifecycle(nil)
			srv := sdkserver.NewServer(p)
			ctx := context.Background()
			dir := t.TempDir()
			_, err := srv.Configure(ctx, &capgatev1.ConfigureRequest{
				DataDir: dir, ConfigJson: []byte(`{}`), HostVersion: "v9", MaxResults: 7,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.starts) != 0 {
				t.Fatal("OnStart ran during Configure")
			}
			if _, err := srv.Start(ctx, &capgatev1.StartRequest{Rebuild: rebuild}); err != nil {
				t.Fatal(err)
			}
			if len(l.starts) != 1 || l.starts[0].Rebuild != rebuild {
				t.Fatalf("OnStart got %+v; want one Start{Rebuild: %v}", l.starts, rebuild)
			}
			if !sameEnv(l.confEnv, l.startEnv) || l.startEnv.DataDir != dir || l.startEnv.HostVersion != "v9" || l.startEnv.MaxResults != 7 {
				t.Errorf("OnStart env %+v; want OnConfigure's %+v", l.startEnv, l.confEnv)
			}
			if _, err := srv.Start(ctx, &capgatev1.StartRequest{}); status.Code(err) != codes.FailedPrecondition {
				t.Errorf("second Start: err %v; want FailedPrecondition", err)
			}
			if len(l.starts) != 1 {
				t.Errorf("OnStart ran %d times", len(l.starts))
			}
			if _, err := srv.Configure(ctx, &capgatev1.ConfigureRequest{DataDir: dir}); status.Code(err) != codes.FailedPrecondition {
				t.Errorf("second Configure: err %v; want FailedPrecondition", err)
			}
		})
	}
}

// TestStartBeforeConfigure: a Start that came too early is refused and
// changes nothing; the Start after Configure runs OnStart.
func TestStartBeforeConfigure(t *testing.T) {
	p, l := newLifecycle(nil)
	srv := sdkserver.NewServer(p)
	ctx := context.Background()
	if _, err := srv.Start(ctx, &capgatev1.StartRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Start before Configure: err %v; want FailedPrecondition", err)
	}
	if _, err := srv.Configure(ctx, &capgatev1.ConfigureRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Start(ctx, &capgatev1.StartRequest{}); err != nil {
		t.Fatalf("Start after Configure: %v", err)
	}
	if want := []string{"configure", "start"}; !slices.Equal(l.steps, want) {
		t.Errorf("steps %v; want %v", l.steps, want)
	}
}

// TestLifecycle: through the harness, the hooks run in the host's order —
// configure, (describe), start, calls.
func TestLifecycle(t *testing.T) {
	for _, rebuild := range []bool{false, true} {
		t.Run(fmt.Sprint("rebuild=", rebuild), func(t *testing.T) {
			p, l := newLifecycle(nil)
			h := sdktest.NewHost(t)
			c, err := h.Add(p, map[string]int{"x": 1}, "")
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Start(context.Background(), rebuild); err != nil {
				t.Fatal(err)
			}
			sdktest.Call[noteOut](t, c, "life.call", sdk.Principal{Role: "r", Scope: sdk.ScopeRead}, noteIn{ID: "a"})
			l.mu.Lock()
			defer l.mu.Unlock()
			if want := []string{"configure", "start", "call"}; !slices.Equal(l.steps, want) {
				t.Errorf("steps %v; want %v", l.steps, want)
			}
			if len(l.starts) != 1 || l.starts[0].Rebuild != rebuild {
				t.Errorf("starts %+v; want one with Rebuild %v", l.starts, rebuild)
			}
			if !sameEnv(l.confEnv, l.startEnv) || string(l.startEnv.ConfigJSON()) != `{"x":1}` {
				t.Errorf("OnStart env %+v; want OnConfigure's %+v", l.startEnv, l.confEnv)
			}
			if l.startEnv.MaxResults != sdk.DefaultMaxResults || sdk.DefaultMaxResults != 20 {
				t.Errorf("MaxResults %d; want the default 20 when the host sets none", l.startEnv.MaxResults)
			}
			if err := h.Start(context.Background(), rebuild); err == nil {
				t.Error("a host started twice")
			}
		})
	}
}

func TestMaxResultsDefault(t *testing.T) {
	for _, tc := range []struct {
		given uint32
		want  int
	}{{0, 20}, {1, 1}, {7, 7}, {500, 500}} {
		p, l := newLifecycle(nil)
		if _, err := sdkserver.NewServer(p).Configure(context.Background(), &capgatev1.ConfigureRequest{MaxResults: tc.given}); err != nil {
			t.Fatal(err)
		}
		if l.confEnv.MaxResults != tc.want {
			t.Errorf("max_results %d: Env.MaxResults %d; want %d", tc.given, l.confEnv.MaxResults, tc.want)
		}
	}
}

func TestOnStartError(t *testing.T) {
	p, _ := newLifecycle(errors.New("index directory is read-only"))
	_, err := sdktest.StartErr(t, p, nil)
	if err == nil || !strings.Contains(err.Error(), "index directory is read-only") {
		t.Errorf("StartErr = %v; want OnStart's error", err)
	}

	p = sdk.New("life", "1")
	p.OnStart(func(context.Context, sdk.Env, sdk.Start) error { panic("start bug") })
	if _, err := sdktest.StartErr(t, p, nil); status.Code(errors.Unwrap(err)) != codes.Internal {
		t.Errorf("StartErr of a panicking OnStart = %v; want an internal error", err)
	}
}

func TestEnvWithoutHost(t *testing.T) {
	ctx := context.Background()
	// The zero Env, and the Env of a plugin configured without host
	// services, reach no host.
	p, l := newLifecycle(nil)
	if _, err := sdkserver.NewServer(p).Configure(ctx, &capgatev1.ConfigureRequest{}); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]sdk.Env{"zero": {}, "configured without host": l.confEnv} {
		for _, tc := range []struct {
			call string
			err  error
		}{
			{"Catalogue", func() error { _, err := env.Catalogue(ctx); return err }()},
			{"Documents", func() error { _, _, err := env.Documents(ctx, "a.b", "", 0); return err }()},
			{"DocumentsByID", func() error { _, err := env.DocumentsByID(ctx, "a.b", []string{"x"}); return err }()},
			{"Record", func() error { _, err := env.Record(ctx, "a.b", "x"); return err }()},
			{"Bus", func() error { _, err := env.Bus(ctx); return err }()},
			{"Subscribe", env.Subscribe(ctx, 0, nil, func(context.Context, sdk.ReceivedEvent) error { return nil })},
			{"Publish", func() error { _, err := env.Publish(ctx, sdk.Event{Type: "a.b"}); return err }()},
		} {
			if !errors.Is(tc.err, sdk.ErrNoHost) {
				t.Errorf("%s env: %s = %v; want ErrNoHost", name, tc.call, tc.err)
			}
		}
	}
}

// library provides "library.book"; the events it publishes are what an
// indexer subscribes to.
func newLibrary(env *sdk.Env) *sdk.Plugin {
	books := map[string]string{"b1": "Dune", "b2": "Emma", "b3": "Ulysses"}
	doc := func(id string) sdk.Document { return sdk.Document{ID: id, Title: books[id], Body: "a novel"} }
	p := sdk.New("library", "2.0.0")
	p.OnConfigure(func(ctx context.Context, e sdk.Env) error {
		*env = e
		_, err := e.Publish(ctx, sdk.Event{Type: "catalogue.upsert", Entity: "library.book", ID: "b1"})
		return err
	})
	p.ProvideEntity(sdk.Entity{
		Name: "library.book", Description: "a book to borrow", Version: "7",
		Source: sdk.EntityFuncs{
			List: func(ctx context.Context, after string, limit int) ([]sdk.Document, error) {
				var out []sdk.Document
				for _, id := range []string{"b1", "b2", "b3"} {
					if id > after && len(out) < limit {
						out = append(out, doc(id))
					}
				}
				return out, nil
			},
			Get: func(ctx context.Context, ids []string) ([]sdk.Document, error) {
				var out []sdk.Document
				for _, id := range ids {
					if _, ok := books[id]; ok {
						out = append(out, doc(id))
					}
				}
				return out, nil
			},
			GetRecord: func(ctx context.Context, id string) (any, error) {
				title, ok := books[id]
				if !ok {
					return nil, sdk.NotFound("no book %q", id)
				}
				return map[string]string{"id": id, "title": title}, nil
			},
		},
	})
	return p
}

// seen is what the indexer saw of the host from its hooks.
type seen struct {
	configureCatalogueErr error
	env                   sdk.Env
	catalogue             []sdk.EntityInfo
	page                  []sdk.Document
	more                  bool
	byID                  []sdk.Document
	record                json.RawMessage
	missingErr            error
	unknownErr            error
	bus                   sdk.BusState
}

func newIndexer(s *seen) *sdk.Plugin {
	p := sdk.New("indexer", "1.0.0")
	p.OnConfigure(func(ctx context.Context, env sdk.Env) error {
		_, s.configureCatalogueErr = env.Catalogue(ctx)
		return nil
	})
	p.OnStart(func(ctx context.Context, env sdk.Env, _ sdk.Start) error {
		s.env = env
		var err error
		if s.catalogue, err = env.Catalogue(ctx); err != nil {
			return err
		}
		if s.page, s.more, err = env.Documents(ctx, "library.book", "", 2); err != nil {
			return err
		}
		if s.byID, err = env.DocumentsByID(ctx, "library.book", []string{"b3", "b9"}); err != nil {
			return err
		}
		if s.record, err = env.Record(ctx, "library.book", "b2"); err != nil {
			return err
		}
		_, s.missingErr = env.Record(ctx, "library.book", "b9")
		_, _, s.unknownErr = env.Documents(ctx, "library.nope", "", 0)
		s.bus, err = env.Bus(ctx)
		return err
	})
	return p
}

// startLibrary starts an indexer, added first so that it starts before the
// provider, and the library it reads.
func startLibrary(t *testing.T) (*seen, sdk.Env) {
	t.Helper()
	var s seen
	var libEnv sdk.Env
	h := sdktest.NewHost(t)
	if _, err := h.Add(newIndexer(&s), nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Add(newLibrary(&libEnv), nil, ""); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return &s, libEnv
}

func TestConsumerReadsTheCatalogue(t *testing.T) {
	s, _ := startLibrary(t)

	if err := s.configureCatalogueErr; err == nil || !strings.Contains(err.Error(), "FailedPrecondition") ||
		!strings.Contains(err.Error(), "starts") {
		t.Errorf("Catalogue from OnConfigure: %v; want a FailedPrecondition saying it answers once the host starts", err)
	}
	want := []sdk.EntityInfo{{Name: "library.book", Description: "a book to borrow", Version: "7", Provider: "library"}}
	if !slices.Equal(s.catalogue, want) {
		t.Errorf("catalogue %+v; want %+v", s.catalogue, want)
	}
	if len(s.page) != 2 || s.page[0].ID != "b1" || s.page[0].Title != "Dune" || s.page[1].ID != "b2" || !s.more {
		t.Errorf("first page %+v, more %v; want b1, b2 and more", s.page, s.more)
	}
	if len(s.byID) != 1 || s.byID[0].ID != "b3" || s.byID[0].Title != "Ulysses" {
		t.Errorf("documents by id %+v; want b3 alone (b9 does not exist)", s.byID)
	}
	if string(s.record) != `{"id":"b2","title":"Emma"}` {
		t.Errorf("record %s", s.record)
	}
	if !sdk.IsNotFound(s.missingErr) || !strings.Contains(s.missingErr.Error(), `no book "b9"`) {
		t.Errorf("record of a missing id: %v; want the provider's NotFound", s.missingErr)
	}
	if err := s.unknownErr; err == nil || sdk.IsNotFound(err) || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("documents of an unknown entity type: %v; want the host's NotFound status", err)
	}
	if s.bus.ID == "" || s.bus.Oldest != 1 || s.bus.Last != 1 {
		t.Errorf("bus %+v; want an id and the one event the library published while configured", s.bus)
	}
}

var errEnough = errors.New("enough")

// collect subscribes through env after cursor until n events arrived. It
// may run in a goroutine of its own, so it reports rather than fails.
// first, when not nil, is closed once the first event arrived.
func collect(env sdk.Env, after uint64, types []string, n int, first chan<- struct{}) ([]sdk.ReceivedEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []sdk.ReceivedEvent
	err := env.Subscribe(ctx, after, types, func(_ context.Context, ev sdk.ReceivedEvent) error {
		got = append(got, ev)
		if len(got) == 1 && first != nil {
			close(first)
		}
		if len(got) == n {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) {
		return got, fmt.Errorf("subscribe after %d: %v with %d events %+v; want %d", after, err, len(got), got, n)
	}
	return got, nil
}

func TestConsumerSubscribes(t *testing.T) {
	s, lib := startLibrary(t)
	ctx := context.Background()
	upserts := []string{"catalogue.upsert", "catalogue.delete"}

	// A live subscription sees what is published after it began, too: the
	// events are published once it delivered the retained one.
	type result struct {
		evs []sdk.ReceivedEvent
		err error
	}
	live := make(chan result, 1)
	subscribed := make(chan struct{})
	go func() {
		evs, err := collect(s.env, 0, upserts, 3, subscribed)
		live <- result{evs, err}
	}()
	select {
	case <-subscribed:
	case r := <-live:
		t.Fatalf("subscription ended before the first event: %v", r.err)
	}

	publish := []sdk.Event{
		{Type: "library.opened", Entity: "library", ID: "main"},
		{Type: "catalogue.upsert", Entity: "library.book", ID: "b2", Data: map[string]string{"title": "Emma"}},
		{Type: "library.loaned", Entity: "loan", ID: "l1", UserID: "alice"},
		{Type: "catalogue.delete", Entity: "library.book", ID: "b3"},
	}
	var cursors []uint64
	for _, ev := range publish {
		c, err := lib.Publish(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, c)
	}
	if !slices.Equal(cursors, []uint64{2, 3, 4, 5}) {
		t.Fatalf("cursors %v; want 2..5 after the configure-time event", cursors)
	}

	r := <-live
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := r.evs
	var ids []string
	for _, ev := range got {
		ids = append(ids, fmt.Sprintf("%d:%s/%s", ev.Cursor, ev.Type, ev.ID))
	}
	if want := []string{"1:catalogue.upsert/b1", "3:catalogue.upsert/b2", "5:catalogue.delete/b3"}; !slices.Equal(ids, want) {
		t.Errorf("filtered subscription got %v; want %v in order", ids, want)
	}
	if ev := got[1]; ev.Entity != "library.book" || string(ev.Data) != `{"title":"Emma"}` || ev.At.IsZero() || ev.UserID != "" {
		t.Errorf("event %+v", ev)
	}

	// Resuming after a cursor delivers only newer events, unfiltered.
	after, err := collect(s.env, 3, nil, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Cursor != 4 || after[0].Type != "library.loaned" || after[0].UserID != "alice" || after[1].Cursor != 5 {
		t.Errorf("resumed after 3: %+v; want cursors 4 and 5", after)
	}
	if b, err := s.env.Bus(ctx); err != nil || b.Last != 5 || b.Oldest != 1 || b.ID != s.bus.ID {
		t.Errorf("bus %+v, %v; want last 5 on the same bus", b, err)
	}

	// A subscription ends with its context.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.env.Subscribe(cctx, 5, nil, func(context.Context, sdk.ReceivedEvent) error {
			return errors.New("no event was published after 5")
		})
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled subscription returned %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled subscription did not return")
	}
}
